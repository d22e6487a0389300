// tests/e2e/test_cli.cpp: the rn50 binary as a user runs it: make-sample, train, resume, and bad input.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>

#include "codecs/jpeg_codec.h"
#include "core/files.h"
#include "core/log.h"
#include "core/safetensors.h"
#include "core/utf8.h"
#include "tests/e2e/cli.h"

namespace rn50::e2e {
namespace {

TEST_F(Cli, TrainingOnTheSampleLowersTheLossAndWritesEverything) {
  make_sample("--classes 4 --per-class 32 --val-per-class 4 --size 48");
  const Result r = rn50(small_run(path("data"), path("run")) + " --epochs 5 --log-every 2");
  ASSERT_EQ(r.code, 0) << r.output;
  const auto epochs = records(path("run") + "/metrics.jsonl", "epoch");
  ASSERT_EQ(epochs.size(), 5u);
  // Seen on this machine: 1.22 -> 0.33 train loss, 94% top-1 (chance is 25%).
  EXPECT_LT(epochs.back()["train_loss"].get<double>(), 0.8 * epochs.front()["train_loss"].get<double>());
  EXPECT_GT(epochs.back()["top1"].get<double>(), 0.5);
  for (const auto& key : {"wall_s", "images_per_s", "data_wait_s", "compute_s", "train_loss", "val_loss", "top1",
                          "top5", "lr", "peak_host_rss_gib", "bad_samples", "others_cpu_cores"}) {
    EXPECT_TRUE(epochs.back().contains(key)) << key;
  }
  // Linux has /proc/stat: a number of cores (rn50 compare's measure of other work on the host), never null here.
  EXPECT_GE(epochs.back()["others_cpu_cores"].get<double>(), 0.0);
  EXPECT_TRUE(epochs.back()["peak_gpu_mem_gib"].is_null());  // unavailable on the CPU, never 0
  EXPECT_EQ(epochs.back()["bad_samples"], 0);
  EXPECT_EQ(epochs.back()["steps"], 8);
  EXPECT_EQ(records(path("run") + "/metrics.jsonl", "step").size(), 20u);
  EXPECT_TRUE(fs::exists(path("run") + "/checkpoint.safetensors"));
  EXPECT_TRUE(fs::exists(path("run") + "/config.yaml"));
  EXPECT_TRUE(fs::exists(path("run") + "/train.log"));
}

TEST_F(Cli, ResumedRunTakesTheSameNextStepAsAnUninterruptedOne) {
  make_sample("--classes 3 --per-class 11 --val-per-class 2 --size 32");
  const std::string options = " --log-every 1 --validate=off --seed 7 --image-size 32";
  const Result whole = rn50(small_run(path("data"), path("whole")) + options + " --epochs 2");
  ASSERT_EQ(whole.code, 0) << whole.output;
  const Result first = rn50(small_run(path("data"), path("split")) + options + " --epochs 1");
  ASSERT_EQ(first.code, 0) << first.output;
  // Two epochs where the first run had one: a changed schedule, which a resume takes only when told.
  const Result second = rn50(small_run(path("data"), path("split")) + options +
                             " --epochs 2 --resume-override --resume " + path("split") + "/checkpoint.safetensors");
  ASSERT_EQ(second.code, 0) << second.output;
  const auto a = records(path("whole") + "/metrics.jsonl", "step");
  const auto b = records(path("split") + "/metrics.jsonl", "step");
  ASSERT_EQ(a.size(), 4u);
  ASSERT_EQ(b.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(a[i]["step"], b[i]["step"]);
    EXPECT_NEAR(a[i]["loss"].get<double>(), b[i]["loss"].get<double>(), 1e-5) << "step " << a[i]["step"];
  }
}

// A run ends with one line saying what it did and where its best epoch is; that epoch's checkpoint is kept as
// checkpoint_best.safetensors; a warm-up longer than the run is a warning at the start.
TEST_F(Cli, ARunEndsWithItsSummaryAndKeepsItsBestEpochsCheckpoint) {
  make_sample("--classes 3 --per-class 16 --val-per-class 8 --size 32");
  const Result r = rn50(small_run(path("data"), path("run")) +
                        " --model resnet18 --image-size 32 --val-resize 32 --epochs 3 --warmup-epochs 4");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("warmup_epochs 4 is not shorter than the run's 3 epochs"), std::string::npos) << r.output;
  const auto epochs = records(path("run") + "/metrics.jsonl", "epoch");
  ASSERT_EQ(epochs.size(), 3u);
  size_t best = 0;
  for (size_t i = 1; i < epochs.size(); ++i) {
    if (epochs[i]["top1"].get<double>() > epochs[best]["top1"].get<double>()) best = i;
  }
  EXPECT_NE(r.output.find(strprintf("finished: 3 epochs in ")), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(strprintf("best top-1 %.2f%% at epoch %d (checkpoint_best.safetensors)",
                                    100 * epochs[best]["top1"].get<double>(), static_cast<int>(best) + 1)),
            std::string::npos)
      << r.output;
  const auto meta = safetensors::read_file(path("run") + "/checkpoint_best.safetensors").metadata;
  EXPECT_EQ(meta.at("epoch"), std::to_string(best + 1));
}

// AdamW with clipping, mixup and cutmix trains the sample and resumes where it stopped (the step's random draws follow
// the seed and the epoch, so the resumed steps' losses are the uninterrupted run's); resuming with another optimizer
// stops with one line naming the key.
TEST_F(Cli, AdamWWithClippingAndMixupTrainsAndResumesExactly) {
  make_sample("--classes 3 --per-class 11 --val-per-class 2 --size 32");
  const std::string options =
      " --log-every 1 --validate=off --seed 7 --image-size 32 --optimizer adamw --lr 0.002"
      " --weight-decay 0.05 --clip-grad-norm 1 --mixup-alpha 0.8 --cutmix-alpha 1";
  const Result whole = rn50(small_run(path("data"), path("whole")) + options + " --epochs 2");
  ASSERT_EQ(whole.code, 0) << whole.output;
  // ResNet-50's 161 tensors: decay on its 53 convolutions and the classifier's weight, none on norms and biases.
  EXPECT_NE(whole.output.find("adamw: ATen's ops over 161 tensors; weight decay on 54, none on 107"), std::string::npos)
      << whole.output;
  const Result first = rn50(small_run(path("data"), path("split")) + options + " --epochs 1");
  ASSERT_EQ(first.code, 0) << first.output;
  // Two epochs where the first run had one: a changed schedule, which a resume takes only when told.
  const Result second = rn50(small_run(path("data"), path("split")) + options +
                             " --epochs 2 --resume-override --resume " + path("split") + "/checkpoint.safetensors");
  ASSERT_EQ(second.code, 0) << second.output;
  const auto a = records(path("whole") + "/metrics.jsonl", "step");
  const auto b = records(path("split") + "/metrics.jsonl", "step");
  ASSERT_EQ(a.size(), 4u);
  ASSERT_EQ(b.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_TRUE(std::isfinite(a[i]["loss"].get<double>()));
    EXPECT_NEAR(a[i]["loss"].get<double>(), b[i]["loss"].get<double>(), 1e-5) << "step " << a[i]["step"];
  }
  // The run's own configuration names adamw: another optimizer is another run, refused unless overridden; then the
  // checkpoint itself refuses, holding AdamW's state.
  const std::string sgd_resume = small_run(path("data"), path("split")) +
                                 " --optimizer sgd --seed 7 --image-size 32 --resume " + path("split") +
                                 "/checkpoint.safetensors";
  expect_exit_2_naming(sgd_resume, "'optimizer' sgd (the run's adamw)");
  expect_exit_2_naming(sgd_resume + " --resume-override",
                       "config key 'optimizer': " + path("split") + "/checkpoint.safetensors holds adamw's state");
}

// fusion: bn (and conv) on the CPU runs ATen's separate ops, says so once at start, and trains exactly as fusion: off
// does, whichever fusion_kernels (on the GPU the fused kernels are checked against ATen's ops in
// tests/ops/test_fused_batch_norm_cuda.cpp and tests/trainer/test_cuda_step.cpp).
TEST_F(Cli, FusionFallsBackOnTheCpuAndTrainsTheSame) {
  make_sample("--classes 3 --per-class 11 --val-per-class 2 --size 32");
  const std::string options = " --log-every 1 --validate=off --seed 3 --image-size 32 --epochs 1";
  const Result off = rn50(small_run(path("data"), path("off")) + options);
  ASSERT_EQ(off.code, 0) << off.output;
  const Result fused = rn50(small_run(path("data"), path("fused")) + options + " --fusion bn");
  ASSERT_EQ(fused.code, 0) << fused.output;
  EXPECT_NE(fused.output.find("fusion: bn runs ATen's separate BatchNorm, add and ReLU kernels: on the CPU"),
            std::string::npos)
      << fused.output;
  const auto a = records(path("off") + "/metrics.jsonl", "step");
  const auto b = records(path("fused") + "/metrics.jsonl", "step");
  ASSERT_EQ(a.size(), 2u);
  ASSERT_EQ(b.size(), a.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i]["loss"].get<double>(), b[i]["loss"].get<double>());
  // rn50's kernels chosen and the allocator's expandable segments asked for: the same on the CPU, and said so.
  const Result own = rn50(small_run(path("data"), path("own")) + options +
                          " --fusion bn --fusion-kernels rn50 --expandable-segments=on");
  ASSERT_EQ(own.code, 0) << own.output;
  EXPECT_NE(own.output.find("expandable_segments: unused on the CPU"), std::string::npos) << own.output;
  const auto c = records(path("own") + "/metrics.jsonl", "step");
  ASSERT_EQ(c.size(), a.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i]["loss"].get<double>(), c[i]["loss"].get<double>());
  // fusion: conv on the CPU: the bottlenecks fall back to fusion: bn, which falls back to ATen: said, and the same.
  const Result conv = rn50(small_run(path("data"), path("conv")) + options + " --fusion conv");
  ASSERT_EQ(conv.code, 0) << conv.output;
  EXPECT_NE(conv.output.find("fusion: conv runs the bottlenecks with fusion: bn's kernels: on the CPU"),
            std::string::npos)
      << conv.output;
  const auto d = records(path("conv") + "/metrics.jsonl", "step");
  ASSERT_EQ(d.size(), a.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i]["loss"].get<double>(), d[i]["loss"].get<double>());
  const Result bad = rn50(small_run(path("data"), path("bad")) + options + " --fusion convolution");
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.output.find("config key 'fusion'"), std::string::npos) << bad.output;
  const Result bad_kernels = rn50(small_run(path("data"), path("bad2")) + options + " --fusion-kernels cudnn");
  EXPECT_EQ(bad_kernels.code, 2);
  EXPECT_NE(bad_kernels.output.find("config key 'fusion_kernels'"), std::string::npos) << bad_kernels.output;
}

