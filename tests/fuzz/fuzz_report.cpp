// tests/fuzz/fuzz_report.cpp: libFuzzer target for the report readers: a run folder's metrics.jsonl, train.log,
// config.yaml and run.json as `rn50 report` and `rn50 compare` read them, then the page and the comparison made
// from them. The input is the four files in that order, separated by the line "\x1e" (a missing part is a missing
// file). Either the page and the comparison come out whole, or the readers refuse with DataError or ConfigError in
// one line; anything else (a crash, another exception, a sanitizer report, unbounded memory) is a finding.
#include <stdlib.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "report/compare.h"
#include "report/run_report.h"

namespace {

void require(bool ok) {
  if (!ok) std::abort();  // libFuzzer keeps the input that broke an invariant
}

// One folder for the whole run, made once; each input rewrites its files.
const std::string& run_folder() {
  static const std::string dir = [] {
    char name[] = "/tmp/rn50-fuzz-report-XXXXXX";
    require(mkdtemp(name) != nullptr);
    return std::string(name);
  }();
  return dir;
}

void write(const std::string& path, const std::string& text) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  require(f != nullptr);
  require(text.empty() || std::fwrite(text.data(), 1, text.size(), f) == text.size());
  require(std::fclose(f) == 0);
}

// A refusal is one line that names what is wrong.
void check_refusal(const std::exception& e) {
  const std::string what = e.what();
  require(!what.empty() && what.find('\n') == std::string::npos);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  const std::string& dir = run_folder();
  const char* names[] = {"metrics.jsonl", "train.log", "config.yaml", "run.json"};
  size_t from = 0;
  for (const char* name : names) {
    const std::string path = dir + "/" + name;
    if (from > input.size()) {
      ::unlink(path.c_str());
      continue;
    }
    const size_t end = input.find("\n\x1e\n", from);
    write(path, input.substr(from, end == std::string::npos ? std::string::npos : end - from));
    from = end == std::string::npos ? input.size() + 1 : end + 3;
  }
  try {
    const std::string html = rn50::report::render_run_report(dir);
    require(html.rfind("<!DOCTYPE html>", 0) == 0 && html.size() >= 8 &&
            html.compare(html.size() - 8, 8, "</html>\n") == 0);
  } catch (const rn50::DataError& e) {
    check_refusal(e);
  }
  try {
    rn50::report::CompareOptions options;
    options.inputs = {dir};
    options.names = {{dir, "fuzzed"}};  // a GPU run that names no device is refused before the table otherwise
    const rn50::report::Comparison comparison = rn50::report::compare(options);
    require(!rn50::report::comparison_markdown(comparison).empty());
    const nlohmann::json json = nlohmann::json::parse(rn50::report::comparison_json(comparison), nullptr, false);
    require(json.is_object());  // what compare.json holds parses back
  } catch (const rn50::DataError& e) {
    check_refusal(e);
  } catch (const rn50::ConfigError& e) {
    check_refusal(e);
  }
  return 0;
}
