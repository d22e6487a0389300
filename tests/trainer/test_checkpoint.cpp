// tests/trainer/test_checkpoint.cpp: checkpoint round trip, atomic replacement, and clear errors on bad files.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <dirent.h>

#include <functional>

#include <fstream>

#include "core/errors.h"
#include "core/files.h"
#include "core/safetensors.h"
#include "models/model.h"
#include "tests/support/error_of.h"
#include "tests/support/temp_dir.h"
#include "trainer/adamw.h"
#include "trainer/checkpoint.h"
#include "trainer/sgd.h"

namespace rn50::trainer {
namespace {

using rn50::testing::file_exists;

int count_files(const std::string& dir) {
  int n = 0;
  if (DIR* d = opendir(dir.c_str())) {
    while (const dirent* e = readdir(d)) n += e->d_name[0] != '.';
    closedir(d);
  }
  return n;
}

class Checkpoint : public ::testing::Test {
 protected:
  rn50::testing::TempDir dir_;
};

void train_a_step(models::Classifier& model, Sgd& sgd) {
  sgd.set_lr(0.1);
  sgd.zero_grad();
  torch::nn::functional::cross_entropy(model.forward(torch::randn({4, 3, 32, 32})), torch::randint(3, {4})).backward();
  sgd.step();
}

TEST_F(Checkpoint, RoundTripRestoresWeightsBuffersMomentumAndMeta) {
  torch::manual_seed(5);
  auto model = models::create("resnet18", {3, true});
  Sgd sgd(*model, 0.9, 1e-4, false);
  train_a_step(*model, sgd);
  const std::string path = dir_.file("checkpoint.safetensors");
  save_checkpoint(path, *model, sgd, {"resnet18", 4, 127, 9, {"a", "b", "c"}, 8, 31, "sgd", 3});
  EXPECT_FALSE(file_exists(path + ".tmp"));

  torch::manual_seed(99);
  auto other = models::create("resnet18", {3, true});
  Sgd other_sgd(*other, 0.9, 1e-4, false);
  const CheckpointMeta meta = load_checkpoint(path, *other, other_sgd);
  EXPECT_EQ(meta.model, "resnet18");
  EXPECT_EQ(meta.epoch, 4);
  EXPECT_EQ(meta.step, 127);
  EXPECT_EQ(meta.epoch_step, 3);
  EXPECT_EQ(meta.seed, 9);
  EXPECT_EQ(meta.classes, (std::vector<std::string>{"a", "b", "c"}));
  const auto a = model->named_parameters();
  const auto b = other->named_parameters();
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(torch::equal(a[i].value(), b[i].value())) << a[i].key();
  const auto ab = model->named_buffers();
  const auto bb = other->named_buffers();
  for (size_t i = 0; i < ab.size(); ++i) EXPECT_TRUE(torch::equal(ab[i].value(), bb[i].value())) << ab[i].key();
  for (size_t i = 0; i < sgd.state().size(); ++i) {
    EXPECT_TRUE(torch::equal(sgd.state()[i].second, other_sgd.state()[i].second));
  }
  EXPECT_EQ(read_checkpoint_meta(path).step, 127);
}

TEST_F(Checkpoint, SavingReplacesThePreviousFileWhole) {
  auto model = models::create("resnet18", {3, true});
  Sgd sgd(*model, 0.9, 0, false);
  const std::string path = dir_.file("c.safetensors");
  save_checkpoint(path, *model, sgd, {"resnet18", 1, 10, 0, {"a", "b", "c"}, 8, 10});
  save_checkpoint(path, *model, sgd, {"resnet18", 2, 20, 0, {"a", "b", "c"}, 8, 10});
  EXPECT_EQ(read_checkpoint_meta(path).epoch, 2);
  EXPECT_EQ(count_files(dir_.path()), 1);
}

TEST_F(Checkpoint, BadFilesAreClearErrors) {
  auto model = models::create("resnet18", {3, true});
  Sgd sgd(*model, 0.9, 0, false);
  EXPECT_THROW(load_checkpoint(dir_.file("missing.safetensors"), *model, sgd), ConfigError);
  const std::string junk = dir_.file("junk.safetensors");
  std::ofstream(junk) << "not a checkpoint";
  EXPECT_THROW(load_checkpoint(junk, *model, sgd), ConfigError);

  // A checkpoint of another architecture: the error names the first mis-shaped or missing tensor.
  const std::string r34 = dir_.file("r34.safetensors");
  auto big = models::create("resnet34", {3, true});
  Sgd big_sgd(*big, 0.9, 0, false);
  save_checkpoint(r34, *big, big_sgd, {"resnet34", 1, 1, 0, {"a", "b", "c"}, 8, 1});
  auto with_more_classes = models::create("resnet18", {5, true});
  Sgd sgd5(*with_more_classes, 0.9, 0, false);
  const std::string r18 = dir_.file("r18.safetensors");
  save_checkpoint(r18, *model, sgd, {"resnet18", 1, 1, 0, {"a", "b", "c"}, 8, 1});
  try {
    load_checkpoint(r18, *with_more_classes, sgd5);
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("fc.weight"), std::string::npos) << e.what();
  }
  EXPECT_THROW(load_checkpoint(r34, *model, sgd), ConfigError);
}

}  // namespace
}  // namespace rn50::trainer