// An empty file, a text file and a truncated JPEG, all named .JPEG, in one class folder.
void add_bad_images(const fs::path& cls) {
  std::ofstream(cls / "empty.JPEG");
  std::ofstream(cls / "text.JPEG") << "this is not an image";
  std::ifstream good(fs::directory_iterator(cls)->path(), std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(good)), std::istreambuf_iterator<char>());
  std::ofstream(cls / "truncated.JPEG", std::ios::binary) << bytes.substr(0, bytes.size() / 2);
}

TEST_F(Cli, BadImagesAreCountedAndSkipped) {
  make_sample("--classes 3 --per-class 10 --val-per-class 2 --size 32");
  add_bad_images(*fs::directory_iterator(path("data") + "/train"));
  // 33 files, batch 11: every position is used once, so each bad file is met exactly once.
  const std::string args = small_run(path("data"), path("run")) + " --batch-size 11 --epochs 1 --validate=off";
  const Result r = rn50(args);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(records(path("run") + "/metrics.jsonl", "epoch").at(0)["bad_samples"], 3);
  EXPECT_NE(r.output.find("truncated.JPEG"), std::string::npos) << r.output;
  // More than 1% of the data lost is said each epoch, not left to the per-file lines.
  EXPECT_NE(r.output.find("epoch 1: 3 of its 33 training images (9.1%) could not be used"), std::string::npos)
      << r.output;

  const Result strict = rn50(args + " --strict-data --overwrite");
  EXPECT_EQ(strict.code, 2);
  EXPECT_EQ(strict.output.find("bad sample skipped"), std::string::npos) << strict.output;  // it stops, skips nothing
  EXPECT_TRUE(strict.output.find("empty.JPEG") != std::string::npos ||
              strict.output.find("text.JPEG") != std::string::npos ||
              strict.output.find("truncated.JPEG") != std::string::npos)
      << strict.output;
}

// Bad validation images are left out of the figures, not replaced by a neighbour (one bad image once made top-1 50%
// into 100%, its class dropping out), and 40 of them in one class (more than training's 32 consecutive replacements)
// no longer end the run after its training epoch: the figures are those of the clean split, and the counts say why.
TEST_F(Cli, BadValidationImagesAreLeftOutOfTheFigures) {
  make_sample("--classes 2 --per-class 6 --val-per-class 2 --size 32");
  const std::string args = " --batch-size 4 --epochs 1 --workers 2";
  const Result clean = rn50(small_run(path("data"), path("clean")) + args);
  ASSERT_EQ(clean.code, 0) << clean.output;
  const fs::path cls = *fs::directory_iterator(path("data") + "/val");
  for (int i = 0; i < 40; ++i) std::ofstream(cls / ("bad_" + std::to_string(i) + ".JPEG")) << "not an image";
  const Result r = rn50(small_run(path("data"), path("run")) + args);
  ASSERT_EQ(r.code, 0) << r.output;
  const auto a = records(path("clean") + "/metrics.jsonl", "epoch").at(0);
  const auto b = records(path("run") + "/metrics.jsonl", "epoch").at(0);
  EXPECT_EQ(a["val_images"], 4);
  EXPECT_EQ(a["val_bad_samples"], 0);
  EXPECT_EQ(b["val_images"], 4);
  EXPECT_EQ(b["val_bad_samples"], 40);
  EXPECT_EQ(b["bad_samples"], 40);  // training's and validation's
  EXPECT_NEAR(b["top1"].get<double>(), a["top1"].get<double>(), 1e-9);
  EXPECT_NEAR(b["val_loss"].get<double>(), a["val_loss"].get<double>(), 1e-5);
  EXPECT_TRUE(fs::exists(path("run") + "/checkpoint.safetensors"));
  EXPECT_NE(r.output.find("bad samples 40 (40 in validation, left out of its figures)"), std::string::npos) << r.output;

  // No usable validation image: no figures (not NaN), a warning, and the run goes on.
  for (const auto& c : fs::directory_iterator(path("data") + "/val")) {
    for (const auto& f : fs::directory_iterator(c.path())) std::ofstream(f.path()) << "not an image";
  }
  const Result none = rn50(small_run(path("data"), path("none")) + args);
  ASSERT_EQ(none.code, 0) << none.output;
  const auto e = records(path("none") + "/metrics.jsonl", "epoch").at(0);
  EXPECT_TRUE(e["top1"].is_null()) << e.dump();
  EXPECT_TRUE(e["val_loss"].is_null()) << e.dump();
  EXPECT_EQ(e["val_images"], 0);
  EXPECT_EQ(e["val_bad_samples"], 44);
  EXPECT_NE(none.output.find("validation: none of the 44 images of val/ could be used (44 bad)"), std::string::npos)
      << none.output;
}

// What the data makes of a run is said before it trains: an epoch of whole batches leaving more than a tenth of the
// images out (but not a max_steps cap, which the user asked for), and one class, where top-1 means nothing.
TEST_F(Cli, TheDataIsWarnedOfBeforeTraining) {
  make_sample("--classes 2 --per-class 6 --val-per-class 1 --size 32");
  const std::string one_epoch = " --epochs 1 --max-steps 1 --validate=off --report=off";
  const Result five = rn50(small_run(path("data"), path("b5")) + one_epoch + " --batch-size 5");
  ASSERT_EQ(five.code, 0) << five.output;
  EXPECT_NE(five.output.find("2 of the 12 training images are left out of each epoch: an epoch is 2 whole batches "
                             "of 5"),
            std::string::npos)
      << five.output;
  const Result four = rn50(small_run(path("data"), path("b4")) + one_epoch + " --batch-size 4");
  ASSERT_EQ(four.code, 0) << four.output;
  EXPECT_EQ(four.output.find("left out of each epoch"), std::string::npos) << four.output;  // max_steps is no loss
  const std::string gone = fs::directory_iterator(path("data") + "/train")->path().filename().string();
  for (const char* split : {"train", "val"}) fs::remove_all(path("data") + "/" + split + "/" + gone);
  const Result one = rn50(small_run(path("data"), path("one")) + one_epoch + " --batch-size 2");
  ASSERT_EQ(one.code, 0) << one.output;
  EXPECT_NE(one.output.find("the data has one class ("), std::string::npos) << one.output;
  EXPECT_NE(one.output.find("every prediction is right, so the loss and top-1 say nothing about the model"),
            std::string::npos)
      << one.output;
}

// Logits that overflow in evaluation mode (finite weights, BatchNorm statistics far from what training normalised:
// EfficientNet-B0 at batch 2 and 16 px, whose last stages normalise 2 values a channel; torchvision gives the same
// NaN with those weights) rank nothing: the epoch has no validation figures and says why, instead of "val loss -nan"
// beside a chance top-1, and no best checkpoint is chosen by it.
TEST_F(Cli, AValidationLossThatOverflowsLeavesNoFigures) {
  make_sample("--classes 2 --per-class 4 --val-per-class 2 --size 32");
  const Result r =
      rn50("train --data-root " + path("data") +
           " --model efficientnet_b0 --device cpu --image-size 16 --batch-size 2 --epochs 1 --out-dir " + path("run"));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("validation: the loss is nan (the model's outputs overflow in evaluation mode); epoch 1 has "
                          "no validation figures"),
            std::string::npos)
      << r.output;
  const auto e = records(path("run") + "/metrics.jsonl", "epoch").at(0);
  EXPECT_TRUE(e["val_loss"].is_null()) << e.dump();
  EXPECT_TRUE(e["top1"].is_null()) << e.dump();
  EXPECT_EQ(r.output.find("-nan"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(path("run") + "/checkpoint_best.safetensors"));
}

