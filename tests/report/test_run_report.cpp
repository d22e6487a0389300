// tests/report/test_run_report.cpp: the run's page: its figures are the metrics file's, torn lines are counted, a
// CPU run says unavailable, and the page is whole (every element closed, no script that runs, nothing fetched).
#include "report/run_report.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "core/errors.h"
#include "report/records.h"
#include "tests/support/temp_dir.h"

namespace rn50::report {
namespace {

void write(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

// The open elements left at the end (or at the first mismatch) of an HTML text with inline SVG: none means well-formed.
std::vector<std::string> unclosed(const std::string& html) {
  static const std::regex tag(R"(<(/?)([a-zA-Z][a-zA-Z0-9]*)[^>]*?(/?)>)");
  std::vector<std::string> stack;
  const std::string body = std::regex_replace(html, std::regex(R"(<script[^>]*>[^<]*</script>)"), "");
  for (auto it = std::sregex_iterator(body.begin(), body.end(), tag); it != std::sregex_iterator(); ++it) {
    const std::string name = (*it)[2];
    if (name == "meta" || (*it)[3] == "/") continue;
    if ((*it)[1] == "/") {
      if (stack.empty() || stack.back() != name) return {"mismatched </" + name + ">"};
      stack.pop_back();
    } else {
      stack.push_back(name);
    }
  }
  return stack;
}

std::string cpu_run(const rn50::testing::TempDir& dir) {
  const std::string run = dir.file("run");
  ::mkdir(run.c_str(), 0755);
  write(run + "/config.yaml", "model: resnet18\ndata: synthetic\nbatch_size: 16\nepochs: 3\ndevice: cpu\n");
  write(run + "/run.json", R"j({"cpu":"AMD EPYC","usable_cores":2,"world_size":1,"found":[["(device)","cpu"]]})j");
  std::string lines;
  for (int e = 1; e <= 2; ++e) {
    lines += nlohmann::json{{"type", "step"},         {"epoch", e},    {"step", 2 * e},
                            {"loss", 2.0 / e},        {"lr", 0.1 / e}, {"images_per_s", 90 + e},
                            {"gpu_util_pct", nullptr}}
                 .dump() +
             "\n";
    lines += nlohmann::json{{"type", "epoch"},
                            {"epoch", e},
                            {"steps", 2},
                            {"wall_s", 0.5},
                            {"images_per_s", 64 * e},
                            {"data_wait_s", 0.1},
                            {"train_loss", 2.5 / e},
                            {"val_loss", 2.6 / e},
                            {"top1", 0.25 * e},
                            {"top5", 0.9},
                            {"lr", 0.1 / e},
                            {"bad_samples", e - 1},
                            {"gpu_util_pct_mean", nullptr}}
                 .dump() +
             "\n";
  }
  write(run + "/metrics.jsonl", lines + "{\"type\":\"epoch\",\"epo");  // torn: killed mid-write
  return run;
}

TEST(RunReport, ThePageIsWholeAndItsFiguresAreTheMetricsFiles) {
  rn50::testing::TempDir dir;
  const std::string run = cpu_run(dir);
  const RunReport r = write_run_report(run);
  EXPECT_EQ(r.path, run + "/report.html");
  EXPECT_EQ(r.epochs, 2u);
  EXPECT_EQ(r.steps, 2u);
  EXPECT_EQ(r.skipped_lines, 1);
  std::ifstream in(r.path);
  const std::string html((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(unclosed(html), std::vector<std::string>{});
  EXPECT_EQ(html.find("http://"), html.find("http://www.w3.org/2000/svg"));  // only the SVG namespace, never fetched
  EXPECT_EQ(html.find("https://"), std::string::npos);
  EXPECT_EQ(html.find("<script>"), std::string::npos);  // the one script element is data (application/json)
  EXPECT_NE(html.find("1 skipped (torn, not JSON, or not a record of rn50 train)"), std::string::npos);
  EXPECT_NE(html.find("A CPU run: GPU utilisation does not apply."), std::string::npos);
  EXPECT_NE(html.find("on the CPU (AMD EPYC, 2 cores)"), std::string::npos);
  EXPECT_NE(html.find("unavailable on a CPU run"), std::string::npos);  // the utilisation charts
  EXPECT_NE(html.find("Best top-1 50.00% (epoch 2)"), std::string::npos);
  EXPECT_NE(html.find("<td>2</td><td>0.50</td><td>128.0</td><td>1.2500</td><td>1.3000</td><td>50.00%</td>"),
            std::string::npos);

  const std::smatch data = [&] {
    std::smatch m;
    std::regex_search(html, m, std::regex(R"(<script type="application/json" id="rn50-data">([^<]*)</script>)"));
    return m;
  }();
  ASSERT_EQ(data.size(), 2u);
  const nlohmann::json figures = nlohmann::json::parse(data[1].str());
  ASSERT_EQ(figures["epochs"].size(), 2u);
  EXPECT_EQ(figures["epochs"][1]["images_per_s"], 128.0);
  EXPECT_EQ(figures["epochs"][1]["top1"], 0.5);
  EXPECT_EQ(figures["epochs"][1]["gpu_util_pct_mean"], nullptr);
  EXPECT_EQ(figures["steps"][0]["loss"], 2.0);
  EXPECT_EQ(figures["skipped"], 1);
  EXPECT_GE(std::count(html.begin(), html.end(), '\n'), 50);
  size_t svgs = 0;
  for (size_t at = html.find("<svg"); at != std::string::npos; at = html.find("<svg", at + 1)) ++svgs;
  EXPECT_EQ(svgs, 13u);
}

TEST(RunReport, TheNotesCountTheLinesOverOneMebibyteAndTheFilesLeftOut) {
  rn50::testing::TempDir dir;
  const std::string run = cpu_run(dir);
  std::ofstream(run + "/metrics.jsonl", std::ios::app) << "\n" << std::string(kMaxLineBytes + 1, '{') << "\n";
  write(run + "/train.log", std::string(kMaxLineBytes + 1, 'x') + "\n" + std::string(kMaxLineBytes + 1, 'y'));
  std::remove((run + "/run.json").c_str());
  ASSERT_EQ(::mkdir((run + "/run.json").c_str(), 0755), 0);
  const std::string html = render_run_report(run);
  EXPECT_NE(html.find(", 1 line over 1 MiB skipped."), std::string::npos);
  EXPECT_NE(html.find("train.log: 2 lines over 1 MiB skipped."), std::string::npos);
  EXPECT_NE(html.find("cannot read " + run + "/run.json: not a regular file (left out)."), std::string::npos);
}

TEST(RunReport, TextFromTheFilesIsEscaped) {
  rn50::testing::TempDir dir;
  const std::string run = cpu_run(dir);
  write(run + "/config.yaml", "model: <script>alert(1)</script>\ndata_root: a&b\n");
  const std::string html = render_run_report(run);
  EXPECT_EQ(html.find("<script>alert"), std::string::npos);
  EXPECT_NE(html.find("&lt;script&gt;alert(1)&lt;/script&gt;"), std::string::npos);
  EXPECT_NE(html.find("a&amp;b"), std::string::npos);
}

// The data block is JSON in a script element: a '<' in any key or value is \u003c, so that "<!--<script>" or
// "</script>" from the file can neither end the element nor hide the rest of the page in it.
TEST(RunReport, TheDataBlockHoldsNoLessThanSign) {
  rn50::testing::TempDir dir;
  const std::string run = cpu_run(dir);
  write(run + "/metrics.jsonl", "{\"type\":\"epoch\",\"epoch\":1,\"images_per_s\":5,\"<!--<script>\":1}\n");
  const std::string html = render_run_report(run);
  const size_t open = html.find("<script type=\"application/json\" id=\"rn50-data\">");
  ASSERT_NE(open, std::string::npos);
  const size_t begin = html.find('>', open) + 1, end = html.find("</script>", begin);
  ASSERT_NE(end, std::string::npos);
  const std::string data = html.substr(begin, end - begin);
  EXPECT_EQ(data.find('<'), std::string::npos) << data;
  const nlohmann::json parsed = nlohmann::json::parse(data);
  EXPECT_TRUE(parsed["epochs"][0].contains("<!--<script>"));
  EXPECT_NE(html.find("</body>\n</html>\n"), std::string::npos);
}

// A run stopped and resumed: the page says so, and its medians leave out each process's first epoch and the epoch
// resumed mid-way (whose figures cover part of it), marked in the table.
TEST(RunReport, AStoppedAndResumedRunsMediansAreOfWholeEpochs) {
  rn50::testing::TempDir dir;
  const std::string run = cpu_run(dir);
  auto epoch = [](int e, double rate, int resumed_at) {
    nlohmann::json j{{"type", "epoch"}, {"epoch", e}, {"images_per_s", rate}, {"wall_s", 1.0}, {"steps", 4}};
    if (resumed_at) j["resumed_at_step"] = resumed_at;
    return j.dump() + "\n";
  };
  write(run + "/metrics.jsonl",
        "{\"type\":\"start\",\"resumed\":false,\"epoch\":0,\"step\":0}\n" + epoch(1, 10, 0) + epoch(2, 100, 0) +
            "{\"type\":\"stop\",\"epoch\":3,\"step\":10,\"epoch_step\":2,\"signal\":\"SIGTERM\"}\n" +
            "{\"type\":\"start\",\"resumed\":true,\"epoch\":2,\"step\":10}\n" + epoch(3, 40, 10) + epoch(4, 120, 0));
  const std::string html = render_run_report(run);
  EXPECT_NE(html.find(" 110 images/s (median of 2 epochs: 2 left out, each the first of its process or resumed "
                      "mid-way)"),
            std::string::npos)
      << html;
  EXPECT_NE(html.find("The run was stopped 1 time by a signal (the last: SIGTERM in epoch 3 after 2 of its steps) "
                      "and resumed 1 time."),
            std::string::npos);
  EXPECT_NE(html.find("<td>3 (from step 10)</td>"), std::string::npos);
  EXPECT_NE(html.find("none skipped"), std::string::npos);
}

TEST(RunReport, WithoutAMetricsFileItIsADataError) {
  rn50::testing::TempDir dir;
  EXPECT_THROW(write_run_report(dir.path()), DataError);
}

}  // namespace
}  // namespace rn50::report