namespace rn50::trainer {
namespace {

const auto& config_error = rn50::testing::config_error_of;

// Metadata a resumed run trusts for its schedule is range-checked, and quoted boundedly.
TEST_F(Checkpoint, OutOfRangeMetadataIsAClearError) {
  auto model = models::create("resnet18", {3, true});
  Sgd sgd(*model, 0.9, 0, false);
  const std::string good = dir_.file("good.safetensors");
  save_checkpoint(good, *model, sgd, {"resnet18", 2, 20, 0, {"a", "b", "c"}, 8, 10});
  auto with = [&](const std::string& key, const std::string& value) {
    safetensors::File file = safetensors::read_file(good);
    file.metadata[key] = value;
    const std::string path = dir_.file("bad.safetensors");
    files::write_atomically(path, safetensors::serialize(file.tensors, file.metadata));
    return config_error([&] { load_checkpoint(path, *model, sgd); });
  };
  EXPECT_NE(with("step", "-1000").find("metadata 'step' is '-1000', not an integer in [0,"), std::string::npos);
  EXPECT_NE(with("step", "21").find("past its 2 epochs of 10 steps"), std::string::npos);
  // An epoch the steps do not reach (resumed, it would train nothing), and a mid-epoch stop's count beyond its epoch.
  EXPECT_NE(with("step", "15").find("step 15 is short of its 2 epochs of 10 steps"), std::string::npos);
  EXPECT_NE(with("epoch_step", "10").find("metadata 'epoch_step' is '10', not an integer in [0, 9]"), std::string::npos);
  EXPECT_NE(with("step", "19").find("step 19 is short of its 2 epochs of 10 steps"), std::string::npos);
  EXPECT_NE(with("epoch", "1000000").find("short of its 1000000 epochs of 10 steps"), std::string::npos);
  EXPECT_NE(with("epoch", "3x").find("metadata 'epoch' is '3x'"), std::string::npos);
  EXPECT_NE(with("batch_size", "0").find("'batch_size'"), std::string::npos);
  EXPECT_NE(with("steps_per_epoch", "99999999999999999999").find("'steps_per_epoch'"), std::string::npos);
  EXPECT_NE(with("classes", "[]").find("lists 0 classes"), std::string::npos);
  EXPECT_NE(with("classes", std::string(20000, '[') + std::string(20000, ']')).find("class list"), std::string::npos);
  const std::string long_model = with("model", std::string(100000, 'm'));
  EXPECT_NE(long_model.find("not a model name"), std::string::npos);
  EXPECT_LT(long_model.size(), 300u);
  EXPECT_EQ(with("step", "20"), "");  // the good value again loads
  EXPECT_NE(with("optimizer", "lamb").find("metadata 'optimizer' is 'lamb', not sgd or adamw"), std::string::npos);
}

// AdamW's moments and step count come back under its own names; a resumed run with another optimizer is refused with
// one line naming the key; a checkpoint that names no optimizer (written before AdamW) holds SGD's momentum.
TEST_F(Checkpoint, TheOptimizersStateRoundTripsUnderItsNameAndAMismatchIsRefused) {
  torch::manual_seed(8);
  auto model = models::create("resnet18", {3, true});
  OptimizerOptions o;
  o.kind = OptimizerOptions::Kind::kAdamW;
  AdamW adamw(*model, o);
  adamw.set_lr(1e-3);
  adamw.zero_grad();
  torch::nn::functional::cross_entropy(model->forward(torch::randn({4, 3, 32, 32})), torch::randint(3, {4})).backward();
  adamw.step();
  const std::string path = dir_.file("adamw.safetensors");
  save_checkpoint(path, *model, adamw, {"resnet18", 1, 1, 0, {"a", "b", "c"}, 4, 1});
  EXPECT_EQ(read_checkpoint_meta(path).optimizer, "adamw");
  auto other = models::create("resnet18", {3, true});
  AdamW restored(*other, o);
  load_checkpoint(path, *other, restored);
  const auto a = adamw.state(), b = restored.state();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].first, b[i].first);
    EXPECT_TRUE(torch::equal(a[i].second, b[i].second)) << a[i].first;
  }
  EXPECT_EQ(b.back().second.item<double>(), 1.0);  // the step count
  Sgd sgd(*other, 0.9, 0, false);
  const std::string refused = config_error([&] { load_checkpoint(path, *other, sgd); });
  EXPECT_NE(refused.find("config key 'optimizer': " + path + " holds adamw's state and this run uses sgd"),
            std::string::npos)
      << refused;
  // Exports leave the moments out.
  const std::string exported = dir_.file("adamw-export.safetensors");
  export_weights(path, exported);
  for (const auto& t : safetensors::read_file(exported).tensors)
    EXPECT_EQ(t.name.rfind("adamw.", 0), std::string::npos);

  const std::string old = dir_.file("old.safetensors");
  save_checkpoint(old, *model, sgd, {"resnet18", 1, 1, 0, {"a", "b", "c"}, 4, 1});
  safetensors::File file = safetensors::read_file(old);
  file.metadata.erase("optimizer");
  files::write_atomically(old, safetensors::serialize(file.tensors, file.metadata));
  EXPECT_EQ(read_checkpoint_meta(old).optimizer, "sgd");
  EXPECT_EQ(config_error([&] { load_checkpoint(old, *other, sgd); }), "");
  EXPECT_NE(config_error([&] { load_checkpoint(old, *other, restored); }).find("holds sgd's state"), std::string::npos);
}

