// doctor/driver_row.cpp: the driver tables, the reading of /proc and the compat folder, and the driver row's rules.
#include "doctor/driver_row.h"

#include <algorithm>
#include <cctype>
#include <iterator>
#include <sstream>
#include <utility>
#include <vector>

#include "core/log.h"

namespace rn50::doctor {
namespace {

// The CUDA toolkit's release notes, "CUDA Toolkit and Corresponding Driver Versions" (Linux x86_64, each release's
// GA): the first driver branch of each CUDA minor version. A driver branch supports the newest CUDA at or below it.
struct CudaDriver {
  int cuda;    // 12080 for 12.8
  int branch;  // 570
};
constexpr CudaDriver kCudaDrivers[] = {
    {11000, 450}, {11010, 455}, {11020, 460}, {11030, 465}, {11040, 470}, {11050, 495}, {11060, 510}, {11070, 515},
    {11080, 520}, {12000, 525}, {12010, 530}, {12020, 535}, {12030, 545}, {12040, 550}, {12050, 555}, {12060, 560},
    {12080, 570}, {12090, 575}, {13000, 580}, {13010, 590}, {13020, 595}, {13030, 610},
};

// Data-center GPUs by the model in their name ("NVIDIA H100 80GB HBM3", "Tesla T4", "NVIDIA A100-SXM4-80GB").
constexpr const char* kDataCenterModels[] = {"A2",   "A10",   "A10G",  "A10M", "A16",  "A30",   "A40",  "A100",
                                             "A800", "H20",   "H100",  "H200", "H800", "GH200", "B100", "B200",
                                             "B300", "GB200", "GB300", "L4",   "L20",  "L40",   "L40S", "T4",
                                             "V100", "V100S", "P4",    "P40",  "P100", "K80"};

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// The name's words, each up to its first character that is neither a letter nor a digit ("A100-SXM4-80GB": "A100").
std::vector<std::string> model_words(const std::string& name) {
  std::vector<std::string> words;
  std::istringstream in(name);
  for (std::string word; in >> word;) {
    const auto end = std::find_if(word.begin(), word.end(), [](unsigned char c) { return !std::isalnum(c); });
    words.emplace_back(word.begin(), end);
  }
  return words;
}

GpuKind kind_of_brand(monitor::GpuBrand brand, const std::string& name) {
  using monitor::GpuBrand;
  switch (brand) {
    case GpuBrand::kGeForce:
    case GpuBrand::kTitan:
    case GpuBrand::kGeForceRtx:
    case GpuBrand::kTitanRtx:
      return GpuKind::kGeForce;
    case GpuBrand::kTesla:
      return GpuKind::kDataCenter;
    case GpuBrand::kQuadro:
    case GpuBrand::kQuadroRtx:
    case GpuBrand::kNvidiaRtx:
    case GpuBrand::kNvs:
      return GpuKind::kWorkstation;
    case GpuBrand::kNvidia:  // the brand of A100, H100, L4 and their kind, and of some RTX cards
      return contains(lower(name), "rtx") ? GpuKind::kWorkstation : GpuKind::kDataCenter;
    default:  // virtual GPUs (vGPU brands) and unknown: the name decides
      return GpuKind::kUnknown;
  }
}

// The version in a libcuda file's name: "libcuda.so.570.124.06" -> 570.124.06; nullopt for libcuda.so.1.
std::optional<DriverVersion> libcuda_version(const std::string& file) {
  const std::string prefix = "libcuda.so.";
  const std::string name = base_name(file);
  if (name.rfind(prefix, 0) != 0) return std::nullopt;
  return parse_driver_version(name.substr(prefix.size()));
}

// The newest CUDA the host's driver supports: rn50's table for the branch, NVML's answer for a branch newer than it.
std::optional<int> host_cuda_of(const DriverFacts& f) {
  const std::optional<int> from_table = cuda_of_driver(f.driver->branch);
  return from_table ? from_table : f.nvml_cuda;
}

std::string trim_slashes(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  return path;
}

}  // namespace

std::optional<DriverVersion> parse_driver_version(const std::string& text) {
  std::vector<std::string> parts;
  std::istringstream in(text);
  for (std::string part; std::getline(in, part, '.');) parts.push_back(part);
  if (parts.size() < 2 || text.back() == '.' || parts[0].size() > 4) return std::nullopt;
  for (const std::string& part : parts) {
    const bool digits = std::all_of(part.begin(), part.end(), [](unsigned char c) { return std::isdigit(c) != 0; });
    if (part.empty() || part.size() > 8 || !digits) return std::nullopt;
  }
  return DriverVersion{std::stoi(parts[0]), text};
}

std::string driver_version_in_proc(const std::string& text) {
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("NVRM version:", 0) != 0) continue;
    std::istringstream words(line);
    for (std::string word; words >> word;)
      if (parse_driver_version(word)) return word;
  }
  return "";
}

