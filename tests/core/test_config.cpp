// tests/core/test_config.cpp: YAML and override parsing, validation errors naming the key, YAML round trip.
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "core/affinity.h"
#include "core/config.h"
#include "core/errors.h"
#include "input/gpu_decode/gpu_decoder_options.h"
#include "tests/support/error_of.h"
#include "tests/support/temp_dir.h"

namespace rn50 {
namespace {

using rn50::testing::config_error_of;
const auto& error_of = config_error_of;

TEST(Config, YamlOverridesDefaults) {
  Config c;
  apply_yaml_text(c, "batch_size: 32\nchannels_last: on\nlr_milestones: [3, 6]\nlr: 0.2\nmodel: resnet18\n", "t");
  EXPECT_EQ(c.batch_size, 32);
  EXPECT_TRUE(c.channels_last);
  EXPECT_EQ(c.lr_milestones, (std::vector<int>{3, 6}));
  EXPECT_DOUBLE_EQ(c.lr, 0.2);
  EXPECT_EQ(c.model, "resnet18");
}

TEST(Config, UnknownKeyIsNamed) {
  Config c;
  EXPECT_NE(error_of([&] { apply_yaml_text(c, "batchsize: 3\n", "f.yaml"); }).find("'batchsize'"), std::string::npos);
  EXPECT_NE(error_of([&] { apply_overrides(c, {{"nope", "1"}}); }).find("'nope'"), std::string::npos);
}

TEST(Config, BadValuesAreNamed) {
  Config c;
  EXPECT_NE(error_of([&] { apply_overrides(c, {{"batch_size", "x12"}}); }).find("batch_size"), std::string::npos);
  EXPECT_NE(error_of([&] { apply_overrides(c, {{"precision", "fp64"}}); }).find("fp32|bf16|fp16"), std::string::npos);
  EXPECT_NE(error_of([&] { apply_overrides(c, {{"decode", "npu"}}); }).find("cpu|gpu"), std::string::npos);
  EXPECT_NE(error_of([&] { apply_overrides(c, {{"pin_memory", "maybe"}}); }).find("pin_memory"), std::string::npos);
  EXPECT_NE(error_of([&] { apply_overrides(c, {{"lr", "nan"}}); }).find("'lr'"), std::string::npos);
  EXPECT_NE(error_of([&] { apply_yaml_text(c, "a: [b\n", "broken.yaml"); }).find("broken.yaml"), std::string::npos);
}

TEST(Config, ValidationNamesTheKey) {
  auto invalid = [](const std::map<std::string, std::string>& v) {
    Config c;
    c.data_root = "/data";
    apply_overrides(c, v);
    return error_of([&] { validate(c); });
  };
  EXPECT_EQ(invalid({}), "");
  EXPECT_NE(invalid({{"batch_size", "0"}}).find("batch_size"), std::string::npos);
  EXPECT_NE(invalid({{"val_resize", "100"}}).find("val_resize"), std::string::npos);
  EXPECT_NE(invalid({{"device", "gpu0"}}).find("device"), std::string::npos);
  EXPECT_NE(invalid({{"device", "cuda:x"}}).find("device"), std::string::npos);
  EXPECT_NE(invalid({{"device", "cpu"}, {"precision", "fp16"}}).find("precision"), std::string::npos);
  EXPECT_NE(invalid({{"device", "cpu"}, {"precision", "bf16"}}).find("precision"), std::string::npos);
  EXPECT_NE(invalid({{"device", "cpu"}, {"decode", "gpu"}}).find("'decode'"), std::string::npos);
  EXPECT_EQ(invalid({{"device", "cuda:0"}, {"decode", "gpu"}}), "");
  EXPECT_NE(invalid({{"lr_milestones", "5,2"}}).find("lr_milestones"), std::string::npos);
  EXPECT_NE(invalid({{"lr_milestones", "30,30"}}).find("lr_milestones"), std::string::npos);
  EXPECT_NE(config_error_of([] {
              Config c;
              apply_overrides(c, {{"lr_milestones", "3000000000"}});
            }).find("lr_milestones"),
            std::string::npos);
  EXPECT_NE(invalid({{"data_root", ""}}).find("data_root"), std::string::npos);
  EXPECT_NE(invalid({{"price_per_hour", "-0.5"}}).find("price_per_hour"), std::string::npos);
  EXPECT_EQ(invalid({{"price_per_hour", "3.2"}}), "");
  EXPECT_EQ(invalid({{"data_root", ""}, {"data", "synthetic"}}), "");
  EXPECT_NE(invalid({{"deterministic", "on"}, {"cudnn_benchmark", "on"}}).find("deterministic"), std::string::npos);
  EXPECT_EQ(invalid({{"deterministic", "on"}}), "");
}

// Hostile values: each refused with one line naming its key, before anything is allocated for it.
TEST(Config, RangesBoundValuesThatWouldExhaustMemoryOrOverflow) {
  const std::vector<std::pair<std::string, std::string>> hostile = {{"prefetch", "1000000"},
                                                                    {"batch_size", "200000"},
                                                                    {"batch_size", "2147483647"},
                                                                    {"lr", "1e308"},
                                                                    {"warmup_epochs", "1e300"},
                                                                    {"dist_timeout_s", "2000000000"},
                                                                    {"weight_decay", "1e30"},
                                                                    {"epochs", "2000000000"},
                                                                    {"max_image_pixels", "0"},
                                                                    {"max_image_bytes", "-1"},
                                                                    {"workers", "100000"},
                                                                    {"decode_memory_mb", "-1"},
                                                                    {"decode_memory_mb", "16777217"},
                                                                    {"decode_cpu_share", "1.5"},
                                                                    {"decode_cpu_share", "-0.1"},
                                                                    {"decode_cpu_share", "half"},
                                                                    {"price_per_hour", "1e300"},
                                                                    {"plan_cache", ""},
                                                                    {"synthetic_images", "9223372036854775807"}};
  for (const auto& [key, value] : hostile) {
    Config c;
    c.data = DataSource::kSynthetic;
    const std::string e = error_of([&] {
      apply_overrides(c, {{key, value}});
      validate(c);
    });
    EXPECT_NE(e.find("config key '" + key + "'"), std::string::npos) << key << "=" << value << ": " << e;
  }
}

TEST(Config, FilesAndKeysThatAreNotAConfigAreConfigurationErrors) {
  rn50::testing::TempDir dir;
  Config c;
  EXPECT_NE(error_of([&] { apply_yaml_file(c, dir.path()); }).find("not a regular file"), std::string::npos);
  EXPECT_NE(error_of([&] { apply_yaml_file(c, "/dev/zero"); }).find("not a regular file"), std::string::npos);
  const std::string big = dir.file("big.yaml");
  std::ofstream(big) << "# " << std::string(2 << 20, 'x') << "\n";
  EXPECT_NE(error_of([&] { apply_yaml_file(c, big); }).find("at most 1048576 are read"), std::string::npos);
  EXPECT_NE(error_of([&] { apply_yaml_text(c, "[a, b]: 1\n", "k.yaml"); }).find("not a plain name"), std::string::npos);
  // A key given twice once ran with the last value and no word.
  EXPECT_NE(error_of([&] {
              apply_yaml_text(c, "batch_size: 8\nbatch_size: 16\n", "k.yaml");
            }).find("k.yaml: config key 'batch_size' is given twice"),
            std::string::npos);
  const std::string long_key = error_of([&] { apply_yaml_text(c, std::string(100000, 'k') + ": 1\n", "k.yaml"); });
  EXPECT_NE(long_key.find("k.yaml"), std::string::npos) << long_key.substr(0, 200);  // yaml-cpp's or rn50's refusal
  EXPECT_LT(long_key.size(), 300u);
}

// What a config file or an option once let through without a word: a list for a key of one value (out_dir: [a, b]
// wrote into "a,b"), the keys after a second YAML document, a value that ends the message's line or fills a
// terminal; and a file's read error without its reason, a tiny number taken for no number.
TEST(Config, ListsExtraDocumentsAndRawValuesAreRefusedOrEscaped) {
  Config c;
  EXPECT_NE(error_of([&] {
              apply_yaml_text(c, "out_dir: [a, b]\n", "l.yaml");
            }).find("l.yaml: config key 'out_dir' takes one value, not a list"),
            std::string::npos);
  EXPECT_EQ(error_of([&] { apply_yaml_text(c, "lr_milestones: [3, 6]\n", "l.yaml"); }), "");
  EXPECT_NE(error_of([&] {
              apply_yaml_text(c, "epochs: 1\n---\nepochs: 3\n", "m.yaml");
            }).find("m.yaml: keys in a YAML document after the first (after a --- line); a config file is one"),
            std::string::npos);
  EXPECT_NE(error_of([&] { apply_yaml_text(c, "---\n---\nepochs: 3\n", "m.yaml"); }).find("after the first"),
            std::string::npos);
  // yaml-cpp 0.7's LoadAll never returns for this input (fuzz_config's finding): refused or read, in no time.
  const std::string hang = error_of([&] { apply_yaml_text(c, std::string(",d\0", 3), "f.yaml"); });
  EXPECT_TRUE(hang.empty() || hang.find("f.yaml") != std::string::npos) << hang;
  EXPECT_EQ(error_of([&] { apply_yaml_text(c, "---\nepochs: 4\n...\n", "m.yaml"); }), "");
  EXPECT_EQ(c.epochs, 4);
  const std::string newline = error_of([&] { apply_overrides(c, {{"batch_size", "2\n3"}}); });
  EXPECT_NE(newline.find("config key 'batch_size': '2\\n3' is not an integer"), std::string::npos) << newline;
  const std::string huge = error_of([&] { apply_overrides(c, {{"lr", std::string(100000, '9') + "x"}}); });
  EXPECT_LT(huge.size(), 200u) << huge.substr(0, 300);
  EXPECT_NE(huge.find("... (100001 bytes)' is not a number"), std::string::npos) << huge;
  EXPECT_NE(error_of([&] {
              apply_yaml_file(c, "/nonexistent/c.yaml");
            }).find("config file: cannot read /nonexistent/c.yaml: No such file or directory"),
            std::string::npos);
  EXPECT_EQ(error_of([&] { apply_overrides(c, {{"lr", "1e-310"}}); }), "");  // inside (0, 100], if tiny
}

// AdamW computes in 32-bit floats: a beta that rounds to 1 there, or an eps that rounds to 0, turned the loss NaN at
// the second step.
TEST(Config, AdamWValuesMustSurviveThirtyTwoBitFloats) {
  auto invalid = [](const std::string& key, const std::string& value) {
    Config c;
    c.data_root = "/data";
    apply_overrides(c, {{"optimizer", "adamw"}, {key, value}});
    return error_of([&] { validate(c); });
  };
  EXPECT_NE(invalid("adamw_beta1", "0.99999999999").find("config key 'adamw_beta1'"), std::string::npos);
  EXPECT_NE(invalid("adamw_beta2", "0.99999999999").find("below 1 as a 32-bit float"), std::string::npos);
  EXPECT_EQ(invalid("adamw_beta2", "0.9999999"), "");
  EXPECT_NE(invalid("adamw_eps", "1e-46").find("config key 'adamw_eps'"), std::string::npos);
  EXPECT_EQ(invalid("adamw_eps", "1e-45"), "");
}

TEST(Config, AutoWorkersResolveToUsableCores) {
  Config c;
  c.data_root = "/data";
  validate(c);
  EXPECT_EQ(c.workers, usable_cores());
  EXPECT_GE(c.workers, 1);
}

// decode: gpu with decode_cpu_share: auto leaves two cores to the training thread and the GPU decoder's; any other
// setting takes them all, and an explicit workers value stays as it is.
TEST(Config, AutoWorkersLeaveTwoCoresToAnAutomaticCpuShare) {
  Config c;
  apply_overrides(c, {{"decode", "gpu"}, {"decode_cpu_share", "auto"}});
  EXPECT_TRUE(c.decode_cpu_share.automatic);
  EXPECT_EQ(automatic_workers(c, 8), 6);
  EXPECT_EQ(automatic_workers(c, 2), 1);
  c.decode_cpu_share = DecodeCpuShare{false, 0.5};
  EXPECT_EQ(automatic_workers(c, 8), 8);
  c.decode_cpu_share.automatic = true;
  c.decode = Decode::kCpu;
  EXPECT_EQ(automatic_workers(c, 8), 8);
  Config given;
  apply_overrides(given, {{"decode", "gpu"}, {"device", "cuda:0"}, {"decode_cpu_share", "auto"}, {"workers", "5"},
                          {"data_root", "/data"}});
  validate(given);
  EXPECT_EQ(given.workers, 5);
}

// The share splits the GPU decoder's work; with decode: cpu there is nothing to split, and a share is refused by name
// (the loader would refuse it later, without naming the key).
TEST(Config, ACpuDecodeShareNeedsGpuDecoding) {
  for (const char* share : {"auto", "0.5"}) {
    Config c;
    c.data_root = "/data";
    apply_overrides(c, {{"decode_cpu_share", share}});
    const std::string e = error_of([&] { validate(c); });
    EXPECT_NE(e.find("config key 'decode_cpu_share'"), std::string::npos) << e;
    EXPECT_NE(e.find("needs decode: gpu"), std::string::npos) << e;
  }
  Config off;
  off.data_root = "/data";
  apply_overrides(off, {{"decode_cpu_share", "0"}});
  validate(off);
}

// bench-decode and the doctor build the GPU decoder with its own defaults; bench-decode --step-ms says it measures
// training's order.
TEST(Config, TheGpuDecodersDefaultDepthIsTrainings) {
  EXPECT_EQ(input::GpuDecoderOptions{}.submit_ahead, Config{}.decode_ahead_batches);
}

TEST(Config, YamlDumpReadsBackIdentically) {
  Config c;
  apply_overrides(c, {{"batch_size", "48"},
                      {"decode_memory_mb", "512"},
                      {"decode_cpu_share", "0.375"},
                      {"lr", "0.0375"},
                      {"tf32", "off"},
                      {"lr_milestones", "1,2,3"},
                      {"data_root", "/tmp/x y"},
                      {"momentum", "0.99999999999"},
                      {"weight_decay", "0.000123456789012345"},
                      {"resume", ""}});
  Config back;
  apply_yaml_text(back, to_yaml(c), "dump");
  EXPECT_EQ(to_yaml(back), to_yaml(c));
  // Every digit a value needs: momentum 0.99999999999 was written as 1, which a resume then refused.
  EXPECT_EQ(back.momentum, c.momentum);
  EXPECT_EQ(back.weight_decay, c.weight_decay);
  EXPECT_NE(to_yaml(c).find("\nlr: 0.0375\n"), std::string::npos) << to_yaml(c);  // not 0.037499999999999999
  EXPECT_EQ(back.data_root, "/tmp/x y");
  EXPECT_EQ(back.decode_memory_mb, 512);
  EXPECT_EQ(back.decode_cpu_share.fraction, 0.375);
  apply_overrides(c, {{"decode_cpu_share", "auto"}});
  Config automatic;
  apply_yaml_text(automatic, to_yaml(c), "dump");
  EXPECT_TRUE(automatic.decode_cpu_share.automatic);
  EXPECT_EQ(back.lr_milestones, (std::vector<int>{1, 2, 3}));
}

// wgrad_stream was a switch (on/off) before auto: every spelling a switch takes still reads, quoted or not, and the
// dump says auto, on or off.
TEST(Config, WgradStreamTakesAutoOnAndOff) {
  for (const auto& [text, value] : std::vector<std::pair<std::string, WgradStream>>{
           {"wgrad_stream: on", WgradStream::kOn},
           {"wgrad_stream: \"off\"", WgradStream::kOff},
           {"wgrad_stream: auto", WgradStream::kAuto},
           {"wgrad_stream: Auto", WgradStream::kAuto},
           {"wgrad_stream: true", WgradStream::kOn},
           {"wgrad_stream: No", WgradStream::kOff},
           {"wgrad_stream: 1", WgradStream::kOn}}) {
    Config c;
    apply_yaml_text(c, text, "test");
    EXPECT_EQ(c.wgrad_stream, value) << text;
  }
  Config c;
  apply_overrides(c, {{"wgrad_stream", "off"}});
  EXPECT_EQ(c.wgrad_stream, WgradStream::kOff);
  EXPECT_NE(to_yaml(c).find("wgrad_stream: off"), std::string::npos) << to_yaml(c);
  const std::string e = config_error_of([&] { apply_overrides(c, {{"wgrad_stream", "sometimes"}}); });
  EXPECT_NE(e.find("wgrad_stream"), std::string::npos) << e;
  EXPECT_NE(e.find("auto, on or off"), std::string::npos) << e;
}

// plan_cache: auto by default, off or a path as given, and not empty.
TEST(Config, PlanCacheIsAutoOffOrAPath) {
  Config c;
  c.data = DataSource::kSynthetic;
  EXPECT_EQ(c.plan_cache, "auto");
  apply_overrides(c, {{"plan_cache", "/data/plans.txt"}});
  EXPECT_EQ(c.plan_cache, "/data/plans.txt");
  validate(c);
  Config back;
  apply_yaml_text(back, to_yaml(c), "dump");
  EXPECT_EQ(back.plan_cache, "/data/plans.txt");
  apply_overrides(c, {{"plan_cache", ""}});
  const std::string e = config_error_of([&] { validate(c); });
  EXPECT_NE(e.find("plan_cache"), std::string::npos) << e;
  EXPECT_NE(e.find("auto, off or a file's path"), std::string::npos) << e;
}

// plan_search: heuristics by default, exhaustive by name in YAML and on the command line, kept by the dump, and
// anything else named with the values it takes.
TEST(Config, PlanSearchIsHeuristicsOrExhaustive) {
  Config c;
  EXPECT_EQ(c.plan_search, PlanSearch::kHeuristics);
  apply_yaml_text(c, "plan_search: exhaustive", "test");
  EXPECT_EQ(c.plan_search, PlanSearch::kExhaustive);
  Config back;
  apply_yaml_text(back, to_yaml(c), "dump");
  EXPECT_EQ(back.plan_search, PlanSearch::kExhaustive);
  apply_overrides(c, {{"plan_search", "heuristics"}});
  EXPECT_EQ(c.plan_search, PlanSearch::kHeuristics);
  const std::string e = config_error_of([&] { apply_overrides(c, {{"plan_search", "all"}}); });
  EXPECT_NE(e.find("plan_search"), std::string::npos) << e;
  EXPECT_NE(e.find("heuristics"), std::string::npos) << e;
  EXPECT_NE(e.find("exhaustive"), std::string::npos) << e;
}

// Strings a plain YAML scalar would change or break (found by fuzz_config: the dump of a value with a control byte
// was not YAML): each reads back as written (string keys are trimmed when parsed, so no value has blank edges). A path
// with " #" used to come back cut at the comment.
TEST(Config, YamlDumpQuotesValuesThatAPlainScalarWouldChange) {
  for (const std::string& value : {std::string("runs/a #1"), std::string("a: b"), std::string("\"quoted\""),
                                   std::string("[not a list]"), std::string("tab\there"), std::string("caf\xc3\xa9")}) {
    Config c;
    c.out_dir = value;
    Config back;
    apply_yaml_text(back, to_yaml(c), "dump");
    EXPECT_EQ(back.out_dir, value) << to_yaml(c);
  }
  // YAML holds UTF-8 only: a string key refuses other bytes rather than having them replaced in the dump.
  for (const char* bad : {"bad \xff\xfe", "cut \xc3", "overlong \xc0\xaf", "surrogate \xed\xa0\x80"}) {
    Config c;
    EXPECT_NE(config_error_of([&] {
                apply_overrides(c, {{"out_dir", bad}});
              }).find("not valid UTF-8"),
              std::string::npos)
        << bad;
  }
  Config c;
  EXPECT_NO_THROW(apply_overrides(c, {{"out_dir", "caf\xc3\xa9 \xf0\x9f\x93\x81"}}));
  // Control characters other than a tab, from YAML or the command line: refused, a NUL included
  // (tests/fuzz/regressions/config/dump_nul_in_string_value: read back as a carriage return before).
  EXPECT_NE(config_error_of([&] {
              apply_overrides(c, {{"out_dir", std::string("nul\0byte", 8)}});
            }).find("config key 'out_dir': contains a control character (0x00)"),
            std::string::npos);
  EXPECT_NE(config_error_of([&] { apply_overrides(c, {{"out_dir", "ctrl \x01"}}); }).find("(0x01)"), std::string::npos);
  EXPECT_NE(config_error_of([&] {
              apply_yaml_text(c, "data_root: \"pam\\rr\"\n", "test");
            }).find("config key 'data_root': contains a control character (0x0D)"),
            std::string::npos);
}

}  // namespace
}  // namespace rn50
