// core/plan_cache.cpp: the plan cache's file (a header, the context, one choice a line), read within bounds and
// written atomically, and the process's cache in use.
#include "core/plan_cache.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <sstream>
#include <stdexcept>
#include <utility>
#include <vector>

#include "core/files.h"

namespace rn50 {
namespace {

constexpr char kHeader[] = "rn50 fusion-conv plan cache 1";
constexpr char kFileName[] = "fusion-conv-plans.txt";

struct Entries {
  std::map<std::string, PlanChoice> plans;
  std::map<std::string, bool> prologues;
  size_t size() const { return plans.size() + prologues.size(); }
};

bool valid_key(const std::string& key) {
  if (key.empty() || key.size() > kPlanCacheMaxKey) return false;
  for (const char c : key) {
    if (c <= ' ' || c > '~') return false;  // printable ASCII, no space: one word of a line
  }
  return true;
}

bool valid_knobs(const std::string& knobs) {  // "none", or "type=value,...": digits, '=', ',' and a value's '-'
  if (knobs == "none") return true;
  if (knobs.size() > 1024) return false;
  for (const char c : knobs) {
    if (!((c >= '0' && c <= '9') || c == '=' || c == ',' || c == '-')) return false;
  }
  return true;
}

// What the reader accepts of a plan, and so what a put may keep.
bool valid_plan(const PlanChoice& c) {
  return c.variant >= 0 && c.variant <= 63 && c.engine >= 0 && c.engine <= 1000000000 && valid_knobs(c.knobs) &&
         std::isfinite(c.time_ms) && c.time_ms >= 0 && c.time_ms <= 1e6;
}

template <class T>
bool parse_number(const std::string& text, T lo, T hi, T* out) {
  T value{};
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < lo || value > hi) return false;
  *out = value;
  return true;
}

bool parse_time(const std::string& text, double* out) {  // from_chars for double is missing from older libstdc++
  if (text.empty() || text.size() > 32) return false;
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(text.c_str(), &end);
  if (errno != 0 || end != text.c_str() + text.size() || !std::isfinite(v) || v < 0 || v > 1e6) return false;
  *out = v;
  return true;
}

// Untrusted text for the log: at most 200 bytes, anything but printable ASCII as '?'.
std::string printable(const std::string& text) {
  std::string out = text.substr(0, 200);
  for (char& c : out) {
    if (c < ' ' || c > '~') c = '?';
  }
  return text.size() > out.size() ? out + "..." : out;
}

std::vector<std::string> words(const std::string& line) {
  std::vector<std::string> out;
  std::istringstream in(line);
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

// The file's entries where it is a plan cache of this context; otherwise why not (entries then empty). `exists` is
// false where there is no file at all.
std::string read_file(const std::string& path, const std::string& context, Entries* entries, bool* exists) {
  *exists = ::access(path.c_str(), F_OK) == 0 || errno != ENOENT;
  if (!*exists) return "";
  Entries got;
  try {
    files::LineReader reader(path, kPlanCacheMaxBytes, kPlanCacheMaxLine);
    std::string line;
    int64_t number = 0;
    while (reader.next(line)) {
      ++number;
      const std::string at = "line " + std::to_string(number) + ": ";
      if (number == 1) {
        if (line != kHeader) return "not a plan cache (its first line is not \"" + std::string(kHeader) + "\")";
        continue;
      }
      if (number == 2) {
        if (line.rfind("context ", 0) != 0) return at + "no context";
        if (line.substr(8) != context) return "written for another context (" + printable(line.substr(8)) + ")";
        continue;
      }
      const std::vector<std::string> w = words(line);
      if (got.size() >= kPlanCacheMaxEntries) return "more than " + std::to_string(kPlanCacheMaxEntries) + " choices";
      if (w.size() == 6 && w[0] == "plan" && valid_key(w[1])) {
        PlanChoice c;
        c.knobs = w[4] == "-" ? "" : w[4];
        if (!parse_number<int>(w[2], 0, 63, &c.variant) || !parse_number<int64_t>(w[3], 0, 1000000000, &c.engine) ||
            !valid_knobs(c.knobs) || !parse_time(w[5], &c.time_ms) || !valid_plan(c)) {
          return at + "a malformed plan";
        }
        got.plans[w[1]] = c;
      } else if (w.size() == 3 && w[0] == "prologue" && valid_key(w[1]) && (w[2] == "fused" || w[2] == "separate")) {
        got.prologues[w[1]] = w[2] == "separate";
      } else {
        return at + "neither a plan nor a prologue choice";
      }
    }
    if (reader.long_lines() > 0) return "a line longer than " + std::to_string(kPlanCacheMaxLine) + " bytes";
    if (number < 2) return "no context";
  } catch (const files::ReadError& e) {
    return e.what();
  }
  *entries = std::move(got);
  return "";
}

// The folders above `path`, made where missing (POSIX calls: std::filesystem crashed in tests linked with pip's
// LibTorch, tests/support/temp_dir.h).
void make_folders_for(const std::string& path) {
  for (size_t slash = path.find('/', 1); slash != std::string::npos; slash = path.find('/', slash + 1)) {
    const std::string folder = path.substr(0, slash);
    if (::mkdir(folder.c_str(), 0755) != 0 && errno != EEXIST) {
      throw std::runtime_error("cannot make " + folder + ": " + files::errno_text(errno));
    }
  }
}

// An exclusive lock on PATH.lock for a save's read, merge and rename, so that processes saving at once (the ranks of a
// data-parallel run, after their first epoch) do not drop each other's choices. Waits at most 2 s for another holder;
// without the lock the save goes ahead (the rename stays atomic; only a merge can be lost).
class SaveLock {
 public:
  explicit SaveLock(const std::string& path)
      : fd_(::open((path + ".lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644)) {
    if (fd_ < 0) fd_ = ::open((path + ".lock").c_str(), O_RDONLY | O_CLOEXEC);  // another user's: flock works on it
    if (fd_ < 0) return;
    for (int tries = 0; tries < 200; ++tries) {
      if (::flock(fd_, LOCK_EX | LOCK_NB) == 0) {
        held_ = true;
        return;
      }
      if (errno != EWOULDBLOCK && errno != EINTR) return;
      ::usleep(10000);
    }
  }
  ~SaveLock() {
    if (held_) ::flock(fd_, LOCK_UN);
    if (fd_ >= 0) ::close(fd_);
  }
  SaveLock(const SaveLock&) = delete;
  SaveLock& operator=(const SaveLock&) = delete;

 private:
  int fd_;
  bool held_ = false;
};

std::atomic<PlanCache*>& in_use() {
  static std::atomic<PlanCache*> cache{nullptr};
  return cache;
}

}  // namespace

PlanCache::PlanCache(std::string path, std::string context) : path_(std::move(path)), context_(std::move(context)) {
  // A context is one line of the file.
  for (char& c : context_) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  Entries entries;
  bool exists = false;
  const std::string why = read_file(path_, context_, &entries, &exists);
  if (!exists) {
    note_ = path_ + ": none yet (written after the first epoch)";
  } else if (!why.empty()) {
    note_ = path_ + ": not used, " + why + " (replaced at the next save)";
  } else {
    file_plans_ = std::move(entries.plans);
    file_prologues_ = std::move(entries.prologues);
    used_ = true;
    note_ = path_ + ": " + std::to_string(file_plans_.size()) + " plans and " + std::to_string(file_prologues_.size()) +
            " prologue choices from it";
  }
}

std::string PlanCache::note() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return note_;
}

std::optional<PlanChoice> PlanCache::plan(const std::string& key) {
  const std::lock_guard<std::mutex> lock(mutex_);
  const auto it = file_plans_.find(key);
  ++(it == file_plans_.end() ? misses_ : hits_);
  if (it == file_plans_.end()) return std::nullopt;
  return it->second;
}

std::optional<bool> PlanCache::prologue_separate(const std::string& key) {
  const std::lock_guard<std::mutex> lock(mutex_);
  const auto it = file_prologues_.find(key);
  const bool usable = it != file_prologues_.end() && (it->second || file_plans_.count(key) > 0);
  ++(usable ? hits_ : misses_);
  if (!usable) return std::nullopt;
  return it->second;
}

void PlanCache::put_plan(const std::string& key, const PlanChoice& choice) {
  if (!valid_key(key) || choice.knobs.empty() || !valid_plan(choice)) return;
  const std::lock_guard<std::mutex> lock(mutex_);
  new_plans_[key] = choice;
  dirty_ = true;
}

void PlanCache::put_prologue(const std::string& key, bool separate) {
  if (!valid_key(key)) return;
  const std::lock_guard<std::mutex> lock(mutex_);
  new_prologues_[key] = separate;
  dirty_ = true;
}

void PlanCache::drop_plan(const std::string& key) {
  const std::lock_guard<std::mutex> lock(mutex_);
  if (file_plans_.erase(key) == 0) return;
  dropped_[key] = true;
  dirty_ = true;
  if (hits_ > 0) {  // its lookup was a hit that gave nothing usable: searched for after all
    --hits_;
    ++misses_;
  }
}

std::string PlanCache::save() {
  const std::lock_guard<std::mutex> lock(mutex_);
  if (!dirty_) return "";
  // A unique staging name for each save of each instance: two instances of one path in a process, or two saves,
  // never write the same temporary.
  static std::atomic<int64_t> saves{0};
  const std::string staging = path_ + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(saves++);
  try {
    make_folders_for(path_);
    const SaveLock file_lock(path_);
    Entries merged;
    bool exists = false;
    read_file(path_, context_, &merged, &exists);  // another process's choices, where the file is still valid
    for (const auto& [key, choice] : file_plans_) merged.plans.emplace(key, choice);  // the file's, if newer, win
    for (const auto& [key, separate] : file_prologues_) merged.prologues.emplace(key, separate);
    for (const auto& [key, dropped] : dropped_) merged.plans.erase(key);
    for (const auto& [key, choice] : new_plans_) merged.plans[key] = choice;
    for (const auto& [key, separate] : new_prologues_) merged.prologues[key] = separate;
    const auto render = [&](const Entries& e) {
      std::ostringstream out;
      out << kHeader << "\ncontext " << context_ << '\n';
      out.precision(6);
      for (const auto& [key, c] : e.plans) {
        out << "plan " << key << ' ' << c.variant << ' ' << c.engine << ' ' << (c.knobs.empty() ? "-" : c.knobs) << ' '
            << std::fixed << c.time_ms << '\n';
      }
      for (const auto& [key, separate] : e.prologues) {
        out << "prologue " << key << ' ' << (separate ? "separate" : "fused") << '\n';
      }
      return out.str();
    };
    std::string text = render(merged);
    // What the next run could not read is not written: this process's choices alone, else nothing.
    if (merged.size() > kPlanCacheMaxEntries || text.size() > kPlanCacheMaxBytes) {
      text = render(Entries{new_plans_, new_prologues_});
      if (new_plans_.size() + new_prologues_.size() > kPlanCacheMaxEntries || text.size() > kPlanCacheMaxBytes) {
        return "plan cache not saved: more choices than a file may hold";
      }
    }
    files::write_atomically(path_, text.data(), text.size(), staging);
  } catch (const std::exception& e) {
    return std::string("plan cache not saved: ") + e.what();
  }
  dirty_ = false;
  return "";
}

int64_t PlanCache::hits() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return hits_;
}

int64_t PlanCache::misses() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return misses_;
}