// make-sample --damaged (samples/damaged_images.h) in every class: each bad file is named and counted, the two odd but
// valid ones train, and the FIFO, the broken links and the sparse 2 GiB file cost nothing (the run finishes).
TEST_F(Cli, DamagedSampleFilesAreNamedCountedAndSkipped) {
  make_sample("--classes 2 --per-class 6 --val-per-class 2 --size 32 --damaged");
  // 6 good + 14 damaged files + 4 special entries a class = 48, batch 12: every position is used once an epoch.
  const Result r = rn50(small_run(path("data"), path("run")) + " --batch-size 12 --epochs 1 --validate=off");
  ASSERT_EQ(r.code, 0) << r.output;
  for (const char* bad : {"empty", "text", "png_signature", "truncated", "short_scan", "claims_60000x60000",
                          "claims_65535x65535", "claims_20000x9000", "zero_width", "arithmetic_cut_in_half",
                          "arithmetic_claims_13000x13000", "fifo", "link_loop", "link_dangling", "sparse_2gib"}) {
    EXPECT_NE(r.output.find(std::string("damaged_") + bad + ".JPEG"), std::string::npos) << bad << "\n" << r.output;
  }
  for (const char* good : {"trailing_bytes", "fill_bytes_before_scan", "arithmetic_coded"}) {
    EXPECT_EQ(r.output.find(std::string("damaged_") + good + ".JPEG"), std::string::npos) << good << "\n" << r.output;
  }
  EXPECT_EQ(records(path("run") + "/metrics.jsonl", "epoch").at(0)["bad_samples"].get<int>(), 30);  // 15 a class
}

// decode_memory_mb: a budget of 1 MiB, below the 8.6 MB of coefficients libjpeg holds for each of two progressive
// 1200x1200 files, which decode one at a time and train; a file over max_image_pixels is refused with its one line as
// before; the start-up table names the budget, config.yaml keeps it, and a negative one is a configuration error.
TEST_F(Cli, ATinyDecodeBudgetStillTrains) {
  make_sample("--classes 2 --per-class 10 --val-per-class 2 --size 32");
  const fs::path cls =
      path("data") + "/train/" + fs::directory_iterator(path("data") + "/train")->path().filename().string();
  auto progressive = [](int side) {
    std::vector<uint8_t> pixels(static_cast<size_t>(side) * side * 3);
    for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<uint8_t>((i / 3 % side + i / 3 / side) % 256);
    return codecs::encode_jpeg(pixels.data(), side, side, 3, 80, /*progressive=*/true);
  };
  for (const auto& [name, side] :
       {std::pair<const char*, int>{"big_0.JPEG", 1200}, {"big_1.JPEG", 1200}, {"over.JPEG", 1500}}) {
    const std::vector<uint8_t> bytes = progressive(side);
    std::ofstream(cls / name, std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  }
  // 23 files, batch 23: each is met once.
  const std::string args = small_run(path("data"), path("run")) +
                           " --batch-size 23 --workers 4 --epochs 1 --validate=off --max-image-pixels 2000000";
  const Result r = rn50(args + " --decode-memory-mb 1");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("1 MiB of images being decoded at once (decode_memory_mb)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("over.JPEG: 1500x1500 is 2250000 pixels, above max_image_pixels (2000000)"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("big_"), std::string::npos) << r.output;  // decoded, not skipped
  EXPECT_EQ(records(path("run") + "/metrics.jsonl", "epoch").at(0)["bad_samples"], 1);
  EXPECT_NE(read_text(path("run") + "/config.yaml").find("\ndecode_memory_mb: 1\n"), std::string::npos);
  expect_exit_2_naming(args + " --decode-memory-mb -1", "config key 'decode_memory_mb': must be 0 (automatic) to");
}

TEST_F(Cli, DatasetProblemsStopBeforeTrainingWithOneLine) {
  Result r = rn50("train --device cpu --data-root " + path("nowhere") + " --out-dir " + path("run"));
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.output.find(path("nowhere")), std::string::npos) << r.output;

  make_sample("--classes 2 --per-class 2 --val-per-class 1 --size 32");
  fs::create_directories(path("data") + "/train/zz_empty");
  r = rn50("train --device cpu --batch-size 2 --data-root " + path("data") + " --out-dir " + path("run"));
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.output.find("zz_empty"), std::string::npos) << r.output;

  fs::remove_all(path("data") + "/val");
  fs::remove_all(path("data") + "/train/zz_empty");
  r = rn50("train --device cpu --batch-size 2 --data-root " + path("data") + " --out-dir " + path("run"));
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.output.find("/val"), std::string::npos) << r.output;
}

// The fatal error also goes to the run's log file, not only to the console.
TEST_F(Cli, TheFatalErrorIsInTrainLogToo) {
  fs::create_directories(path("empty/train"));
  const Result r = rn50(small_run(path("empty"), path("run")) + " --epochs 1");
  EXPECT_EQ(r.code, 2);
  std::ifstream log(path("run") + "/train.log");
  const std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("rn50 train: data error: no class folders in"), std::string::npos) << text;
}

TEST_F(Cli, ConfigurationErrorsNameTheKey) {
  std::ofstream(path("bad.yaml")) << "batch_size: 8\nbatchsize: 9\n";
  expect_exit_2_naming("train --config " + path("bad.yaml"), "batchsize");
  expect_exit_2_naming("train --data-root /x --precision fp64", "precision");
  expect_exit_2_naming("train --data-root /nonexistent --model resnet51", "resnet51");  // before any data is scanned
  std::ofstream(path("nested.yaml")) << "lr_milestones: [[30], 60]\n";
  expect_exit_2_naming("train --config " + path("nested.yaml"), "lr_milestones");
  expect_exit_2_naming("train --data-root /x --no-such-option 3", "no-such-option");
  // Config files given twice apply in order, each over the one before (the last alone was once read): the first
  // one's bad value is found, and the second's key stands over the first's.
  std::ofstream(path("a.yaml")) << "lr: -1\nmomentum: 0.5\n";
  std::ofstream(path("b.yaml")) << "momentum: 0.8\n";
  expect_exit_2_naming("train --config " + path("a.yaml") + " --config " + path("b.yaml") + " --data-root /x",
                       "config key 'lr'");
  std::ofstream(path("a.yaml")) << "lr: 0.5\nmomentum: 0.5\n";
  const Result both = rn50("train --config " + path("a.yaml") + " --config " + path("b.yaml") +
                           " --data synthetic --device cpu --model resnet18 --image-size 32 --val-resize 32"
                           " --batch-size 2 --synthetic-images 4 --epochs 1 --report=off --out-dir " +
                           path("both"));
  ASSERT_EQ(both.code, 0) << both.output;
  const std::string saved = read_text(path("both") + "/config.yaml");
  EXPECT_NE(saved.find("\nlr: 0.5\n"), std::string::npos) << saved;
  EXPECT_NE(saved.find("\nmomentum: 0.8\n"), std::string::npos) << saved;
  const Result r = rn50("train --data-root /x --device cuda:0 --out-dir " + path("run"));
  EXPECT_NE(r.code, 0);  // this machine has no GPU (the GPU machine runs its own checks)
  // Several processes of one run cannot share one named GPU: one clear line, exit 2, before any rendezvous.
  expect_exit_2_naming("train --data synthetic --device cuda:0 --out-dir " + path("run"),
                       "would put all 2 processes on one GPU", "RANK=1 WORLD_SIZE=2");
  expect_exit_2_naming("train --data-root /x --device cpu --precision bf16", "precision");
  expect_exit_2_naming("train --data-root /x --device cpu --decode gpu", "'decode'");
  expect_exit_2_naming("train --data-root /x --decode npu", "cpu|gpu");
  expect_exit_2_naming("bench-decode --decode npu --files 1", "--decode");
  expect_exit_2_naming("bench-decode --decode gpu --files 1 --repeat 0", "--repeat must be at least 1 (got 0)");
  expect_exit_2_naming("bench-decode --files 1 --repeat 2", "--repeat is for --decode gpu");
  expect_exit_2_naming("bench-decode --decode gpu --files 1 --pin", "--pin is for CPU decoding");
  expect_exit_2_naming("bench-decode --files 1 --cpu-load 2", "--cpu-load is for --decode gpu");
  expect_exit_2_naming("bench-decode --files 1 --decode-stream-offset 3", "--decode-stream-offset is for --decode gpu");
  expect_exit_2_naming("bench-decode --decode gpu --files 1 --decode-stream-offset 32",
                       "--decode-stream-offset must be 0 to 31 (got 32)");
  expect_exit_2_naming("bench-decode --decode gpu --files 1 --decode-stream-offset -1",
                       "--decode-stream-offset must be 0 to 31 (got -1)");
  const std::string step_flags = "--step-model, --step-eager and --step-wgrad-inline are for --decode gpu";
  expect_exit_2_naming("bench-decode --files 1 --step-model resnet50", step_flags);
  expect_exit_2_naming("bench-decode --files 1 --step-eager", step_flags);
  expect_exit_2_naming("bench-decode --files 1 --step-wgrad-inline", step_flags);
  expect_exit_2_naming("bench-decode --decode gpu --files 1 --step-model resnet50 --batch-size 8",
                       "--step-model steps batches of 256: --batch-size must be 256 too");
  expect_exit_2_naming("bench-decode --decode gpu --files 1 --step-model nope", "--step-model: unknown model 'nope'");
  expect_exit_2_naming("bench-decode --decode gpu --files 1 --step-model resnet50 --step-ms 5",
                       "--step-ms and --step-model exclude each other");
  expect_exit_2_naming("bench-decode --decode gpu --files 1 --step-eager",
                       "--step-eager and --step-wgrad-inline are for --step-model");
  expect_exit_2_naming("bench-decode --decode gpu --files 1 --step-wgrad-inline",
                       "--step-eager and --step-wgrad-inline are for --step-model");
  expect_exit_2_naming("make-sample --out " + path("noisy") + " --noise -1",
                       "noise must be in 0..100 grey levels (got -1)");
  expect_exit_2_naming("train --data-root /x --decode-ahead-batches 5", "decode_ahead_batches");
  expect_exit_2_naming("train --data-root /x --decode gpu --gpu-decoders 5", "gpu_decoders");
  expect_exit_2_naming("train --data-root /x --gpu-decoders 2", "'gpu_decoders': needs decode: gpu");
  expect_exit_2_naming("train --data-root /x --decode gpu --decode-ahead=off --gpu-decoders 2",
                       "'gpu_decoders': needs decode_ahead");
  expect_exit_2_naming("train --data-root /x --decode-cpu-share 1.5", "decode_cpu_share");
  expect_exit_2_naming("train --data-root /x --decode-cpu-share most", "auto or a number");
  // A model that takes one image size only refuses another before the first step.
  const std::string vit = "train --data synthetic --device cpu --model vit_b_16 --image-size 64 --val-resize 64";
  expect_exit_2_naming(vit + " --out-dir " + path("vit"),
                       "config key 'image_size': vit_b_16 takes 224 px images only, not 64");
  expect_exit_2_naming("doctor --quick --model resnet51", "--model: unknown model 'resnet51'");
  // What once exited 1: a folder as --config, a key that is not a plain name, an out_dir that cannot be made.
  expect_exit_2_naming("train --data synthetic --config " + dir_.string(), "not a regular file");
  std::ofstream(path("keys.yaml")) << "[a, b]: 1\n";
  expect_exit_2_naming("train --data synthetic --config " + path("keys.yaml"), "not a plain name");
  std::ofstream(path("a_file")) << "x";
  expect_exit_2_naming("train --data synthetic --out-dir " + path("a_file") + "/run",
                       "config key 'out_dir': cannot create");
}

