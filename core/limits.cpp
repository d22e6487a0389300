// core/limits.cpp: finding this process's cgroups through /proc, reading their CPU and memory limits, and the
// memlock and file-system sizes through getrlimit and statvfs.
#include "core/limits.h"

#include <sys/resource.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <sstream>
#include <vector>

namespace rn50 {
namespace {

// cgroup and proc files are a few lines; the cap only keeps a strange file from being read whole.
constexpr std::streamsize kMaxTextBytes = 1 << 20;

std::optional<std::string> read_text(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::string text(static_cast<size_t>(kMaxTextBytes), '\0');
  in.read(text.data(), kMaxTextBytes);
  text.resize(static_cast<size_t>(in.gcount()));
  return text;
}

std::string trim(const std::string& s) {
  const size_t begin = s.find_first_not_of(" \t\r\n");
  if (begin == std::string::npos) return "";
  return s.substr(begin, s.find_last_not_of(" \t\r\n") - begin + 1);
}

// A whole decimal integer, sign allowed; nothing for anything else (empty, trailing text, out of range).
std::optional<int64_t> parse_int(const std::string& text) {
  const std::string s = trim(text);
  if (s.empty()) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  if (errno != 0 || end != s.c_str() + s.size()) return std::nullopt;
  return static_cast<int64_t>(v);
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> parts;
  std::string part;
  std::istringstream in(s);
  while (std::getline(in, part, sep)) parts.push_back(part);
  return parts;
}

bool has_token(const std::string& list, const std::string& token) {
  const auto parts = split(list, ',');
  return std::find(parts.begin(), parts.end(), token) != parts.end();
}

// mountinfo writes a space, tab, newline and backslash in a path as \040, \011, \012 and \134.
std::string unescape_octal(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    const auto octal = [&](size_t k) { return s[k] >= '0' && s[k] <= '7'; };
    if (s[i] == '\\' && i + 3 < s.size() && octal(i + 1) && octal(i + 2) && octal(i + 3)) {
      out += static_cast<char>((s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 + (s[i + 3] - '0'));
      i += 3;
    } else {
      out += s[i];
    }
  }
  return out;
}

struct Mount {
  std::string root, point, fstype, super_options;
};

// /proc/self/mountinfo: "ID PARENT MAJ:MIN ROOT POINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER_OPTIONS".
std::vector<Mount> parse_mountinfo(const std::string& text) {
  std::vector<Mount> mounts;
  for (const std::string& line : split(text, '\n')) {
    std::istringstream in(line);
    const std::vector<std::string> f{std::istream_iterator<std::string>(in), std::istream_iterator<std::string>()};
    const auto dash = std::find(f.begin() + std::min<ptrdiff_t>(6, static_cast<ptrdiff_t>(f.size())), f.end(), "-");
    if (f.size() < 6 || std::distance(dash, f.end()) < 4) continue;
    mounts.push_back({unescape_octal(f[3]), unescape_octal(f[4]), *(dash + 1), *(dash + 3)});
  }
  return mounts;
}

struct Membership {
  std::string id, controllers, path;
};

// /proc/self/cgroup: "ID:CONTROLLERS:PATH" (v2: "0::PATH").
std::vector<Membership> parse_proc_cgroup(const std::string& text) {
  std::vector<Membership> lines;
  for (const std::string& line : split(text, '\n')) {
    const size_t a = line.find(':'), b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    lines.push_back({line.substr(0, a), line.substr(a + 1, b - a - 1), line.substr(b + 1)});
  }
  return lines;
}

// One hierarchy's folder for this process and the mount point above which its parents are not visible.
struct Hierarchy {
  int version = 0;
  std::string dir, mount_point;
};

// Where the process's cgroup path lies under a mount of the hierarchy: a container often mounts its own cgroup as the
// hierarchy's root, and then the path /proc shows (the host's) starts with the mount's root, or is not under it at all.
std::string folder_under_mount(const Mount& mount, const std::string& path) {
  if (mount.root == "/") return mount.point + (path == "/" ? "" : path);
  if (path == mount.root) return mount.point;
  if (path.rfind(mount.root + "/", 0) == 0) return mount.point + path.substr(mount.root.size());
  return mount.point;
}

// `controller` "" for the v2 hierarchy.
std::optional<Hierarchy> find_hierarchy(const std::vector<Mount>& mounts, const std::vector<Membership>& lines,
                                        const std::string& controller) {
  const bool v2 = controller.empty();
  const auto mount = std::find_if(mounts.begin(), mounts.end(), [&](const Mount& m) {
    return v2 ? m.fstype == "cgroup2" : m.fstype == "cgroup" && has_token(m.super_options, controller);
  });
  const auto line = std::find_if(lines.begin(), lines.end(), [&](const Membership& l) {
    return v2 ? l.id == "0" && l.controllers.empty() : has_token(l.controllers, controller);
  });
  if (mount == mounts.end() || line == lines.end()) return std::nullopt;
  return Hierarchy{v2 ? 2 : 1, folder_under_mount(*mount, line->path), mount->point};
}

// Calls visit(folder) for the hierarchy's folder and each parent up to its mount point.
template <typename Visit>
void for_each_level(const std::string& root, const Hierarchy& h, Visit&& visit) {
  std::string dir = h.dir;
  for (int depth = 0; depth < 64; ++depth) {  // a bound against a path that never reaches the mount point
    visit(root + dir);
    if (dir == h.mount_point || dir.size() <= h.mount_point.size()) return;
    const size_t slash = dir.find_last_of('/');
    if (slash == std::string::npos) return;
    dir = dir.substr(0, std::max<size_t>(slash, 1));
  }
}

template <typename T>
void keep_tightest(std::optional<T>& best, std::string& best_file, std::optional<T> value, const std::string& file) {
  if (value && (!best || *value < *best)) {
    best = value;
    best_file = file;
  }
}

}  // namespace

std::optional<double> parse_cpu_max(const std::string& text) {
  std::istringstream in(trim(text));
  std::string quota, period, extra;
  in >> quota >> period >> extra;
  if (quota == "max" || !extra.empty()) return std::nullopt;
  const auto q = parse_int(quota), p = parse_int(period);
  if (!q || !p || *q <= 0 || *p <= 0) return std::nullopt;
  return static_cast<double>(*q) / static_cast<double>(*p);
}

std::optional<double> parse_cfs_quota(const std::string& quota_text, const std::string& period_text) {
  const auto q = parse_int(quota_text), p = parse_int(period_text);
  if (!q || !p || *q <= 0 || *p <= 0) return std::nullopt;  // -1: no quota
  return static_cast<double>(*q) / static_cast<double>(*p);
}

std::optional<uint64_t> parse_memory_limit(const std::string& text) {
  const auto v = parse_int(text);  // "max", and a number past int64 (never a real limit), give nothing
  if (!v || *v <= 0 || *v >= (int64_t{1} << 62)) return std::nullopt;
  return static_cast<uint64_t>(*v);
}

CgroupLimits read_cgroup_limits(const std::string& root) {
  CgroupLimits limits;
  const auto mountinfo = read_text(root + "/proc/self/mountinfo");
  const auto cgroup = read_text(root + "/proc/self/cgroup");
  if (!mountinfo || !cgroup) return limits;
  const auto mounts = parse_mountinfo(*mountinfo);
  const auto lines = parse_proc_cgroup(*cgroup);

  if (const auto h = find_hierarchy(mounts, lines, "cpu")) {
    for_each_level(root, *h, [&](const std::string& dir) {
      const auto quota = read_text(dir + "/cpu.cfs_quota_us"), period = read_text(dir + "/cpu.cfs_period_us");
      if (quota && period)
        keep_tightest(limits.cpus, limits.cpu_file, parse_cfs_quota(*quota, *period), dir + "/cpu.cfs_quota_us");
    });
    if (limits.cpus) limits.cpu_version = 1;
  }
  if (const auto h = find_hierarchy(mounts, lines, "memory")) {
    for_each_level(root, *h, [&](const std::string& dir) {
      if (const auto text = read_text(dir + "/memory.limit_in_bytes"))
        keep_tightest(limits.memory_bytes, limits.memory_file, parse_memory_limit(*text),
                      dir + "/memory.limit_in_bytes");
    });
    if (limits.memory_bytes) limits.memory_version = 1;
  }
  if (const auto h = find_hierarchy(mounts, lines, "")) {
    if (!limits.cpus) {
      for_each_level(root, *h, [&](const std::string& dir) {
        if (const auto text = read_text(dir + "/cpu.max"))
          keep_tightest(limits.cpus, limits.cpu_file, parse_cpu_max(*text), dir + "/cpu.max");
      });
      if (limits.cpus) limits.cpu_version = 2;
    }
    if (!limits.memory_bytes) {
      for_each_level(root, *h, [&](const std::string& dir) {
        if (const auto text = read_text(dir + "/memory.max"))
          keep_tightest(limits.memory_bytes, limits.memory_file, parse_memory_limit(*text), dir + "/memory.max");
      });
      if (limits.memory_bytes) limits.memory_version = 2;
    }
  }
  // The files as the process sees them, without the test's fake root.
  if (!root.empty()) {
    for (std::string* file : {&limits.cpu_file, &limits.memory_file})
      if (file->rfind(root, 0) == 0) file->erase(0, root.size());
  }
  return limits;
}

int cores_within_quota(int affinity_cpus, std::optional<double> quota_cpus) {
  const int cpus = std::max(1, affinity_cpus);
  if (!quota_cpus) return cpus;
  // The small tolerance keeps a quota of exactly N CPUs, computed in floating point, from rounding up to N + 1.
  const int quota_cores = std::max(1, static_cast<int>(std::ceil(*quota_cpus - 1e-9)));
  return std::min(cpus, quota_cores);
}

std::optional<uint64_t> memlock_limit_bytes() {
  struct rlimit limit {};
  if (getrlimit(RLIMIT_MEMLOCK, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return std::nullopt;
  return static_cast<uint64_t>(limit.rlim_cur);
}

std::optional<uint64_t> filesystem_bytes(const std::string& path) {
  struct statvfs fs {};
  if (statvfs(path.c_str(), &fs) != 0) return std::nullopt;
  return static_cast<uint64_t>(fs.f_blocks) * static_cast<uint64_t>(fs.f_frsize);
}

uint64_t physical_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : 0;
}

}  // namespace rn50