bool PlanCache::used() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return used_;
}

size_t PlanCache::file_choices() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return file_plans_.size() + file_prologues_.size();
}

int64_t PlanCache::added() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return static_cast<int64_t>(new_plans_.size() + new_prologues_.size());
}

UsePlanCache::UsePlanCache(PlanCache& cache) : previous_(in_use().exchange(&cache)) {}
UsePlanCache::~UsePlanCache() { in_use().store(previous_); }

PlanCache* current_plan_cache() { return in_use().load(); }

std::string plan_cache_path(const std::string& setting, const std::function<const char*(const char*)>& env) {
  if (setting == "off") return "";
  if (setting != "auto") return setting;
  const auto set = [&](const char* name) -> std::string {
    const char* v = env(name);
    return v && *v ? std::string(v) : std::string();
  };
  if (const std::string dir = set("RN50_CACHE_DIR"); !dir.empty()) return dir + "/" + kFileName;
  if (const std::string dir = set("XDG_CACHE_HOME"); !dir.empty()) return dir + "/rn50/" + kFileName;
  if (const std::string home = set("HOME"); !home.empty()) return home + "/.cache/rn50/" + kFileName;
  return "";
}

std::string plan_cache_path(const std::string& setting) {
  return plan_cache_path(setting, [](const char* name) { return static_cast<const char*>(std::getenv(name)); });
}

}  // namespace rn50
