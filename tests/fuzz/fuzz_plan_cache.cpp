// tests/fuzz/fuzz_plan_cache.cpp: libFuzzer target for the plan cache's file (core/plan_cache.h). Any bytes either
// are not used (the note says why) or are used; a used file survives a save and a reload with the same plans and, with
// the one prologue choice the save adds, its prologue choices. Anything else (a throw, a crash) is a finding.
#include <stdlib.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>

#include "core/plan_cache.h"

namespace {

constexpr char kContext[] = "rn50 fuzz; cuDNN 91900 loaded; CUDA driver 13000";

const std::string& folder() {
  static const std::string path = [] {
    std::string pattern = "/tmp/rn50_fuzz_plan_cache_XXXXXX";
    if (mkdtemp(pattern.data()) == nullptr) std::abort();
    return pattern;
  }();
  return path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = folder() + "/plans.txt";
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  size_t before = 0;
  {
    rn50::PlanCache cache(path, kContext);  // must not throw, whatever the bytes
    if (!cache.used()) return 0;
    before = cache.file_choices();
    if (before + 1 >= rn50::kPlanCacheMaxEntries) return 0;  // a full file keeps only the new choice: not a finding
    cache.put_prologue("fuzz/added", true);
    if (!cache.save().empty()) std::abort();
  }
  rn50::PlanCache reloaded(path, kContext);
  if (!reloaded.used()) std::abort();  // what it wrote it cannot read
  const size_t after = reloaded.file_choices();
  if (after != before && after != before + 1) std::abort();
  return 0;
}
