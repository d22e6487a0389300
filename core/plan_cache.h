// core/plan_cache.h: PlanCache, fusion: conv's timed choices (each pattern and shape's cuDNN plan, each prologue's
// form) kept in a file between runs, so that a later run on the same GPU, driver, cuDNN and rn50 build finalizes one
// plan a pattern instead of timing up to 16, and times no prologue. Torch-free; the file is read as untrusted input.
#pragma once

#include <cstdint>
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
  std::string knobs;  // "type=value,...", "none" for an engine without knobs; empty where cuDNN did not name them
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

  // The file's choices (never those put by this process: each thread times its own, as without a cache). A lookup
  // counts a hit or a miss. Keys are single words (no whitespace), at most kPlanCacheMaxKey bytes.
  std::optional<PlanChoice> plan(const std::string& key);
  // A prologue's form; "fused" only where the file also holds that key's plan (the fused form may have none here).
  std::optional<bool> prologue_separate(const std::string& key);
  // New choices, written by the next save. A plan whose knobs cuDNN did not name is not kept (plan_of could not tell
  // it from the engine's other configurations), nor one the file's checks would refuse.
  void put_plan(const std::string& key, const PlanChoice& choice);
  void put_prologue(const std::string& key, bool separate);
  // A choice from the file that no longer builds or runs: gone from the file at the next save, its lookup counted as
  // a miss (the search's choice, put after, replaces it).
  void drop_plan(const std::string& key);

  // Writes the file where anything was put or dropped since the last save: under a lock file (PATH.lock, waited for
  // at most 2 s), what another process saved meanwhile under the same context is read again and kept (over this
  // one's copy of what it read at the start), this one's new choices win, and the whole goes through a staging name
  // of this instance's own, renamed over the file. Returns "" or why it could not write (the run goes on without it).
  std::string save();

  int64_t hits() const;
  int64_t misses() const;
  int64_t added() const;  // choices put by this process
  bool used() const;      // the file was read and its choices are looked up
  size_t file_choices() const;  // plans and prologue choices read from the file (less those dropped)

 private:
  mutable std::mutex mutex_;
  std::string path_, context_, note_;
  std::map<std::string, PlanChoice> file_plans_, new_plans_;
  std::map<std::string, bool> file_prologues_, new_prologues_;
  std::map<std::string, bool> dropped_;  // keys of file_plans_ dropped, kept out of the merge
  bool dirty_ = false, used_ = false;
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
// file's path. `env` reads a variable (std::getenv without it; tests pass their own).
std::string plan_cache_path(const std::string& setting, const std::function<const char*(const char*)>& env);
std::string plan_cache_path(const std::string& setting);

}  // namespace rn50