// A misspelt option is named as typed with the option it is nearest to (a YAML key's '_' read as '-'), on every
// command; a name near none, or a one-letter option, gets no guess.
TEST_F(Cli, AMisspeltOptionSuggestsTheNearestOne) {
  expect_exit_2_naming("train --batchsize 8",
                       "unknown option '--batchsize' (did you mean --batch-size?); rn50 train --help lists them");
  expect_exit_2_naming("train --data_root /x", "unknown option '--data_root' (did you mean --data-root?)");
  expect_exit_2_naming("train --resume-overide", "unknown option '--resume-overide' (did you mean --resume-override?)");
  expect_exit_2_naming("export --checkpont x --out y", "unknown option '--checkpont' (did you mean --checkpoint?)");
  for (const char* far : {"train --qqqqqqqq 1", "train -b 8"}) {
    const Result r = rn50(far);
    EXPECT_EQ(r.code, 2) << r.output;
    EXPECT_NE(r.output.find("unknown option '"), std::string::npos) << r.output;
    EXPECT_EQ(r.output.find("did you mean"), std::string::npos) << r.output;
  }
  expect_exit_2_naming("train -b 8", "unknown option '-b'; rn50 train --help lists them");
}

// A value an option cannot take is named with its option, and a word no option takes is refused: once "Argument
// '99999999999' failed to parse" named neither, and `--per-class 8 16` ran with the 16 dropped.
TEST_F(Cli, AValueOrWordNoOptionTakesIsNamedInOneLine) {
  const std::string sample = "make-sample --out " + path("s");
  expect_exit_2_naming(sample + " --classes 99999999999",
                       "--classes: '99999999999' is not a value it takes (out of range or of the wrong kind); rn50 "
                       "make-sample --help lists them");
  expect_exit_2_naming(sample + " --seed=-1", "--seed: '-1' is not a value it takes");
  expect_exit_2_naming("compare " + path("s") + " --epochs abc", "--epochs: 'abc' is not a value it takes");
  expect_exit_2_naming("compare " + path("s") + " --batch 4294967552",  // once 256, the value modulo 2^32
                       "--batch '4294967552' is not a batch size (1 to 16777216)");
  expect_exit_2_naming(sample + " --per-class 8 16",
                       "unexpected argument '16'; rn50 make-sample --help lists what it takes");
  expect_exit_2_naming("export --checkpoint a --out b extra", "unexpected argument 'extra'");
  expect_exit_2_naming("infer --weights a --images b --out c extra", "unexpected argument 'extra'");
  expect_exit_2_naming("export --checkpoint a --out ''", "--out is empty: name the file to write");
  expect_exit_2_naming("infer --weights a --images b --out " + dir_.string(), " is a folder: name a file");
  expect_exit_2_naming("train --data synthetic --pin-memory off",
                       "unexpected argument 'off' (on/off options take their value with '=', as in --pin-memory=off)");
  EXPECT_FALSE(fs::exists(path("s")));
}

// make-sample writes into a new or empty folder only (into an old sample it once mixed 7 class folders into a
// dataset it logged as 3), and refuses counts no sample needs before it allocates anything for them.
TEST_F(Cli, MakeSampleRefusesAFolderInUseAndCountsBeyondASample) {
  make_sample("--classes 2 --per-class 2 --val-per-class 1 --size 16");
  expect_exit_2_naming("make-sample --out " + path("data") + " --classes 3 --per-class 2 --size 16",
                       path("data") + " is not empty; a sample goes into a new or empty folder");
  size_t classes = 0;
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator(path("data") + "/train")) ++classes;
  EXPECT_EQ(classes, 2u);
  std::ofstream(path("a_file")) << "x";
  expect_exit_2_naming("make-sample --out " + path("a_file"), path("a_file") + " is not a folder");
  expect_exit_2_naming("make-sample --out " + path("big") + " --classes 2000000000",
                       "classes must be at most 100000 (got 2000000000)");
  expect_exit_2_naming("make-sample --out " + path("big") + " --per-class 2000000000",
                       "20000000160 images (classes x (per_class + val_per_class)); at most 2000000");
  EXPECT_FALSE(fs::exists(path("big")));
  // An empty folder is a new one; --damaged goes over the class folders only.
  fs::create_directories(path("empty"));
  const Result r = rn50("make-sample --out " + path("empty") + " --classes 2 --per-class 2 --size 16 --damaged");
  EXPECT_EQ(r.code, 0) << r.output;
}

// One grey image of side x side pixels as rn50 infer reads a batch: an F32 tensor "images" [1, 3, side, side].
void write_grey_images(const std::string& file, int64_t side) {
  const std::vector<float> pixels(static_cast<size_t>(3 * side * side), 0.5f);
  files::write_atomically(file, safetensors::serialize({{"images",
                                                         safetensors::DType::F32,
                                                         {1, 3, side, side},
                                                         reinterpret_cast<const uint8_t*>(pixels.data()),
                                                         pixels.size() * sizeof(float)}},
                                                       {}));
}

// The event files TensorBoard reads in a run folder.
size_t event_files(const std::string& dir) {
  size_t n = 0;
  for (const auto& entry : fs::directory_iterator(dir)) n += entry.path().filename().string().rfind("events.", 0) == 0;
  return n;
}

// A resume or a start from weights is checked before the run writes into its folder (a refused resume once left the
// refused values in the run's config.yaml, so that the run no longer resumed, and a misspelt init_from deleted the
// earlier run's event files); a resumed run continues in its checkpoint's folder, config.yaml or not, and from its
// checkpoint even when it started from init_from (which once made it refuse to resume at all).
TEST_F(Cli, AResumeIsCheckedBeforeItWritesAndContinuesInItsFolder) {
  make_sample("--classes 2 --per-class 4 --val-per-class 1 --size 16");
  const std::string train = "train --data-root " + path("data") +
                            " --model resnet18 --device cpu --image-size 16 --val-resize 16 --batch-size 2"
                            " --validate=off --report=off";
  ASSERT_EQ(rn50(train + " --epochs 1 --out-dir " + path("run")).code, 0);
  const std::string config = read_text(path("run") + "/config.yaml");
  const size_t events = event_files(path("run"));
  ASSERT_GT(events, 0u);
  expect_exit_2_naming("train --resume " + path("run") + " --resume-override --epochs 2 --seed 7",
                       "config key 'seed': 7 differs from the checkpoint's");
  EXPECT_EQ(read_text(path("run") + "/config.yaml"), config);
  expect_exit_2_naming(
      train + " --epochs 3 --out-dir " + path("run") + " --overwrite --init-from " + path("typo.safetensors"),
      path("typo.safetensors"));
  EXPECT_EQ(read_text(path("run") + "/config.yaml"), config);
  EXPECT_EQ(event_files(path("run")), events);
  // A fresh run into it without --overwrite is refused before it writes anything: the checkpoints are the earlier
  // run's to keep (a second smoke run once replaced the first's weights without a word).
  const auto checkpoint_bytes = fs::file_size(path("run") + "/checkpoint.safetensors");
  expect_exit_2_naming(train + " --epochs 1 --out-dir " + path("run"),
                       "holds an earlier run's checkpoint.safetensors; continue it with --resume " + path("run") +
                           ", or pick another --out-dir, or replace it with --overwrite");
  EXPECT_EQ(read_text(path("run") + "/config.yaml"), config);
  EXPECT_EQ(fs::file_size(path("run") + "/checkpoint.safetensors"), checkpoint_bytes);
  expect_exit_2_naming("train --resume " + path("nowhere"),
                       "config key 'resume': " + path("nowhere") + " does not exist");

  ASSERT_EQ(rn50("export --checkpoint " + path("run") + "/checkpoint.safetensors --out " + path("w.safetensors")).code,
            0);
  ASSERT_EQ(rn50(train + " --epochs 1 --out-dir " + path("ini") + " --init-from " + path("w.safetensors")).code, 0);
  Result r = rn50("train --resume " + path("ini") + " --resume-override --epochs 2");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(records(path("ini") + "/metrics.jsonl", "epoch").size(), 2u);

  // A run folder inside the dataset would become a class folder of no images, and every later run on it fail.
  expect_exit_2_naming(train + " --epochs 1 --out-dir " + path("data") + "/train/new",
                       "config key 'out_dir': " + path("data") + "/train/new is inside data_root's train/");
  EXPECT_FALSE(fs::exists(path("data") + "/train/new"));
  // A finished run resumed has no epoch left: its best epoch, but no "last 0.00%" for the epoch it did not run.
  ASSERT_EQ(rn50(train + " --epochs 1 --validate=on --out-dir " + path("validated")).code, 0);
  r = rn50("train --resume " + path("validated"));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("finished: 0 epochs"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("best top-1 "), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find(", last "), std::string::npos) << r.output;

  fs::create_directories(path("solo"));
  fs::copy_file(path("run") + "/checkpoint.safetensors", path("solo") + "/checkpoint.safetensors");
  r = rn50(train + " --resume " + path("solo") + " --resume-override --epochs 2");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(records(path("solo") + "/metrics.jsonl", "epoch").size(), 1u);  // epoch 2 only: the first was elsewhere
}