std::optional<int> driver_for_cuda(int cuda) {
  for (const CudaDriver& entry : kCudaDrivers)
    if (entry.cuda >= cuda) return entry.branch;
  return std::nullopt;
}

std::optional<int> cuda_of_driver(int branch) {
  const CudaDriver& newest = kCudaDrivers[std::size(kCudaDrivers) - 1];
  if (branch < kCudaDrivers[0].branch || branch > newest.branch) return std::nullopt;
  std::optional<int> cuda;
  for (const CudaDriver& entry : kCudaDrivers)
    if (entry.branch <= branch) cuda = entry.cuda;
  return cuda;
}

std::optional<int> minor_compatible_driver(int cuda_major) {
  switch (cuda_major) {
    case 11:
      return 450;
    case 12:
      return 525;
    case 13:
      return 580;
    default:
      return std::nullopt;
  }
}

std::string cuda_text(int cuda) { return strprintf("%d.%d", cuda / 1000, cuda % 1000 / 10); }

GpuKind gpu_kind(const std::string& name, std::optional<monitor::GpuBrand> brand) {
  if (brand) {
    const GpuKind kind = kind_of_brand(*brand, name);
    if (kind != GpuKind::kUnknown) return kind;
  }
  const std::string low = lower(name);
  if (contains(low, "geforce") || contains(low, "titan")) return GpuKind::kGeForce;
  if (contains(low, "quadro") || contains(low, "rtx")) return GpuKind::kWorkstation;
  if (contains(low, "tesla")) return GpuKind::kDataCenter;
  for (const std::string& word : model_words(name))
    for (const char* model : kDataCenterModels)
      if (word == model) return GpuKind::kDataCenter;
  return GpuKind::kUnknown;
}

CompatLibraries read_compat_libraries(const HostView& host) {
  CompatLibraries compat;
  if (const auto maps = host.read_text("/proc/self/maps")) {
    std::istringstream lines(*maps);
    for (std::string line; std::getline(lines, line) && compat.loaded.empty();) {
      const size_t path = line.find('/');
      if (path != std::string::npos && base_name(line.substr(path)).rfind("libcuda.so", 0) == 0)
        compat.loaded = line.substr(path);
    }
  }
  std::vector<std::string> folders;
  if (const auto exe = host.link_target("/proc/self/exe")) folders.push_back(folder_of(folder_of(*exe)) + "/compat");
  folders.push_back("/usr/local/cuda/compat");
  folders.push_back("/usr/local/cuda/compat/lib");
  // A libcuda loaded from a folder named compat is one of them wherever it lies (cuda-compat-X-Y's own folder).
  if (contains(compat.loaded, "/compat")) folders.insert(folders.begin(), folder_of(compat.loaded));
  for (const std::string& folder : folders) {
    for (const std::string& name : host.entries(folder)) {
      if (const auto version = libcuda_version(name)) {
        compat.folder = folder;
        compat.driver = version;
        break;
      }
    }
    if (!compat.folder.empty()) break;
  }
  if (!compat.folder.empty()) {
    std::istringstream path(host.variable("LD_LIBRARY_PATH").value_or(""));
    for (std::string entry; std::getline(path, entry, ':');)
      compat.on_library_path |= !entry.empty() && trim_slashes(entry) == compat.folder;
  }
  return compat;
}