TEST_F(Checkpoint, ExportedWeightsLoadBackIdenticallyWithoutOptimizerState) {
  torch::manual_seed(8);
  auto model = models::create("resnet18", {3, true});
  Sgd sgd(*model, 0.9, 0, false);
  train_a_step(*model, sgd);
  save_checkpoint(dir_.file("c.safetensors"), *model, sgd, {"resnet18", 1, 1, 0, {"a", "b", "c"}, 8, 1});
  export_weights(dir_.file("c.safetensors"), dir_.file("w.safetensors"));
  const auto file = safetensors::read_file(dir_.file("w.safetensors"));
  EXPECT_EQ(file.metadata.at("classes"), "[\"a\",\"b\",\"c\"]");
  EXPECT_EQ(file.tensors.size(), model->named_parameters().size() + model->named_buffers().size());
  for (const auto& t : file.tensors) EXPECT_NE(t.name.rfind("momentum.", 0), 0u) << t.name;

  torch::manual_seed(9);
  auto other = models::create("resnet18", {3, true});
  EXPECT_NE(load_weights(dir_.file("w.safetensors"), *other, "fc").find("all"), std::string::npos);
  for (size_t i = 0; i < model->parameters().size(); ++i) {
    EXPECT_TRUE(torch::equal(model->parameters()[i], other->parameters()[i]));
  }
  for (size_t i = 0; i < model->buffers().size(); ++i)
    EXPECT_TRUE(torch::equal(model->buffers()[i], other->buffers()[i]));
}