// The doctor and bench-decode check what they are given before they measure: a bogus --device once measured the CPU
// silently, a missing --data-root failed after a minute with a raw filesystem error (exit 1), and bench-decode's
// zero or negative counts printed 0 img/s with exit 0.
TEST_F(Cli, DoctorAndBenchDecodeCheckTheirOptionsBeforeMeasuring) {
  expect_exit_2_naming("doctor --quick --device bogus", "--device 'bogus': expected auto, cpu, cuda or cuda:N");
  expect_exit_2_naming("doctor --quick --data-root " + path("nowhere"),
                       "--data-root " + path("nowhere") + " is not a folder");
  expect_exit_2_naming("doctor --compare nan,0,1,0", "--compare: 'nan' is not a value it takes");
  expect_exit_2_naming("bench-decode --files 1 --threads 0", "--threads must be 1 to 1024 (got 0)");
  expect_exit_2_naming("bench-decode --files 1 --seconds -1", "--seconds must be 0.01 to 3600 (got -1)");
  expect_exit_2_naming("bench-decode --files 1 --size 0", "--size must be 16 to 4096 (got 0)");
  expect_exit_2_naming("bench-decode --files 2000000000", "--files must be 1 to 100000 (got 2000000000)");
  expect_exit_2_naming("bench-decode --files 1 --data-root " + path("nowhere"),
                       "--data-root " + path("nowhere") + " is not a folder");
}

// rn50 launch's numbers are checked before any process starts: a port past 16 bits once listened on its low 16 (70000
// on 4464), a negative grace killed the others at once, and a huge --nproc allocated until it failed.
TEST_F(Cli, LaunchRefusesNumbersItCannotUse) {
  expect_exit_2_naming("launch --nproc 2 --master-port 70000 -- train",
                       "--master-port must be a TCP port, 1 to 65535, or 0 for a free one (got 70000)");
  expect_exit_2_naming("launch --nproc 2 --master-port -5 -- train", "(got -5)");
  expect_exit_2_naming("launch --nproc 2 --grace -3 -- train", "--grace must be 0 to 3600 seconds (got -3)");
  expect_exit_2_naming("launch --nproc 100000000 -- train", "--nproc must be 1 to 256 (got 100000000)");
  expect_exit_2_naming("train --data synthetic --device cpu", "MASTER_PORT='70000' is not a TCP port (1 to 65535)",
                       "RANK=0 WORLD_SIZE=2 MASTER_PORT=70000");
}

// An output that is an input would be destroyed by the write: export over its checkpoint (the run could no longer
// resume), infer over its weights or images, a report over the run's metrics. Each is refused and the input kept.
TEST_F(Cli, NoCommandWritesOverItsOwnInput) {
  make_sample("--classes 2 --per-class 2 --val-per-class 1 --size 16");
  const std::string run = path("run");
  ASSERT_EQ(rn50("train --data-root " + path("data") +
                 " --model resnet18 --device cpu --image-size 16 --val-resize 16 --batch-size 2 --epochs 1 "
                 "--validate=off --out-dir " +
                 run)
                .code,
            0);
  const std::string checkpoint = run + "/checkpoint.safetensors";
  const auto before = fs::file_size(checkpoint);
  expect_exit_2_naming("export --checkpoint " + checkpoint + " --out " + run + "/../run/checkpoint.safetensors",
                       "is the checkpoint itself");
  EXPECT_EQ(fs::file_size(checkpoint), before);
  ASSERT_EQ(rn50("export --checkpoint " + checkpoint + " --out " + path("w.safetensors")).code, 0);
  write_grey_images(path("x.safetensors"), 16);
  const std::string infer = "infer --weights " + path("w.safetensors") + " --images " + path("x.safetensors");
  expect_exit_2_naming(infer + " --out " + path("w.safetensors"), "is the input " + path("w.safetensors"));
  expect_exit_2_naming(infer + " --out " + path("x.safetensors"), "is the input " + path("x.safetensors"));
  EXPECT_NE(safetensors::read_file(path("w.safetensors")).find("fc.weight"), nullptr);
  const auto metrics = fs::file_size(run + "/metrics.jsonl");
  expect_exit_2_naming("report " + run + " --out " + run + "/metrics.jsonl", "name a .html file");
  EXPECT_EQ(fs::file_size(run + "/metrics.jsonl"), metrics);
  EXPECT_EQ(rn50("report " + run + " --out " + path("page.html")).code, 0);     // a page of its own name is written
  EXPECT_EQ(rn50("report " + run + " --out " + run + "/report.html").code, 0);  // its own page may be replaced
  // The output is staged as OUT.tmp: an input of that name would be removed by the write (an export from
  // ck.safetensors.tmp to ck.safetensors once deleted the checkpoint).
  fs::copy_file(checkpoint, path("ck.safetensors.tmp"));
  expect_exit_2_naming("export --checkpoint " + path("ck.safetensors.tmp") + " --out " + path("ck.safetensors"),
                       "is staged as " + path("ck.safetensors.tmp") + ", which is the input");
  EXPECT_EQ(fs::file_size(path("ck.safetensors.tmp")), before);
  fs::copy_file(path("x.safetensors"), path("y.safetensors.tmp"));
  expect_exit_2_naming("infer --weights " + path("w.safetensors") + " --images " + path("y.safetensors.tmp") +
                           " --out " + path("y.safetensors"),
                       "which is the input " + path("y.safetensors.tmp"));
  EXPECT_TRUE(fs::exists(path("y.safetensors.tmp")));
  // A FIFO, a device or a link would be replaced by the write, not written to (as root, --out /dev/null once made
  // /dev/null a regular file); a missing folder is named before any work.
  ASSERT_EQ(::mkfifo(path("fifo").c_str(), 0644), 0);
  expect_exit_2_naming(infer + " --out " + path("fifo"), "is not a regular file (a device or FIFO)");
  expect_exit_2_naming("report " + run + " --out " + path("fifo"), "is not a regular file (a device or FIFO)");
  EXPECT_TRUE(fs::is_fifo(path("fifo")));
  fs::create_symlink(path("w.safetensors"), path("link.safetensors"));
  expect_exit_2_naming("export --checkpoint " + checkpoint + " --out " + path("link.safetensors"),
                       "is a symbolic link: name the file it leads to");
  expect_exit_2_naming(infer + " --out " + path("no/such/folder/y.safetensors"),
                       "the folder " + path("no/such/folder") + " does not exist");
}

// --device is checked before any work, and a shape the model cannot take is named in one line with the model: both
// once ended in LibTorch's stack trace (exit 1). ConvNeXt's 4x4 stem cannot take 2x2 images.
TEST_F(Cli, InferNamesABadDeviceOrImagesTheModelCannotTakeInOneLine) {
  const std::string run = path("run");
  ASSERT_EQ(rn50("train --data synthetic --model convnext_tiny --device cpu --image-size 32 --val-resize 32 "
                 "--batch-size 2 --max-steps 1 --epochs 1 --validate=off --report=off --out-dir " +
                 run)
                .code,
            0);
  ASSERT_EQ(rn50("export --checkpoint " + run + "/checkpoint.safetensors --out " + path("w.safetensors")).code, 0);
  fs::remove(run + "/checkpoint.safetensors");
  write_grey_images(path("x.safetensors"), 2);
  const std::string infer =
      "infer --weights " + path("w.safetensors") + " --images " + path("x.safetensors") + " --out " + path("y");
  for (const auto& [device, fragment] :
       std::vector<std::pair<std::string, std::string>>{{"foo", "--device 'foo': expected cpu, cuda or cuda:N"},
                                                        {"cuda:x", "--device 'cuda:x': expected cpu, cuda or cuda:N"},
                                                        {"cuda:99", "--device cuda:99: "}}) {
    const Result r = rn50(infer + " --device " + device);
    EXPECT_EQ(r.code, 2) << r.output;
    EXPECT_NE(r.output.find(fragment), std::string::npos) << r.output;
    EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
  }
  const Result r = rn50(infer);
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find(path("x.safetensors") + ": convnext_tiny cannot take 'images' of shape [1, 3, 2, 2]: "),
            std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("frame #"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(path("y")));
}