void read_nvml_driver_facts(monitor::NvmlApi& nvml, unsigned gpu, DriverFacts& facts) {
  const std::string version = nvml.driver_version();
  facts.driver = parse_driver_version(version);
  if (!facts.driver) facts.no_driver_reason = "NVML's driver version '" + version + "' is not one";
  facts.nvml_cuda = nvml.cuda_driver_version();
  if (gpu >= nvml.device_count()) return;
  const monitor::NvmlDevice device{gpu, std::nullopt};
  facts.gpu_name = nvml.name(device);
  facts.gpu = gpu_kind(facts.gpu_name, nvml.brand(device));
}

std::optional<DriverVersion> read_proc_driver_version(const HostView& host) {
  const auto text = host.read_text("/proc/driver/nvidia/version");
  return text ? parse_driver_version(driver_version_in_proc(*text)) : std::nullopt;
}

CompatState compat_state(const CompatLibraries& compat) {
  if (compat.folder.empty()) return CompatState::kAbsent;
  if (!compat.loaded.empty())
    return folder_of(compat.loaded) == compat.folder ? CompatState::kInUse : CompatState::kUnused;
  return compat.on_library_path ? CompatState::kInUse : CompatState::kUnused;
}

namespace {

// What every rule below reads: the facts and the words they share.
struct Judged {
  const DriverFacts& f;
  int runtime;                   // 12080
  std::optional<int> needed;     // the driver branch the runtime needs, where the table knows it
  std::optional<int> host_cuda;  // the newest CUDA the host's driver supports
  CompatState compat;
  std::string libraries;  // "the compat libraries in /opt/rn50/compat (from driver 580.95.05)"
  std::string older;      // "driver 535.104.05 is older than CUDA 13.0's 580"
  std::string update;     // "update the driver to 580 or newer"
};

Judged judged(const DriverFacts& f) {
  Judged j{f, *f.runtime_cuda, driver_for_cuda(*f.runtime_cuda), host_cuda_of(f), compat_state(f.compat), "", "", ""};
  const std::string cuda = cuda_text(j.runtime);
  j.libraries = "the compat libraries in " + f.compat.folder +
                (f.compat.driver ? " (from driver " + f.compat.driver->text + ")" : "");
  j.older = "driver " + f.driver->text + " is older than CUDA " + cuda +
            (j.needed ? "'s " + std::to_string(*j.needed) : " needs");
  j.update = "update the driver to " + (j.needed ? std::to_string(*j.needed) : "one of CUDA " + cuda) + " or newer";
  return j;
}

// The driver supports the runtime by itself: ok, unless compat libraries older than it are in the way.
void new_enough(const Judged& j, ReportRow& row) {
  const DriverFacts& f = j.f;
  row.verdict = "ok";
  if (j.compat == CompatState::kInUse && f.compat.driver && f.compat.driver->branch < f.driver->branch) {
    row.verdict = "bad";
    row.note = j.libraries + " are older than the driver " + f.driver->text +
               ": CUDA refuses them (error 803); start " + "rn50 without " + f.compat.folder +
               " on LD_LIBRARY_PATH (rn50-entry leaves it off where the driver " + "needs none)";
  } else if (j.compat == CompatState::kInUse) {
    row.note = j.libraries + " are in use, though this driver needs none";
  } else if (!f.cuda_works) {
    row.note = "the driver fits, but CUDA found no device here (a container needs --gpus)";
  }
}

// Older than the runtime needs, with the compat libraries in use: CUDA working through them is the proof; where it
// does not, the likeliest reason.
void older_with_compat(const Judged& j, ReportRow& row) {
  const DriverFacts& f = j.f;
  if (f.cuda_works) {
    row.verdict = "ok";
    row.note = j.older + ": " + j.libraries + " make it work" +
               (f.gpu == GpuKind::kDataCenter ? " on this data-center GPU" : " on this GPU");
    return;
  }
  row.verdict = "bad";
  if (j.needed && f.compat.driver && f.compat.driver->branch < *j.needed) {
    row.note = j.older + "; " + j.libraries + " are older than that too: they must be CUDA " + cuda_text(j.runtime) +
               "'s cuda-compat or a newer one";
  } else if (f.gpu == GpuKind::kGeForce) {
    row.note = j.older + "; " + j.libraries + " do not work on GeForce GPUs (CUDA error 804): " + j.update;
  } else if (f.driver->branch < kOldestForwardCompatibleDriver) {
    row.note = j.older + "; " + j.libraries +
               strprintf(" need R%d or newer beneath them: ", kOldestForwardCompatibleDriver) + j.update;
  } else if (f.gpu == GpuKind::kDataCenter) {
    row.note = j.older + "; " + j.libraries + " are in use, yet CUDA found no device (a container needs --gpus)";
  } else {
    row.note = j.older + "; " + j.libraries + " are in use, yet CUDA found no device: forward compatibility works " +
               "on data-center GPUs and some RTX server models only; " + j.update;
  }
}

// Older than the runtime needs, without compat libraries in use: it starts by minor-version compatibility (the same
// CUDA major version) or not at all; what to do depends on the GPU and on whether the libraries are at hand.
void older_without_compat(const Judged& j, ReportRow& row) {
  const DriverFacts& f = j.f;
  std::string fix;
  if (f.gpu == GpuKind::kGeForce) {
    fix = j.update + " (forward compatibility does not work on GeForce GPUs)";
  } else if (j.compat == CompatState::kUnused) {
    fix = j.libraries + " are not in use: start rn50 through rn50-entry, which puts them first on LD_LIBRARY_PATH " +
          "(apptainer exec rn50.sif rn50-entry ...), or " + j.update;
    if (f.gpu != GpuKind::kDataCenter) fix += " (they work on data-center GPUs and some RTX server models only)";
  } else {
    fix = j.update + ", or on a data-center GPU use CUDA's forward-compatibility libraries (the rn50 GPU image " +
          "carries them)";
  }
  // The floor of the runtime's major version is the first driver of that major version: at or above it, the host's
  // CUDA has the runtime's major version.
  const std::optional<int> minor = minor_compatible_driver(j.runtime / 1000);
  if (minor && f.driver->branch >= *minor) {
    row.verdict = "warn";
    row.note = j.older + ": it runs by CUDA's minor-version compatibility, but kernels compiled from PTX at run " +
               "time (NVRTC's, the PTX of GPUs newer than the build) fail to load; " + fix;
  } else {
    row.verdict = "bad";
    row.note = j.older + ": CUDA cannot start; " + fix;
  }
}

}  // namespace