// rn50 export checks the tensors against the model the checkpoint names (from the registry, with its class count):
// a misnamed or extra tensor was exported with exit 0, and rn50 infer then refused the file.
TEST_F(Checkpoint, ExportRefusesTensorsThatAreNotTheNamedModels) {
  auto model = models::create("resnet18", {3, true});
  Sgd sgd(*model, 0.9, 0, false);
  const std::string good = dir_.file("good.safetensors");
  save_checkpoint(good, *model, sgd, {"resnet18", 1, 1, 0, {"a", "b", "c"}, 8, 1});
  auto exported_with = [&](const std::function<void(safetensors::File&)>& change) {
    safetensors::File file = safetensors::read_file(good);
    change(file);
    const std::string path = dir_.file("bad.safetensors");
    files::write_atomically(path, safetensors::serialize(file.tensors, file.metadata));
    return config_error([&] { export_weights(path, dir_.file("out.safetensors")); });
  };
  const std::string prefix = "checkpoint " + dir_.file("bad.safetensors");
  auto renamed = [](const std::string& from, const std::string& to) {
    return [=](safetensors::File& f) {
      for (auto& t : f.tensors)
        if (t.name == from) t.name = to;
    };
  };
  EXPECT_EQ(exported_with(renamed("layer1.0.bn1.weight", "layer1.0.bn1.weigxt")),
            prefix + " lacks layer1.0.bn1.weight");
  const uint8_t byte = 0;
  EXPECT_EQ(exported_with([&](safetensors::File& f) {
              f.tensors.push_back({"extra", safetensors::DType::U8, {1}, &byte, 1});
            }),
            prefix + " has tensors the model lacks: extra");
  EXPECT_EQ(exported_with([](safetensors::File& f) { f.metadata["classes"] = "[\"a\",\"b\"]"; }),
            prefix + " has mis-shaped fc.weight ([3, 512] for the 2 classes it lists)");
  // A list of a million names is refused by the classifier's shape before a model of that size is built.
  EXPECT_EQ(exported_with([](safetensors::File& f) {
              f.metadata["classes"] = safetensors::encode_string_list(std::vector<std::string>(1 << 20, "c"));
            }),
            prefix + " has mis-shaped fc.weight ([3, 512] for the 1048576 classes it lists)");
  EXPECT_EQ(exported_with(renamed("fc.weight", "fc.weigxt")), prefix + " lacks fc.weight");
  EXPECT_EQ(exported_with([](safetensors::File& f) { f.metadata["model"] = "resnet9"; }).rfind(
                prefix + " holds a 'resnet9', which is no model rn50 has (resnet18, resnet34, ", 0),
            0u);
  EXPECT_FALSE(file_exists(dir_.file("out.safetensors")));
  EXPECT_EQ(exported_with([](safetensors::File&) {}), "");  // the file as saved exports
}

// A classifier of the right shape in another dtype is no other class count: an error naming the dtypes, not a
// fresh classifier "(its shape differs: fine-tuning)".
TEST_F(Checkpoint, InitFromAClassifierInAnotherDtypeIsAnError) {
  auto model = models::create("resnet18", {3, true});
  const NamedTensors state = named_state(*model);
  std::vector<at::Tensor> host;
  std::vector<safetensors::TensorView> views;
  for (const auto& [name, t] : state) {
    host.push_back(name.rfind("fc.", 0) == 0 ? t.detach().to(at::kDouble).contiguous() : t.detach().contiguous());
    const at::Tensor& h = host.back();
    views.push_back({name,
                     h.scalar_type() == at::kDouble ? safetensors::DType::F64
                     : h.scalar_type() == at::kLong ? safetensors::DType::I64
                                                    : safetensors::DType::F32,
                     h.sizes().vec(), static_cast<const uint8_t*>(h.data_ptr()), static_cast<size_t>(h.nbytes())});
  }
  files::write_atomically(dir_.file("f64.safetensors"), safetensors::serialize(views, {}));
  auto target = models::create("resnet18", {3, true});
  EXPECT_EQ(config_error([&] { load_weights(dir_.file("f64.safetensors"), *target, "fc"); }),
            "config key 'init_from': " + dir_.file("f64.safetensors") +
                " has tensors of another dtype: fc.weight (F64, the model's F32), fc.bias (F64, the model's F32)");
}