// A state dict as torchvision's own files can hold it: no metadata and no num_batches_tracked (saved before PyTorch
// 0.4.1), under a path that is not UTF-8. torchvision's load_state_dict fills the counters in, and so does infer,
// with the same logits; without --model the message says resnet50 was assumed (it listed 198 missing tensors).
TEST_F(Cli, InferTakesAStateDictWithoutCountersOrMetadata) {
  const std::string run = path("run");
  ASSERT_EQ(rn50("train --data synthetic --model resnet18 --device cpu --image-size 32 --val-resize 32 "
                 "--batch-size 2 --max-steps 1 --epochs 1 --validate=off --report=off --out-dir " +
                 run)
                .code,
            0);
  ASSERT_EQ(rn50("export --checkpoint " + run + "/checkpoint.safetensors --out " + path("w.safetensors")).code, 0);
  const safetensors::File exported = safetensors::read_file(path("w.safetensors"));
  std::vector<safetensors::TensorView> kept;
  for (const auto& t : exported.tensors) {
    if (t.name.find("num_batches_tracked") == std::string::npos) kept.push_back(t);
  }
  ASSERT_LT(kept.size(), exported.tensors.size());
  const std::string bare = path("w_caf\xe9.safetensors");
  files::write_atomically(bare, safetensors::serialize(kept, {}));
  write_grey_images(path("x.safetensors"), 32);
  auto infer = [&](const std::string& weights, const std::string& more, const std::string& out) {
    return rn50("infer --weights '" + weights + "' --images " + path("x.safetensors") + " --out " + out + more);
  };
  const Result assumed = infer(bare, "", path("y"));
  EXPECT_EQ(assumed.code, 2) << assumed.output;
  EXPECT_NE(assumed.output.find("names no model in its metadata, so resnet50 was assumed: give --model"),
            std::string::npos)
      << assumed.output;
  const Result r = infer(bare, " --model resnet18", path("bare.safetensors"));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("num_batches_tracked absent: 0, as torchvision sets them"), std::string::npos) << r.output;
  ASSERT_EQ(infer(path("w.safetensors"), "", path("full.safetensors")).code, 0);
  const safetensors::File a = safetensors::read_file(path("bare.safetensors"));
  const safetensors::File b = safetensors::read_file(path("full.safetensors"));
  ASSERT_NE(a.find("logits"), nullptr);
  ASSERT_NE(b.find("logits"), nullptr);
  ASSERT_EQ(a.find("logits")->bytes, b.find("logits")->bytes);
  EXPECT_EQ(std::memcmp(a.find("logits")->data, b.find("logits")->data, a.find("logits")->bytes), 0);
  EXPECT_EQ(a.metadata.at("weights"), utf8::replace_invalid(bare));  // a path that is not UTF-8 shows U+FFFD
}

// The CPU figures, and with --pin the all-thread one again with pinned threads: both positive.
TEST_F(Cli, BenchDecodeMeasuresPinnedThreadsToo) {
  const Result r = rn50("bench-decode --files 2 --seconds 0.1 --threads 2 --pin");
  ASSERT_EQ(r.code, 0) << r.output;
  const std::vector<double> unpinned = numbers_after(r.output, "train, 2 threads:");
  const std::vector<double> pinned = numbers_after(r.output, "train, 2 threads, pinned in turn to the usable CPUs:");
  ASSERT_EQ(unpinned.size(), 1u) << r.output;
  ASSERT_EQ(pinned.size(), 1u) << r.output;
  EXPECT_GT(unpinned[0], 0);
  EXPECT_GT(pinned[0], 0);
}

TEST_F(Cli, GpuDecodeWithoutNvjpegIsAClearError) {
  if (RN50_NVJPEG_BUILD) GTEST_SKIP() << "this build has nvJPEG (GpuDecodeCountsBadImagesAsTheCpuPathDoes instead)";
  make_sample("--classes 2 --per-class 4 --val-per-class 1 --size 32");
  // With a GPU, CUDA builds without nvJPEG stop at the missing library; CPU-only builds at the missing device.
  Result r = rn50("train --data-root " + path("data") + " --out-dir " + path("run") + " --batch-size 4 --decode gpu");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.output.find("'decode': gpu needs"), std::string::npos) << r.output;
  r = rn50("bench-decode --decode gpu --files 2 --seconds 0.1");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.output.find("'decode': gpu needs nvJPEG"), std::string::npos) << r.output;
}

// --repeat: one line per further decoder, then the spread of all of them, which must bracket the first's rate.
TEST_F(Cli, GpuDecodeBenchRepeatsWithANewDecoderEachTime) {
  if (!RN50_NVJPEG_BUILD) GTEST_SKIP() << "needs a build with nvJPEG, and a GPU";
  const Result r = rn50("bench-decode --decode gpu --files 4 --batch-size 8 --seconds 0.2 --repeat 3");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("decoder 2 of 3: train"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("decoder 3 of 3: train"), std::string::npos) << r.output;
  const std::vector<double> first = numbers_after(r.output, "(RandomResizedCrop + flip), GPU decode + augment:");
  const std::vector<double> spread = numbers_after(r.output, "train over 3 decoders: min");  // min, median, max
  ASSERT_EQ(first.size(), 1u) << r.output;
  ASSERT_EQ(spread.size(), 3u) << r.output;
  EXPECT_GT(spread[0], 0);
  EXPECT_LE(spread[0], spread[1]);
  EXPECT_LE(spread[1], spread[2]);
  EXPECT_GE(first[0], spread[0] - 1);  // printed rounded to whole images/s
  EXPECT_LE(first[0], spread[2] + 1);
}

// decode: gpu trains on the sample and meets the same bad files as decode: cpu (BadImagesAreCountedAndSkipped).
TEST_F(Cli, GpuDecodeCountsBadImagesAsTheCpuPathDoes) {
  if (!RN50_NVJPEG_BUILD) GTEST_SKIP() << "needs a build with nvJPEG, and a GPU";
  make_sample("--classes 3 --per-class 10 --val-per-class 2 --size 32");
  add_bad_images(*fs::directory_iterator(path("data") + "/train"));
  const std::string args = "train --data-root " + path("data") + " --out-dir " + path("run") +
                           " --device cuda:0 --decode gpu --image-size 48 --val-resize 48 --batch-size 11 --workers 2"
                           " --epochs 1 --warmup-epochs 0";
  const Result r = rn50(args);
  ASSERT_EQ(r.code, 0) << r.output;
  const auto epoch = records(path("run") + "/metrics.jsonl", "epoch").at(0);
  EXPECT_EQ(epoch["bad_samples"], 3);
  EXPECT_EQ(epoch["gpu_decode_hardware"].get<double>() + epoch["gpu_decode_hybrid"].get<double>() +
                epoch["gpu_decode_cpu_fallback"].get<double>(),
            33.0);
  EXPECT_EQ(epoch["gpu_decode_loader_cpu"].get<double>(), 0.0);
  EXPECT_NE(r.output.find("nvJPEG"), std::string::npos) << r.output;  // the (decode) row of the start-up table
  EXPECT_NE(r.output.find("truncated.JPEG"), std::string::npos) << r.output;
  // With half of each batch decoded by the loader's threads: the same bad files, every image decoded once by one
  // of the routes, and 5 of each batch of 11 by the loader (floor(11 / 2); a bad file's position takes the next
  // file, decoded there all the same).
  const Result shared = rn50(args + " --decode-cpu-share 0.5 --out-dir " + path("run_shared"));
  ASSERT_EQ(shared.code, 0) << shared.output;
  const auto half = records(path("run_shared") + "/metrics.jsonl", "epoch").at(0);
  EXPECT_EQ(half["bad_samples"], 3);
  EXPECT_EQ(half["gpu_decode_hardware"].get<double>() + half["gpu_decode_hybrid"].get<double>() +
                half["gpu_decode_cpu_fallback"].get<double>() + half["gpu_decode_loader_cpu"].get<double>(),
            33.0);
  EXPECT_EQ(half["gpu_decode_loader_cpu"].get<double>(), 15.0);
}

