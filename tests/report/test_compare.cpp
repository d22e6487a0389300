// tests/report/test_compare.cpp: machines side by side: the projection, cost and break-even arithmetic, price names,
// rows from ablation files and run folders, the warnings where a ratio is a loaded host's or within the rows' own
// noise, and the one-line refusals of files that are incomplete or do not compare.
#include "report/compare.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/errors.h"
#include "tests/support/temp_dir.h"

namespace rn50::report {
namespace {

void write(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

nlohmann::json epoch_record(int epoch, double rate, double gpu, double tensor) {
  return {{"type", "epoch"},
          {"epoch", epoch},
          {"images_per_s", rate},
          {"wall_s", 1.0},
          {"steps", 10},
          {"data_wait_s", 0.05},
          {"communication_s", nullptr},
          {"cuda_graph", 0.0},
          {"gpu_util_pct_mean", gpu},
          {"tensor_util_pct_mean", tensor},
          {"sm_util_pct_mean", 90.0},
          {"dram_bw_util_pct_mean", 40.0}};
}

// An ablation.json as bench/ablation.py writes it: baseline and all at batch 256 on synthetic data.
std::string ablation(const std::string& gpu, double base_rate, double all_rate, int all_exit = 0) {
  auto run = [](const std::string& label, const std::string& switches, double rate, int exit_code) {
    nlohmann::json epochs = nlohmann::json::array();
    if (exit_code == 0) {
      for (int e = 2; e <= 4; ++e) epochs.push_back(epoch_record(e, rate + e, 99.0, label == "all" ? 15.0 : 0.4));
    }
    return nlohmann::json{{"label", label},
                          {"batch", 256},
                          {"data", "synthetic"},
                          {"steps", 6},
                          {"exit_code", exit_code},
                          {"command",
                           "rn50 train --data synthetic --model resnet50 --device cuda:0 --batch-size 256 "
                           "--image-size 224 " +
                               switches},
                          {"epochs", epochs}};
  };
  nlohmann::json machine{{"date", "2026-11-30"}, {"device", "cuda:0"}};
  if (!gpu.empty()) machine["gpu"] = gpu;
  const nlohmann::json j{
      {"machine", machine},
      {"switches", {"tf32", "fp16"}},
      {"runs",
       {run("baseline", "--tf32=off --precision fp32 --cuda-graph=off", base_rate, 0),
        run("all", "--tf32=on --precision fp16 --cuda-graph=on --channels-last=on", all_rate, all_exit)}}};
  return j.dump();
}

// A run folder of rn50 train on the CPU: config.yaml, run.json and two epochs.
void cpu_run(const std::string& dir, const std::string& model = "resnet50", double rate = 8) {
  ::mkdir(dir.c_str(), 0755);
  write(dir + "/config.yaml", "model: " + model +
                                  "\ndata: synthetic\nimage_size: 224\nbatch_size: 64\ndevice: cpu\n"
                                  "precision: fp32\ntf32: default\n");
  write(dir + "/run.json", R"j({"cpu":"AMD EPYC","usable_cores":2,"world_size":1,"found":[["(device)","cpu"]]})j");
  nlohmann::json e1{{"type", "epoch"}, {"epoch", 1},         {"images_per_s", rate / 2},    {"wall_s", 20.0},
                    {"steps", 3},      {"data_wait_s", 0.1}, {"gpu_util_pct_mean", nullptr}};
  nlohmann::json e2 = e1;
  e2["epoch"] = 2, e2["images_per_s"] = rate;
  write(dir + "/metrics.jsonl", e1.dump() + "\n" + e2.dump() + "\n");
}

// A CPU run folder of ResNet-50 with an epoch record per rate (the first is the warm-up epoch compare leaves out),
// `run_json` as its run.json, step records at the rates of `step_rates` in its last epoch, and each epoch's
// others_cpu_cores from `others` where given.
void run_with(const std::string& dir, const std::vector<double>& rates, const std::string& run_json,
              const std::vector<double>& step_rates = {}, const std::vector<double>& others = {}) {
  ::mkdir(dir.c_str(), 0755);
  write(dir + "/config.yaml", "model: resnet50\ndata: synthetic\nimage_size: 224\nbatch_size: 64\ndevice: cpu\n");
  write(dir + "/run.json", run_json);
  std::string lines;
  const int last = static_cast<int>(rates.size());
  for (size_t i = 0; i < step_rates.size(); ++i) {
    lines += nlohmann::json{{"type", "step"},
                            {"epoch", last},
                            {"step", 10 * last + static_cast<int>(i)},
                            {"images_per_s", step_rates[i]}}
                 .dump() +
             "\n";
  }
  for (int e = 1; e <= last; ++e) {
    nlohmann::json record{{"type", "epoch"}, {"epoch", e}, {"images_per_s", rates[e - 1]},
                          {"wall_s", 20.0},  {"steps", 3}, {"data_wait_s", 0.1}};
    if (!others.empty()) record["others_cpu_cores"] = others[e - 1];
    lines += record.dump() + "\n";
  }
  write(dir + "/metrics.jsonl", lines);
}

std::string run_json(const std::string& load_average, int host_cores = 2) {
  return R"j({"cpu":"AMD EPYC","usable_cores":2,"host_cores":)j" + std::to_string(host_cores) +
         R"j(,"load_average":)j" + load_average + R"j(,"world_size":1,"found":[["(device)","cpu"]]})j";
}

std::string refusal(const CompareOptions& o) {
  try {
    compare(o);
  } catch (const std::exception& e) {
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << "more than one line: " << e.what();
    return e.what();
  }
  return "(no refusal)";
}

TEST(Projection, EpochRunCostAndBreakEvenFollowFromTheRateAndPrice) {
  // 1000 img/s: an ImageNet epoch is 1,281,167 images, 1281.167 s; 90 of them 115,305 s.
  const Projection p = project(1000, 90, 2, 2.5);
  EXPECT_DOUBLE_EQ(p.epoch_s, 1281.167);
  EXPECT_DOUBLE_EQ(p.run_s, 90 * 1281.167);
  EXPECT_DOUBLE_EQ(*p.price_per_hour, 5.0);  // two GPUs at 2.5 per GPU-hour
  EXPECT_DOUBLE_EQ(*p.cost_per_epoch, 5.0 * 1281.167 / 3600);
  EXPECT_DOUBLE_EQ(*p.cost_per_run, 5.0 * 90 * 1281.167 / 3600);
  const Projection unpriced = project(1000, 90, 1, std::nullopt);
  EXPECT_FALSE(unpriced.cost_per_run.has_value());
  EXPECT_DOUBLE_EQ(project(500, 1, 0, 1.0).price_per_hour.value(), 1.0);  // a CPU machine: per machine-hour
}

TEST(Prices, NamesMatchWholeLeadingWordsCaseInsensitivelyTheLongestWinning) {
  const std::vector<std::pair<std::string, double>> prices = {{"H200", 3.5}, {"h200 x2", 6.0}, {"cpu", 0.1}};
  EXPECT_EQ(price_for(prices, "H200 x1"), 3.5);
  EXPECT_EQ(price_for(prices, "H200 x2"), 6.0);
  EXPECT_EQ(price_for(prices, "CPU (2 cores)"), 0.1);
  EXPECT_EQ(price_for(prices, "H2000 x1"), std::nullopt);  // a word's start is not a match
  EXPECT_EQ(price_for(prices, "A100 x1"), std::nullopt);
}

// A CPU run folder, then an H200 ablation (baseline and all): three rows.
CompareOptions cpu_and_h200(const rn50::testing::TempDir& dir) {
  write(dir.file("ablation.json"), ablation("NVIDIA H200 (sm_90, 132 SMs, 140 GiB)", 900, 6000));
  cpu_run(dir.file("cpu"));
  CompareOptions o;
  o.inputs = {dir.file("cpu"), dir.file("ablation.json")};
  return o;
}

TEST(Compare, AnAblationAndARunFolderSideBySideWithCostAndBreakEven) {
  rn50::testing::TempDir dir;
  CompareOptions o = cpu_and_h200(dir);
  o.prices = {{"H200", 3.2}, {"CPU", 0.44}};
  const Comparison c = compare(o);
  ASSERT_EQ(c.rows.size(), 3u);
  const CompareRow& cpu = c.rows[0];
  EXPECT_EQ(cpu.machine, "CPU (2 cores)");
  EXPECT_EQ(cpu.figures.images_per_s, 8.0);  // the first of two epochs is left out
  EXPECT_TRUE(cpu.figures.first_dropped);
  EXPECT_EQ(c.rows[1].machine, "H200 x1");
  EXPECT_EQ(c.rows[1].configuration, "baseline");
  EXPECT_EQ(c.rows[2].figures.images_per_s, 6003.0);  // the median of 6002, 6003, 6004
  EXPECT_EQ(c.reference, 0u);
  EXPECT_DOUBLE_EQ(c.rows[2].speedup, 6003.0 / 8.0);
  // The source's arithmetic: at 3.2/h against 0.44/h the break-even speed-up is 7.27x.
  EXPECT_NEAR(*c.rows[2].break_even, 7.2727, 1e-4);
  EXPECT_DOUBLE_EQ(*c.rows[2].cost_per_run, 3.2 * 90 * 1281167.0 / 6003.0 / 3600);
  EXPECT_EQ(c.rows[0].reading, "A CPU run: GPU utilisation does not apply.");
  EXPECT_NE(c.rows[1].reading.find("tensor cores only 0.4%"), std::string::npos) << c.rows[1].reading;
  EXPECT_NE(c.across.find("reads 99.0% for row 2"), std::string::npos) << c.across;
  EXPECT_EQ(c.warnings, std::vector<std::string>{});  // steady rows, no load recorded: nothing to warn of

  const std::string md = comparison_markdown(c);
  EXPECT_NE(md.find("| 3 | H200 x1 | all | synthetic | 256 x 1 | 6003 | 6003 | 750.38x | 3.6 min | 5.3 h | 5.0% |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| 1 | CPU (2 cores) | cpu | unavailable | unavailable |"), std::string::npos) << md;
  EXPECT_NE(md.find("| 7.27x | 750.38x | cheaper |"), std::string::npos) << md;
  // A folder's name is text in the tables: its bar, tag, code and emphasis escaped, one line, valid UTF-8 (a '|'
  // added a column to every table, a newline split the row).
  Comparison hostile = c;
  hostile.rows[0].configuration = "x|y<img src=x>\nz`*_\xff";
  const std::string hostile_md = comparison_markdown(hostile);
  EXPECT_NE(hostile_md.find("| 1 | CPU (2 cores) | x\\|y\\<img src=x\\> z\\`\\*_\xef\xbf\xbd | unavailable |"),
            std::string::npos)
      << hostile_md;
  const nlohmann::json j = nlohmann::json::parse(comparison_json(c));
  EXPECT_EQ(j["rows"].size(), 3u);
  EXPECT_EQ(j["rows"][0]["utilisation"]["gpu_util_pct_mean"], nullptr);
  EXPECT_EQ(j["rows"][2]["images_per_s"], 6003.0);
  EXPECT_EQ(j["reference_row"], 1);

  const auto written = write_comparison(c, dir.file("out"));
  EXPECT_EQ(written.size(), 5u);  // md, json, three pictures
  for (const char* name : {"compare.md", "compare.json", "throughput.svg", "utilisation.svg", "cost.svg"}) {
    EXPECT_TRUE(rn50::testing::file_exists(dir.file("out/") + name)) << name;
  }
}

// The case of the issue: two identical configurations, one on a host loaded by other work: 1.79x, with a warning
// that names the row and its load. A load within the host's cores is no warning.
TEST(Compare, ARowWhoseHostWasLoadedIsNamedWithTheRatioItMakes) {
  rn50::testing::TempDir dir;
  run_with(dir.file("quiet"), {4, 8}, run_json("[0.4, 0.5, 0.6]"));
  run_with(dir.file("busy"), {3, 8 / 1.79}, run_json("[3.9, 3.5, 3.2]"));
  CompareOptions o;
  o.inputs = {dir.file("quiet"), dir.file("busy")};
  Comparison c = compare(o);
  EXPECT_FALSE(c.rows[0].loaded());
  EXPECT_TRUE(c.rows[1].loaded());
  EXPECT_EQ(c.warnings, std::vector<std::string>{
                            "images/s of row 2 (CPU (2 cores), busy, batch 64) and row 1 (CPU (2 cores), quiet, batch "
                            "64) differ by 1.79x, but row 2's host was loaded when it started (load average 3.9 on 2 "
                            "cores): the ratio measures the load as much as the machines"});
  EXPECT_NE(comparison_markdown(c).find("## Warnings\n\n- **images/s of row 2"), std::string::npos);
  const nlohmann::json j = nlohmann::json::parse(comparison_json(c));
  EXPECT_EQ(j["warnings"][0], c.warnings[0]);
  EXPECT_EQ(j["rows"][1]["load_average"], 3.9);
  // The reference loaded instead: the same warning from its side.
  o.reference = "2";
  EXPECT_NE(compare(o).warnings.at(0).find("but row 2's host was loaded"), std::string::npos);
  // 1.5 on 2 cores, or 3.9 on a 16-core host: not loaded.
  run_with(dir.file("half"), {3, 4.47}, run_json("[1.5, 1.5, 1.5]"));
  run_with(dir.file("wide"), {3, 4.47}, run_json("[3.9, 3.5, 3.2]", 16));
  o.inputs = {dir.file("quiet"), dir.file("half"), dir.file("wide")};
  o.reference.clear();
  c = compare(o);
  EXPECT_EQ(c.warnings, std::vector<std::string>{});
  EXPECT_EQ(c.rows[2].load_cores, 16);
  // A lone row on a loaded host says so too.
  o.inputs = {dir.file("busy")};
  EXPECT_EQ(compare(o).warnings, std::vector<std::string>{"row 1 (CPU (2 cores), busy, batch 64): its host was loaded "
                                                          "when it started (load average 3.9 on 2 cores): its "
                                                          "images/s are a loaded machine's"});
}

// The case of back-to-back runs: the second starts while the first's load still holds the 1-minute average up, but its
// epochs measured no other work: no warning. Other processes busy on more than a quarter of the host's cores during a
// measured epoch (the warm-up epoch left out) is the warning, whatever the load at the start.
TEST(Compare, TheOtherProcessesCpuUseDuringTheEpochsDecidesOverTheLoadAtTheStart) {
  rn50::testing::TempDir dir;
  run_with(dir.file("first"), {4, 8}, run_json("[0.4, 0.5, 0.6]"), {}, {0.1, 0.05});
  run_with(dir.file("second"), {4, 7.9}, run_json("[2.9, 1.5, 0.8]"), {}, {0.1, 0.2});
  CompareOptions o;
  o.inputs = {dir.file("first"), dir.file("second")};
  Comparison c = compare(o);
  EXPECT_FALSE(c.rows[1].loaded());
  EXPECT_EQ(c.rows[1].others_cores, 0.2);
  EXPECT_EQ(c.warnings, std::vector<std::string>{});
  EXPECT_EQ(nlohmann::json::parse(comparison_json(c))["rows"][1]["others_cpu_cores"], 0.2);
  // A quiet start, then a build on 1.2 of the 2 cores during the measured epoch; its busy warm-up epoch is no matter.
  run_with(dir.file("busy"), {3, 4.47}, run_json("[0.3, 0.3, 0.3]"), {}, {1.9, 1.2});
  run_with(dir.file("warm"), {3, 8}, run_json("[0.3, 0.3, 0.3]"), {}, {1.9, 0.1});
  o.inputs = {dir.file("first"), dir.file("busy"), dir.file("warm")};
  c = compare(o);
  EXPECT_TRUE(c.rows[1].loaded());
  EXPECT_FALSE(c.rows[2].loaded());
  EXPECT_EQ(c.warnings, std::vector<std::string>{
                            "images/s of row 2 (CPU (2 cores), busy, batch 64) and row 1 (CPU (2 cores), first, batch "
                            "64) differ by 1.79x, but row 2's host was busy with other work while it trained (other "
                            "processes kept 1.2 of its 2 cores busy): the ratio measures the load as much as the "
                            "machines"});
  // Half a core of others on 2 is within the quarter's bound (0.5); a little more is not.
  run_with(dir.file("edge"), {3, 8}, run_json("[0.3, 0.3, 0.3]"), {}, {0.5, 0.5});
  run_with(dir.file("over"), {3, 8}, run_json("[0.3, 0.3, 0.3]"), {}, {0.5, 0.6});
  o.inputs = {dir.file("edge"), dir.file("over")};
  c = compare(o);
  EXPECT_FALSE(c.rows[0].loaded());
  EXPECT_TRUE(c.rows[1].loaded());
}

// A row whose epochs spread widely is uncertain by that much, and a ratio within the rows' own spread is no
// measured difference; a row of one measured epoch has its spread from its step records (each epoch's first left
// out).
TEST(Compare, RowsWhoseOwnRatesSpreadAreWarnedOfAndRatiosWithinTheSpread) {
  rn50::testing::TempDir dir;
  const std::string quiet = run_json("[0.1, 0.1, 0.1]");
  run_with(dir.file("wobbly"), {5, 10, 13.5, 10}, quiet);
  run_with(dir.file("steady"), {5, 10.5, 10.5, 10.5}, quiet);
  CompareOptions o;
  o.inputs = {dir.file("wobbly"), dir.file("steady")};
  const Comparison c = compare(o);
  EXPECT_NEAR(*c.rows[0].spread, 0.35, 1e-12);
  EXPECT_EQ(c.rows[0].spread_of, "epochs");
  EXPECT_EQ(*c.rows[1].spread, 0.0);
  EXPECT_EQ(c.warnings, (std::vector<std::string>{
                            "the epochs of row 1 (CPU (2 cores), wobbly, batch 64) spread by 35% (10.0 to 13.5 img/s): "
                            "its images/s are uncertain by about as much",
                            "images/s of row 2 (CPU (2 cores), steady, batch 64) and row 1 (CPU (2 cores), wobbly, "
                            "batch 64) differ by 1.05x, within the spread of the rows' own rates (row 2's epochs 0%, "
                            "row 1's epochs 35%): not a measured difference"}));
  // One measured epoch: its step records but the epoch's first (which holds the epoch's start).
  run_with(dir.file("steps"), {5, 10}, quiet, {2.0, 10.0, 10.4, 9.6});
  o.inputs = {dir.file("steps")};
  const Comparison one = compare(o);
  EXPECT_EQ(one.rows[0].spread_of, "step records");
  EXPECT_NEAR(*one.rows[0].spread, 0.08, 1e-12);
  EXPECT_EQ(one.warnings, std::vector<std::string>{});
  // Steady rows far apart: no warning.
  run_with(dir.file("fast"), {5, 21, 21, 21.5}, quiet);
  o.inputs = {dir.file("steady"), dir.file("fast")};
  EXPECT_EQ(compare(o).warnings, std::vector<std::string>{});
}

TEST(Compare, TheReferenceIsARowNumberOrWordsThatMatchOneRow) {
  rn50::testing::TempDir dir;
  CompareOptions o = cpu_and_h200(dir);
  o.reference = "h200 x1 baseline";
  EXPECT_EQ(compare(o).reference, 1u);
  o.reference = "3";
  EXPECT_EQ(compare(o).reference, 2u);
  o.reference = "H200";
  EXPECT_EQ(refusal(o), "--reference 'H200' matches rows 2, 3: give a row number");
  o.reference = "4";
  EXPECT_EQ(refusal(o), "--reference 4: there are rows 1 to 3");
}

TEST(Compare, FilesThatAreIncompleteOrDoNotCompareAreRefusedWithOneLine) {
  rn50::testing::TempDir dir;
  write(dir.file("h200.json"), ablation("NVIDIA H200", 900, 6000));
  write(dir.file("failed.json"), ablation("NVIDIA H200", 900, 6000, /*all_exit=*/1));
  write(dir.file("nameless.json"), ablation("", 900, 6000));
  write(dir.file("other.json"), R"j({"rows": []})j");
  cpu_run(dir.file("resnet18"), "resnet18");
  cpu_run(dir.file("cpu"));
  ::mkdir(dir.file("empty").c_str(), 0755);
  write(dir.file("empty/metrics.jsonl"), "{\"type\":\"step\",\"epoch\":1,\"step\":1}\n");
  write(dir.file("empty/config.yaml"), "model: resnet50\n");
  ::mkdir(dir.file("bare").c_str(), 0755);
  write(dir.file("bare/metrics.jsonl"), epoch_record(1, 10, 0, 0).dump() + "\n");

  CompareOptions o;
  o.inputs = {dir.file("h200.json"), dir.file("resnet18")};
  EXPECT_NE(refusal(o).find("rows differ in model: resnet50 ("), std::string::npos) << refusal(o);
  o.inputs = {dir.file("failed.json")};
  EXPECT_EQ(refusal(o), dir.file("failed.json") +
                            ": the run 'all' at batch 256 on synthetic data failed (exit 1): "
                            "nothing measured");
  o.inputs = {dir.file("h200.json")};
  o.data = "jpeg";
  EXPECT_EQ(refusal(o), dir.file("h200.json") + ": no run on jpeg data (--data synthetic or jpeg)");
  o.data = "synthetic";
  o.labels = {"all-fp16"};
  EXPECT_EQ(refusal(o), dir.file("h200.json") +
                            ": no 'all-fp16' at batch 256 on synthetic data (--label, --batch, "
                            "--data choose the runs)");
  o.labels = {"baseline", "all"};
  o.inputs = {dir.file("nameless.json")};
  EXPECT_NE(refusal(o).find("the ablation names no GPU"), std::string::npos) << refusal(o);
  o.names = {{dir.file("nameless.json"), "H200 x1"}};
  EXPECT_EQ(compare(o).rows[0].machine, "H200 x1");  // a name given on the command line is enough
  o.names.clear();
  o.inputs = {dir.file("other.json")};
  EXPECT_EQ(refusal(o),
            dir.file("other.json") + ": not an ablation.json of bench/ablation.py (no 'machine' and 'runs')");
  o.inputs = {dir.file("empty")};
  EXPECT_EQ(refusal(o), dir.file("empty") + ": no epoch record (the run ended before its first epoch)");
  o.inputs = {dir.file("bare")};
  EXPECT_NE(refusal(o).find("no config.yaml and no start table in train.log"), std::string::npos) << refusal(o);
  o.inputs = {dir.file("cpu"), dir.file("cpu/")};
  EXPECT_EQ(refusal(o), dir.file("cpu/") + ": given twice");
  o.inputs = {dir.file("cpu"), dir.file("missing")};
  EXPECT_EQ(refusal(o), dir.file("missing") + ": no such file or folder");
  ASSERT_EQ(::symlink("loop", dir.file("loop").c_str()), 0);  // a link to itself: there, but never a folder
  o.inputs = {dir.file("cpu"), dir.file("loop")};
  EXPECT_EQ(refusal(o), "cannot read " + dir.file("loop") + ": Too many levels of symbolic links");
  ASSERT_EQ(::mkfifo(dir.file("fifo.json").c_str(), 0600), 0);  // refused unopened (opening it would block)
  o.inputs = {dir.file("cpu"), dir.file("fifo.json")};
  EXPECT_EQ(refusal(o), "cannot read " + dir.file("fifo.json") + ": not a regular file");
  o.inputs = {dir.file("cpu")};
  o.prices = {{"A100", 3.2}};
  EXPECT_EQ(refusal(o), "price for 'A100': no machine of that name (the machines: 'CPU (2 cores)')");
  o.prices = {{"cpu", 3.2}, {" CPU", 4}};  // one machine, two prices: once the first won without a word
  EXPECT_EQ(refusal(o), "price for 'CPU' given twice (3.2 and 4)");
  o.prices.clear();
  o.inputs = {dir.file("h200.json")};
  o.labels.clear();  // --label ',' names none; the rows' checks once read the first of no rows
  EXPECT_EQ(refusal(o), "--label names no configuration (e.g. --label baseline,all)");
  o.labels = {"baseline", "all"};
  // A field of the wrong type is the file's fault, named with it; it once escaped as nlohmann's type_error.
  nlohmann::json typed = nlohmann::json::parse(ablation("NVIDIA H200", 900, 6000));
  typed["runs"][0]["exit_code"] = "0";
  write(dir.file("typed.json"), typed.dump());
  o.inputs = {dir.file("typed.json")};
  EXPECT_EQ(refusal(o), dir.file("typed.json") +
                            ": the run 'baseline' at batch 256 on synthetic data has no integer 'exit_code' (not an "
                            "ablation.json)");
  o.inputs.clear();
  EXPECT_EQ(refusal(o), "rn50 compare needs result files: ablation.json files or run folders");
}

// compare.md links the pictures: the set is staged and then moved in, and a picture the new set does not draw
// (cost.svg without prices) is not left beside it.
TEST(Compare, TheOutputFolderHoldsOneWholeSet) {
  rn50::testing::TempDir dir;
  cpu_run(dir.file("cpu"));
  CompareOptions o;
  o.inputs = {dir.file("cpu")};
  o.prices = {{"CPU", 0.5}};
  const std::string out = dir.file("out");
  EXPECT_EQ(write_comparison(compare(o), out).size(), 5u);
  EXPECT_TRUE(std::filesystem::exists(out + "/cost.svg"));
  o.prices.clear();
  EXPECT_EQ(write_comparison(compare(o), out).size(), 4u);
  EXPECT_FALSE(std::filesystem::exists(out + "/cost.svg"));
  EXPECT_FALSE(std::filesystem::exists(out + "/.compare-staging"));
  write(dir.file("a_file"), "x");
  EXPECT_THROW(write_comparison(compare(o), dir.file("a_file")), ConfigError);
}

TEST(Compare, APricesFileGivesPricesPerGpuHourAndBadLinesAreNamed) {
  rn50::testing::TempDir dir;
  write(dir.file("h200.json"), ablation("NVIDIA H200", 900, 6000));
  write(dir.file("prices.yaml"), "# per GPU-hour\nH200: 3.5  # an example\n");
  CompareOptions o;
  o.inputs = {dir.file("h200.json")};
  o.prices_file = dir.file("prices.yaml");
  EXPECT_EQ(compare(o).rows[0].price_per_hour, 3.5);
  write(dir.file("prices.yaml"), "H200: cheap\n");
  EXPECT_EQ(refusal(o), "--prices " + dir.file("prices.yaml") + " line 1: 'cheap' is not a positive price");
}

}  // namespace
}  // namespace rn50::report