TEST_F(Checkpoint, InitFromAnotherClassCountKeepsTheFreshClassifier) {
  auto source = models::create("resnet18", {10, true});
  Sgd sgd(*source, 0.9, 0, false);
  save_checkpoint(dir_.file("c.safetensors"), *source, sgd, {"resnet18", 1, 1, 0, {}});
  torch::manual_seed(4);
  auto target = models::create("resnet18", {3, true});
  const auto fc_before = target->named_parameters()["fc.weight"].clone();
  EXPECT_NE(load_weights(dir_.file("c.safetensors"), *target, "fc").find("classifier"), std::string::npos);
  EXPECT_TRUE(torch::equal(target->named_parameters()["fc.weight"], fc_before));
  EXPECT_TRUE(torch::equal(target->named_parameters()["conv1.weight"], source->named_parameters()["conv1.weight"]));
}

TEST_F(Checkpoint, InitFromNamesMissingMisshapedAndExtraTensors) {
  auto r18 = models::create("resnet18", {3, true});
  auto r34 = models::create("resnet34", {3, true});
  Sgd sgd18(*r18, 0.9, 0, false), sgd34(*r34, 0.9, 0, false);
  save_checkpoint(dir_.file("r18.safetensors"), *r18, sgd18, {"resnet18", 1, 1, 0, {}});
  save_checkpoint(dir_.file("r34.safetensors"), *r34, sgd34, {"resnet34", 1, 1, 0, {}});
  // resnet34 from resnet18's weights: layer1.2 and more are missing.
  EXPECT_NE(config_error([&] { load_weights(dir_.file("r18.safetensors"), *r34, "fc"); }).find("lacks layer1.2."),
            std::string::npos);
  // resnet18 from resnet34's weights: every tensor is there, but resnet34 has more.
  EXPECT_NE(config_error([&] { load_weights(dir_.file("r34.safetensors"), *r18, "fc"); }).find("model lacks"),
            std::string::npos);
  // A mis-shaped tensor outside the classifier is named.
  auto wide = models::create("resnet50", {3, true});
  Sgd sgd50(*wide, 0.9, 0, false);
  save_checkpoint(dir_.file("r50.safetensors"), *wide, sgd50, {"resnet50", 1, 1, 0, {}});
  EXPECT_NE(config_error([&] { load_weights(dir_.file("r50.safetensors"), *r18, "fc"); }).find("mis-shaped"),
            std::string::npos);
}

}  // namespace
}  // namespace rn50::trainer

namespace rn50::trainer {
namespace {

TEST_F(Checkpoint, ExtraStateSuchAsTheLossScaleRoundTripsAndStaysOutOfExports) {
  auto model = models::create("resnet18", {3, true});
  Sgd sgd(*model, 0.9, 0, false);
  const ExtraState saved = {{"loss_scale", torch::full({}, 8192.0)},
                            {"loss_scale_growth_tracker", torch::full({}, 17, torch::kInt)}};
  save_checkpoint(dir_.file("c.safetensors"), *model, sgd, {"resnet18", 1, 4, 0, {"a", "b", "c"}, 16, 4}, saved);
  const ExtraState loaded = {{"loss_scale", torch::zeros({})},
                             {"loss_scale_growth_tracker", torch::zeros({}, torch::kInt)}};
  const CheckpointMeta meta = load_checkpoint(dir_.file("c.safetensors"), *model, sgd, loaded);
  EXPECT_EQ(meta.batch_size, 16);
  EXPECT_EQ(meta.steps_per_epoch, 4);
  EXPECT_EQ(loaded[0].second.item<double>(), 8192.0);
  EXPECT_EQ(loaded[1].second.item<int>(), 17);
  // A run without that state (fp32) still loads the checkpoint; an export carries weights only.
  EXPECT_NO_THROW(load_checkpoint(dir_.file("c.safetensors"), *model, sgd));
  export_weights(dir_.file("c.safetensors"), dir_.file("w.safetensors"));
  EXPECT_EQ(safetensors::read_file(dir_.file("w.safetensors")).find("state.loss_scale"), nullptr);
}

}  // namespace
}  // namespace rn50::trainer