// decode: gpu without validation: each epoch's last N steps submit the next epoch's first N batches (N:
// decode_ahead_batches), whose routes count in the epoch during which the decode thread decoded them (30 images in
// batches of 5: an epoch counts its own batches not decoded ahead plus 0-5N images of the next epoch's, every image
// once over the run);
// with validation between epochs nothing is decoded ahead (30 each). Both train on the same batches in the same
// order (validation changes no weights), so their losses agree to within the device's floating-point
// nondeterminism; a first batch from the wrong epoch's order would not (1e-3 relative: one batch in six changed
// moves an epoch's mean loss by far more). Last, 3 ahead with a CUDA graph: captured while the decode thread works
// (LibTorch's default global capture mode refused nvJPEG's calls then), so the
// graph must be replaying after the first epoch; its losses are compared more loosely (graph against eager steps).
// Two decoders taking the batches in turn (gpu_decoders), with and without validation, train on the same batches.
TEST_F(Cli, GpuDecodeSubmitsTheNextEpochsFirstBatchesDuringTheLastSteps) {
  if (!RN50_NVJPEG_BUILD) GTEST_SKIP() << "needs a build with nvJPEG, and a GPU";
  make_sample("--classes 3 --per-class 10 --val-per-class 2 --size 32");
  std::vector<std::vector<double>> losses;
  // Batches submitted ahead (decode_ahead_batches), and whether a validation follows each epoch (then nothing of
  // the next epoch is decoded ahead).
  struct Case {
    int ahead;
    bool validate, graph;
    int decoders;
  };
  for (const Case& c : {Case{2, false, false, 1}, Case{2, true, false, 1}, Case{3, false, false, 1},
                        Case{3, false, true, 1}, Case{3, false, false, 2}, Case{2, true, false, 2}}) {
    const auto [ahead, validate, graph, decoders] = c;
    const std::string run = path("run_" + std::to_string(ahead) + (validate ? "_validated" : "") +
                                 (graph ? "_graph" : "") + "_" + std::to_string(decoders));
    const Result r = rn50("train --data-root " + path("data") + " --out-dir " + run +
                          " --device cuda:0 --decode gpu --image-size 48 --val-resize 48 --batch-size 5 --workers 2"
                          " --epochs 3 --warmup-epochs 0 --decode-ahead-batches " +
                          std::to_string(ahead) + " --validate=" + (validate ? "on" : "off") +
                          " --cuda-graph=" + (graph ? "on" : "off") + " --gpu-decoders " + std::to_string(decoders));
    ASSERT_EQ(r.code, 0) << r.output;
    std::vector<double> routed;
    losses.emplace_back();
    for (const auto& epoch : records(run + "/metrics.jsonl", "epoch")) {
      EXPECT_EQ(epoch["steps"], 6);
      if (graph && epoch["epoch"].get<int>() > 1) {
        EXPECT_EQ(epoch["cuda_graph"].get<double>(), 1.0) << r.output;
      }
      losses.back().push_back(epoch["train_loss"].get<double>());
      routed.push_back(epoch["gpu_decode_hardware"].get<double>() + epoch["gpu_decode_hybrid"].get<double>() +
                       epoch["gpu_decode_cpu_fallback"].get<double>());
    }
    ASSERT_EQ(routed.size(), 3u);
    if (validate) {
      EXPECT_EQ(routed, (std::vector<double>{30, 30, 30}));
    } else {
      EXPECT_EQ(routed[0] + routed[1] + routed[2], 90) << routed[0] << " " << routed[1] << " " << routed[2];
      EXPECT_GE(routed[0], 30);  // its own six batches were all made into input, so decoded
      EXPECT_LE(routed[0], 30 + 5 * ahead);
      EXPECT_GE(routed[2], 30 - 5 * ahead);  // `ahead` of its batches decoded ahead at most
    }
  }
  ASSERT_EQ(losses.size(), 6u);
  for (const auto& run_losses : losses) ASSERT_EQ(run_losses.size(), 3u);
  for (size_t e = 0; e < 3; ++e) {
    EXPECT_NEAR(losses[0][e], losses[1][e], 1e-3 * losses[1][e]) << "epoch " << e + 1;
    EXPECT_NEAR(losses[2][e], losses[1][e], 1e-3 * losses[1][e]) << "epoch " << e + 1 << ", 3 batches ahead";
    EXPECT_NEAR(losses[3][e], losses[1][e], 2e-2 * losses[1][e]) << "epoch " << e + 1 << ", 3 ahead, graphed";
    EXPECT_NEAR(losses[4][e], losses[1][e], 1e-3 * losses[1][e]) << "epoch " << e + 1 << ", 3 ahead, 2 decoders";
    EXPECT_NEAR(losses[5][e], losses[1][e], 1e-3 * losses[1][e]) << "epoch " << e + 1 << ", validated, 2 decoders";
  }
}

TEST_F(Cli, MigWithoutNvmlIsAClearError) {
  if (RN50_CUDA_BUILD) GTEST_SKIP() << "a CUDA build has NVML; the GPU session checks --mig there";
  Result r = rn50("train --mig list");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.output.find("'mig'"), std::string::npos) << r.output;
  r = rn50("train --data synthetic --device cpu --mig 0");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.output.find("'mig'"), std::string::npos) << r.output;
}

TEST_F(Cli, HelpListsEveryConfigKey) {
  const Result r = rn50("train --help");
  EXPECT_EQ(r.code, 0);
  for (const char* option : {"--batch-size", "--tf32", "--cuda-graph", "--strict-data", "--resume", "--lr-schedule",
                             "--label-smoothing", "--channels-last", "--precision", "--workers", "--mig"}) {
    EXPECT_NE(r.output.find(option), std::string::npos) << option;
  }
}

}  // namespace

namespace {

// Weights rn50 infer cannot use are refused before a model is built from them: a classifier stored in
// another dtype once gave logits of a random classifier with exit 0, and [2000000, 0] a 2-million-class model.
TEST_F(Cli, InferRefusesClassifiersItCannotUse) {
  namespace st = rn50::safetensors;
  const std::vector<float> pixels(3 * 8 * 8, 0.5f);
  files::write_atomically(path("x.safetensors"), st::serialize({{"images",
                                                                 st::DType::F32,
                                                                 {1, 3, 8, 8},
                                                                 reinterpret_cast<const uint8_t*>(pixels.data()),
                                                                 pixels.size() * 4}},
                                                               {}));
  auto infer_with = [&](st::DType dtype, std::vector<int64_t> shape) {
    size_t numel = 1;
    for (int64_t d : shape) numel *= static_cast<size_t>(d);
    const std::vector<uint8_t> bytes(numel * st::element_size(dtype), 0);
    files::write_atomically(path("w.safetensors"),
                            st::serialize({{"fc.weight", dtype, shape, bytes.data(), bytes.size()}}, {}));
    return rn50("infer --weights " + path("w.safetensors") + " --images " + path("x.safetensors") + " --out " +
                path("y.safetensors"));
  };
  Result r = infer_with(st::DType::F64, {10, 2048});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.output.find("'fc.weight' is F64"), std::string::npos) << r.output;
  r = infer_with(st::DType::F32, {2000000, 0});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.output.find("'fc.weight' is [2000000, 0], not a classifier of 1 to 1048576 classes"), std::string::npos)
      << r.output;
  r = infer_with(st::DType::F32, {0, 2048});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.output.find("not a classifier"), std::string::npos) << r.output;
  r = infer_with(st::DType::F32, {10, 7});  // a classifier, but the rest of the model is missing
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.output.find("lacks"), std::string::npos) << r.output;
  r = rn50("infer --weights " + path("w.safetensors") + " --images " + path("x.safetensors") + " --out " +
           path("y.safetensors") + " --model resnet9");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.output.find("--model names the model 'resnet9', which rn50 has not (resnet18, "), std::string::npos)
      << r.output;
  EXPECT_FALSE(fs::exists(path("y.safetensors")));
}

// rn50 infer sizes the model by its own classifier's name (classifier.2 for ConvNeXt, heads.head for ViT), and
// refuses a batch of an image size the model does not take.
TEST_F(Cli, InferFindsEachModelsClassifierAndImageSize) {
  namespace st = rn50::safetensors;
  const std::vector<float> pixels(3 * 8 * 8, 0.5f);
  files::write_atomically(path("x.safetensors"), st::serialize({{"images",
                                                                 st::DType::F32,
                                                                 {1, 3, 8, 8},
                                                                 reinterpret_cast<const uint8_t*>(pixels.data()),
                                                                 pixels.size() * 4}},
                                                               {}));
  const std::vector<uint8_t> bytes(10 * 768 * 4, 0);
  auto infer_with = [&](const std::string& classifier, const std::string& model) {
    files::write_atomically(path("w.safetensors"),
                            st::serialize({{classifier, st::DType::F32, {10, 768}, bytes.data(), bytes.size()}}, {}));
    return rn50("infer --weights " + path("w.safetensors") + " --model " + model + " --images " +
                path("x.safetensors") + " --out " + path("y.safetensors"));
  };
  Result r = infer_with("fc.weight", "convnext_tiny");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.output.find("has no 2-D 'classifier.2.weight' to size convnext_tiny's classifier"), std::string::npos)
      << r.output;
  r = infer_with("classifier.2.weight", "convnext_tiny");  // found: the rest of the model is missing
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.output.find("lacks"), std::string::npos) << r.output;
  r = infer_with("heads.head.weight", "vit_b_16");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.output.find("'images' is [1, 3, 8, 8]; vit_b_16 takes 224x224 images only"), std::string::npos)
      << r.output;
  EXPECT_FALSE(fs::exists(path("y.safetensors")));
}

// What rn50 export writes must load: a checkpoint whose tensors are not its model's is refused, naming them, and one
// whose step is not its epochs' steps does not resume (it once resumed past the last epoch, trained nothing, exit 0).
TEST_F(Cli, ExportAndResumeRefuseCheckpointsThatDisagreeWithThemselves) {
  namespace st = rn50::safetensors;
  make_sample("--classes 2 --per-class 8 --val-per-class 1 --size 32");
  const std::string run = small_run(path("data"), path("run")) + " --validate=off";
  ASSERT_EQ(rn50(run + " --epochs 1").code, 0);
  const st::File good = st::read_file(path("run") + "/checkpoint.safetensors");
  auto written = [&](const std::string& name, const std::function<void(st::File&)>& change) {
    st::File file = st::read_file(path("run") + "/checkpoint.safetensors");
    change(file);
    files::write_atomically(path(name), st::serialize(file.tensors, file.metadata));
    return path(name);
  };
  const std::string extra = written("extra.safetensors", [](st::File& f) {
    for (auto& t : f.tensors)
      if (t.name == "layer2.0.conv1.weight") t.name = "layer2.0.conv1.weight_";
  });
  expect_exit_2_naming("export --checkpoint " + extra + " --out " + path("w.safetensors"),
                       " lacks layer2.0.conv1.weight");
  EXPECT_FALSE(fs::exists(path("w.safetensors")));
  const std::string ahead = written("ahead.safetensors", [](st::File& f) { f.metadata["epoch"] = "5"; });
  expect_exit_2_naming(run + " --epochs 3 --resume " + ahead, "metadata step 1 is short of its 5 epochs of 1 steps");
  EXPECT_EQ(good.metadata.at("step"), "1");
}

