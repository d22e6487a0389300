// tests/fuzz/fuzz_plan_cache.cpp: libFuzzer target for the plan cache's file (core/plan_cache.h). Any bytes either
// are not used (the note says why) or are used; a used file survives a save and a reload with the same plans and, with
// the one prologue choice the save adds, its prologue choices. Anything else (a throw, a crash) is a finding.
#include <stdlib.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
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

// "P plans and Q prologue choices" of a used file's note; false where it was not used.
bool counts(const std::string& note, long* plans, long* prologues) {
  const size_t at = note.rfind(": ");
  return at != std::string::npos &&
         std::sscanf(note.c_str() + at, ": %ld plans and %ld prologue choices from it", plans, prologues) == 2;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = folder() + "/plans.txt";
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  long plans = 0, prologues = 0;
  {
    rn50::PlanCache cache(path, kContext);  // must not throw, whatever the bytes
    if (!counts(cache.note(), &plans, &prologues)) return 0;
    cache.put_prologue("fuzz/added", true);
    if (!cache.save().empty()) std::abort();
  }
  rn50::PlanCache reloaded(path, kContext);
  long plans_again = 0, prologues_again = 0;
  if (!counts(reloaded.note(), &plans_again, &prologues_again)) std::abort();  // what it wrote it cannot read
  if (plans_again != plans || (prologues_again != prologues && prologues_again != prologues + 1)) std::abort();
  return 0;
}