ReportRow driver_row(const DriverFacts& f) {
  ReportRow row{"gpu", "NVIDIA driver", "", "info", ""};
  if (!f.runtime_cuda) {
    row.value = "not needed";
    row.note = "a CPU-only build: no CUDA runtime";
    return row;
  }
  const int runtime = *f.runtime_cuda;
  const std::optional<int> needed = driver_for_cuda(runtime);
  std::string needs = "CUDA " + cuda_text(runtime) + " needs " +
                      (needed ? std::to_string(*needed) + "+" : "a driver of CUDA " + cuda_text(runtime) + "+");
  // With compat libraries of this CUDA at hand (the image's), an older data-center driver does too.
  if (needed && f.compat.driver && f.compat.driver->branch >= *needed)
    needs += strprintf(" (%d+ on data-center GPUs with the compat libraries)", kOldestForwardCompatibleDriver);
  if (!f.driver) {
    row.value = "none found; " + needs;
    row.note = f.no_driver_reason.empty() ? "no NVIDIA driver here (a container needs --gpus)" : f.no_driver_reason;
    return row;
  }
  const std::optional<int> host_cuda = host_cuda_of(f);
  row.value = f.driver->text + (host_cuda ? " (CUDA " + cuda_text(*host_cuda) + ")" : "") + "; " + needs;
  const Judged j = judged(f);
  // Where the host's CUDA is unknown (a branch newer than the table without NVML's answer), a runtime the table knows
  // is judged by the branch, and a runtime newer than the table fits such a driver.
  const bool fits = j.host_cuda ? *j.host_cuda >= runtime : (!needed || f.driver->branch >= *needed);
  if (fits) {
    new_enough(j, row);
  } else if (j.compat == CompatState::kInUse) {
    older_with_compat(j, row);
  } else {
    older_without_compat(j, row);
  }
  return row;
}

}  // namespace rn50::doctor