// Class folder names are bytes: one whose name is not UTF-8 (ff fe) trains, checkpoints (its bytes escaped in the
// class list as Python's surrogateescape reads them, \udcff\udcfe), resumes (the checkpoint's list matches the scan),
// exports and gets its report. It once trained an epoch and died at the checkpoint (nlohmann type_error 316).
TEST_F(Cli, ClassFoldersNamedInAnyBytesTrainResumeExportAndReport) {
  make_sample("--classes 2 --per-class 8 --val-per-class 2 --size 32");
  const std::string odd = "\xff\xfe", accented = "caf\xc3\xa9";
  for (const char* split : {"train", "val"}) {
    std::vector<fs::path> classes;
    for (const auto& entry : fs::directory_iterator(path("data") + "/" + split)) classes.push_back(entry.path());
    std::sort(classes.begin(), classes.end());
    fs::rename(classes[0], classes[0].parent_path() / odd);
    fs::rename(classes[1], classes[1].parent_path() / accented);
  }
  const std::string run = small_run(path("data"), path("run")) + " --log-every 1";
  Result r = rn50(run + " --epochs 1");
  ASSERT_EQ(r.code, 0) << r.output;
  const std::string checkpoint = path("run") + "/checkpoint.safetensors";
  const auto stored = rn50::safetensors::read_file(checkpoint);
  EXPECT_EQ(stored.metadata.at("classes"), "[\"caf\xc3\xa9\",\"\\udcff\\udcfe\"]");  // sorted by bytes
  EXPECT_EQ(rn50::safetensors::decode_string_list(stored.metadata.at("classes")),
            (std::vector<std::string>{accented, odd}));
  r = rn50(run + " --epochs 2 --resume-override --resume " + checkpoint);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("resumed from"), std::string::npos) << r.output;
  EXPECT_EQ(records(path("run") + "/metrics.jsonl", "epoch").size(), 2u);
  r = rn50("export --checkpoint " + checkpoint + " --out " + path("w.safetensors"));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(rn50::safetensors::read_file(path("w.safetensors")).metadata.at("classes"), stored.metadata.at("classes"));
  r = rn50("report " + path("run"));
  ASSERT_EQ(r.code, 0) << r.output;
  std::ifstream page(path("run") + "/report.html", std::ios::binary);
  const std::string html((std::istreambuf_iterator<char>(page)), std::istreambuf_iterator<char>());
  EXPECT_TRUE(utf8::is_valid(html));
  EXPECT_NE(html.find("2 epoch"), std::string::npos);
}

TEST_F(Cli, ExportInferAndInitFromWorkTogether) {
  make_sample("--classes 3 --per-class 4 --val-per-class 1 --size 32");
  const std::string train = "train --data-root " + path("data") +
                            " --device cpu --image-size 32 --val-resize 32 --batch-size 4 --epochs 1 --validate=off";
  Result r = rn50(train + " --out-dir " + path("run"));
  ASSERT_EQ(r.code, 0) << r.output;
  r = rn50("export --checkpoint " + path("run") + "/checkpoint.safetensors --out " + path("w.safetensors"));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("torchvision.models.resnet50(num_classes=3) loads it"), std::string::npos) << r.output;
  const auto weights = rn50::safetensors::read_file(path("w.safetensors"));
  EXPECT_EQ(weights.metadata.at("classes").find("n0000"), 2u);
  EXPECT_NE(weights.find("fc.weight"), nullptr);
  EXPECT_NE(weights.find("layer4.1.bn3.running_var"), nullptr);

  std::vector<float> pixels(2 * 3 * 32 * 32);
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<float>((i * 7919) % 255) / 64.0f - 2.0f;
  rn50::files::write_atomically(path("x.safetensors"),
                                rn50::safetensors::serialize({{"images",
                                                               rn50::safetensors::DType::F32,
                                                               {2, 3, 32, 32},
                                                               reinterpret_cast<const uint8_t*>(pixels.data()),
                                                               pixels.size() * 4}},
                                                             {}));
  r = rn50("infer --weights " + path("w.safetensors") + " --images " + path("x.safetensors") + " --out " +
           path("y.safetensors"));
  ASSERT_EQ(r.code, 0) << r.output;
  const auto logits = rn50::safetensors::read_file(path("y.safetensors"));
  ASSERT_NE(logits.find("logits"), nullptr);
  EXPECT_EQ(logits.find("logits")->shape, (std::vector<int64_t>{2, 3}));

  // Fine-tuning start: 3 classes of weights into a 2-class dataset keeps the fresh classifier.
  fs::remove_all(*fs::directory_iterator(path("data") + "/train"));
  fs::remove_all(*fs::directory_iterator(path("data") + "/val"));
  r = rn50(train + " --out-dir " + path("ft") + " --init-from " + path("w.safetensors"));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("all but the classifier"), std::string::npos) << r.output;
  r = rn50(train + " --out-dir " + path("ft2") + " --init-from " + path("x.safetensors"));
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.output.find("init_from"), std::string::npos) << r.output;
}

}  // namespace

namespace {

TEST_F(Cli, DoctorRunsWithoutAGpuAndComparesPrices) {
  make_sample("--classes 2 --per-class 3 --val-per-class 1 --size 32");
  Result r = rn50("doctor --quick --json --device cpu --data-root " + path("data") + " --price-per-hour 2");
  ASSERT_EQ(r.code, 0) << r.output;
  const auto json = nlohmann::json::parse(r.output.substr(r.output.find("[\n")));
  bool has_verdict = false, has_storage = false, has_cost = false;
  int limits = 0;
  for (const auto& row : json) {
    has_verdict |= row["section"] == "verdict";
    has_storage |= row["section"] == "storage";
    has_cost |= row["section"] == "cost";
    limits += row["section"] == "limits";
  }
  EXPECT_TRUE(has_verdict && has_storage && has_cost) << r.output;
  EXPECT_EQ(limits, 4) << r.output;  // quota, memory, memlock, /dev/shm
  // The driver and network rows, read rather than measured: one line each without a GPU or an RDMA device.
  std::string driver, network;
  for (const auto& row : json) {
    if (row["check"] == "NVIDIA driver")
      driver = row["value"].get<std::string>() + " (" + row["verdict"].get<std::string>() + ")";
    if (row["check"] == "NCCL across nodes") network = row["value"].get<std::string>();
  }
  if (!RN50_CUDA_BUILD) {
    EXPECT_EQ(driver, "not needed (info)") << r.output;
    EXPECT_EQ(network, "Gloo over TCP") << r.output;
  } else {
    EXPECT_FALSE(driver.empty()) << r.output;
    EXPECT_FALSE(network.empty()) << r.output;
  }
  // It says what it measures as it goes (a run takes minutes), in order, before the report.
  size_t said = 0;
  for (const std::string& what : std::vector<std::string>{"the CPU's JPEG decode rate", "reading " + path("data"),
                                                          "training steps of resnet50"}) {
    const size_t at = r.output.find("rn50 doctor: measuring " + what + " ...\n", said);
    EXPECT_NE(at, std::string::npos) << what << "\n" << r.output;
    said = at == std::string::npos ? said : at;
  }
  EXPECT_LT(said, r.output.find("[\n"));
  // --limits: the usable cores and the limits alone, no measurement.
  r = rn50("doctor --limits --json --device cpu");
  ASSERT_EQ(r.code, 0) << r.output;
  const auto only = nlohmann::json::parse(r.output.substr(r.output.find("[\n")));
  ASSERT_EQ(only.size(), 5u) << r.output;
  EXPECT_EQ(only[0]["check"], "usable cores");
  for (size_t i = 1; i < only.size(); ++i) EXPECT_EQ(only[i]["section"], "limits") << r.output;
  // The source's comparison: an A100 at 3.2 per hour against a 3090 at 0.44 breaks even at 7.27x.
  r = rn50("doctor --compare 3.2,0,0.44,0");
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.output.find("7.27x"), std::string::npos) << r.output;
  r = rn50("doctor --compare 3.2,0");
  EXPECT_EQ(r.code, 2);
}

}  // namespace

namespace {

TEST_F(Cli, PricePerHourAddsCostsToTheEpochRecordAndLog) {
  const std::string train =
      "train --data synthetic --device cpu --model resnet18 --image-size 32 --val-resize 32"
      " --batch-size 4 --synthetic-images 8 --epochs 1 --validate=off --out-dir " +
      path("run");
  Result r = rn50(train + " --price-per-hour 3.2");
  ASSERT_EQ(r.code, 0) << r.output;
  const auto epochs = records(path("run") + "/metrics.jsonl", "epoch");
  ASSERT_EQ(epochs.size(), 1u);
  const double cost = epochs[0]["cost_per_epoch"].get<double>();
  // The whole epoch (checkpoint included) is paid for: at least the training part's wall time.
  EXPECT_GE(cost, epochs[0]["wall_s"].get<double>() / 3600.0 * 3.2);
  EXPECT_LT(cost, 3.2);                                                   // well under an hour
  EXPECT_DOUBLE_EQ(epochs[0]["projected_run_cost"].get<double>(), cost);  // one epoch configured
  EXPECT_NE(r.output.find(", cost "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(" this epoch, projected run cost "), std::string::npos) << r.output;

  // Off by default: no cost fields.
  fs::remove_all(path("run"));
  r = rn50(train);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_FALSE(records(path("run") + "/metrics.jsonl", "epoch").at(0).contains("cost_per_epoch"));

  r = rn50(train + " --price-per-hour=-1");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.output.find("price_per_hour"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace rn50::e2e
