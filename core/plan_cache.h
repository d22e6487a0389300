// core/plan_cache.h: PlanCache, fusion: conv's timed choices (each pattern and shape's cuDNN plan, each prologue's
// form) kept in a file between runs, so that a later run on the same GPU, driver, cuDNN and rn50 build finalizes one
// plan a pattern instead of timing up to 16, and times no prologue. Torch-free; the file is read as untrusted input.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>

namespace rn50 {

// A pattern's chosen plan: the graph's typing (the index of ops/fused_conv_cuda.cpp's variant), cuDNN's global engine
// index and its knob settings as cudnn_graph::Plan names them, and how long it took when it was chosen.
struct PlanChoice {
  int variant = 0;
  int64_t engine = -1;
  std::string knobs;  // "type=value,..."; empty where cuDNN did not name them
  double time_ms = 0;
};

// Limits on what is read: beyond them the file is not used (and is replaced by the next save).
inline constexpr uint64_t kPlanCacheMaxBytes = 8ull << 20;
inline constexpr size_t kPlanCacheMaxLine = 2048;
inline constexpr size_t kPlanCacheMaxEntries = 65536;
inline constexpr size_t kPlanCacheMaxKey = 512;

class PlanCache {
 public:
  // Reads `path` where it exists. Choices written under another `context` (what they depend on besides the key) are
  // not used; nor is a file that is not a plan cache, is too large, or holds a malformed line: note() says why, and
  // save() replaces it. Never throws for the file's sake.
  PlanCache(std::string path, std::string context);

  const std::string& path() const { return path_; }
  // One line for the start-up log: how many choices came from the file, or why none did.
  std::string note() const;

  // A lookup counts a hit or a miss. Keys are single words (no whitespace), at most kPlanCacheMaxKey bytes.
  std::optional<PlanChoice> plan(const std::string& key);
  std::optional<bool> prologue_separate(const std::string& key);
  void put_plan(const std::string& key, const PlanChoice& choice);
  void put_prologue(const std::string& key, bool separate);
  // A choice from the file that no longer builds (cuDNN no longer offers it): the search's choice replaces it, and
  // its lookup counts as a miss.
  void drop_plan(const std::string& key);

  // Writes the file, atomically through a staging name of this process's own, where anything was put since the last
  // save, over what another process may have saved meanwhile under the same context (its choices kept, this one's
  // winning). Returns "" or why it could not write (the run goes on without the file).
  std::string save();

  int64_t hits() const;
  int64_t misses() const;

 private:
  mutable std::mutex mutex_;
  std::string path_, context_, note_;
  std::map<std::string, PlanChoice> plans_;
  std::map<std::string, bool> prologues_;
  bool dirty_ = false;
  int64_t hits_ = 0, misses_ = 0;
};

// The plan cache the fused convolutions consult while this lives, process-wide (the weight gradients plan on
// autograd's thread); one at a time. Without one every choice is timed, as before. Set where the run is assembled.
class UsePlanCache {
 public:
  explicit UsePlanCache(PlanCache& cache);
  ~UsePlanCache();
  UsePlanCache(const UsePlanCache&) = delete;
  UsePlanCache& operator=(const UsePlanCache&) = delete;

 private:
  PlanCache* previous_;
};

// The cache in use, or null.
PlanCache* current_plan_cache();

// The file for the config key plan_cache: "off" gives ""; "auto" gives $RN50_CACHE_DIR, else $XDG_CACHE_HOME/rn50,
// else $HOME/.cache/rn50, with "/fusion-conv-plans.txt" (or "" where none of them is set); anything else is the
// file's path. `env` reads a variable (std::getenv; tests pass their own).
std::string plan_cache_path(const std::string& setting,
                            const std::function<const char*(const char*)>& env = [](const char* n) {
                              return static_cast<const char*>(std::getenv(n));
                            });

}  // namespace rn50
