// tests/doctor/test_driver_row.cpp: the driver row: the version parsers and tables, the GPU's kind, NVML's facts (a
// fake NVML), the compat libraries found in fake trees, and the verdict for each driver, runtime, GPU and compat case.
#include <gtest/gtest.h>

#include <string>

#include "doctor/driver_row.h"
#include "tests/doctor/fake_host.h"
#include "tests/monitor/fake_nvml.h"

namespace rn50::doctor {
namespace {

using monitor::GpuBrand;
using testing::FakeHost;

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(DriverVersion, ParsesNvmlsAndProcsForm) {
  const auto v = parse_driver_version("535.104.05");
  ASSERT_TRUE(v);
  EXPECT_EQ(v->branch, 535);
  EXPECT_EQ(v->text, "535.104.05");
  EXPECT_EQ(parse_driver_version("570.26")->branch, 570);
  for (const std::string bad :
       {"", "535", "535.", ".104", "535..05", "r535.104", "535.104.05 ", "1", "12345.1", "535.1x4"})
    EXPECT_FALSE(parse_driver_version(bad)) << bad;
}

TEST(DriverVersion, FoundInProcForBothKernelModules) {
  EXPECT_EQ(driver_version_in_proc("NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 "
                                   "UTC 2023\nGCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n"),
            "535.104.05");
  // The open modules put "for x86_64" after "Kernel Module" (rn50-entry's first reading missed these).
  EXPECT_EQ(driver_version_in_proc("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570.124.06  Release "
                                   "Build  (dvs-builder@U16-I3-B03-4-3)  Thu Aug 17 21:16:19 UTC 2023\n"),
            "570.124.06");
  EXPECT_EQ(driver_version_in_proc("NVRM version: NVIDIA UNIX aarch64 Kernel Module  580.95.05  Release Build\n"),
            "580.95.05");
  EXPECT_EQ(driver_version_in_proc("GCC version:  gcc version 12.2.0\n"), "");  // no NVRM line
  EXPECT_EQ(driver_version_in_proc("NVRM version: something else\n"), "");
  EXPECT_EQ(driver_version_in_proc(""), "");
}

TEST(DriverTables, TheDriverEachCudaNeedsAndTheCudaEachDriverHas) {
  EXPECT_EQ(driver_for_cuda(12080), 570);
  EXPECT_EQ(driver_for_cuda(12020), 535);
  EXPECT_EQ(driver_for_cuda(13000), 580);
  EXPECT_EQ(driver_for_cuda(11080), 520);
  EXPECT_EQ(driver_for_cuda(13090), std::nullopt);  // newer than the table
  EXPECT_EQ(cuda_of_driver(535), 12020);
  EXPECT_EQ(cuda_of_driver(550), 12040);
  EXPECT_EQ(cuda_of_driver(565), 12060);  // between two branches: the older one's
  EXPECT_EQ(cuda_of_driver(570), 12080);
  EXPECT_EQ(cuda_of_driver(580), 13000);
  EXPECT_EQ(cuda_of_driver(440), std::nullopt);
  EXPECT_EQ(cuda_of_driver(700), std::nullopt);
  EXPECT_EQ(minor_compatible_driver(12), 525);
  EXPECT_EQ(minor_compatible_driver(13), 580);
  EXPECT_EQ(minor_compatible_driver(10), std::nullopt);
  EXPECT_EQ(cuda_text(12080), "12.8");
  EXPECT_EQ(cuda_text(13000), "13.0");
}

TEST(GpuKind, BrandFirstThenTheName) {
  EXPECT_EQ(gpu_kind("NVIDIA H100 80GB HBM3", GpuBrand::kNvidia), GpuKind::kDataCenter);
  EXPECT_EQ(gpu_kind("Tesla T4", GpuBrand::kTesla), GpuKind::kDataCenter);
  EXPECT_EQ(gpu_kind("NVIDIA GeForce RTX 4090", GpuBrand::kGeForce), GpuKind::kGeForce);
  EXPECT_EQ(gpu_kind("NVIDIA TITAN RTX", GpuBrand::kTitan), GpuKind::kGeForce);
  EXPECT_EQ(gpu_kind("NVIDIA RTX A6000", GpuBrand::kNvidiaRtx), GpuKind::kWorkstation);
  EXPECT_EQ(gpu_kind("Quadro RTX 8000", GpuBrand::kQuadroRtx), GpuKind::kWorkstation);
  EXPECT_EQ(gpu_kind("NVIDIA RTX 6000 Ada Generation", GpuBrand::kNvidia), GpuKind::kWorkstation);
  // Without a brand, or with a virtual GPU's, the name decides.
  EXPECT_EQ(gpu_kind("NVIDIA A100-SXM4-80GB", std::nullopt), GpuKind::kDataCenter);
  EXPECT_EQ(gpu_kind("NVIDIA H200", std::nullopt), GpuKind::kDataCenter);
  EXPECT_EQ(gpu_kind("NVIDIA A10G", std::nullopt), GpuKind::kDataCenter);
  EXPECT_EQ(gpu_kind("NVIDIA L40S", GpuBrand::kNvidiaVcs), GpuKind::kDataCenter);
  EXPECT_EQ(gpu_kind("NVIDIA GH200 480GB", std::nullopt), GpuKind::kDataCenter);
  EXPECT_EQ(gpu_kind("NVIDIA GeForce RTX 3090", std::nullopt), GpuKind::kGeForce);
  EXPECT_EQ(gpu_kind("NVIDIA RTX A4000", std::nullopt), GpuKind::kWorkstation);
  EXPECT_EQ(gpu_kind("NVIDIA T1000", std::nullopt), GpuKind::kUnknown);  // a workstation card, not the T4
  EXPECT_EQ(gpu_kind("NVIDIA A1000", std::nullopt), GpuKind::kUnknown);
  EXPECT_EQ(gpu_kind("", std::nullopt), GpuKind::kUnknown);
}

// The image: rn50 in /opt/rn50/bin, the compat libraries in /opt/rn50/compat as runtime-libs.sh compat copies them.
void image_tree(const FakeHost& host) {
  host.link("/proc/self/exe", "/opt/rn50/bin/rn50");
  host.write("/opt/rn50/compat/libcuda.so.580.95.05", "");
  host.link("/opt/rn50/compat/libcuda.so.1", "libcuda.so.580.95.05");
  host.link("/opt/rn50/compat/libcuda.so", "libcuda.so.1");
  host.write("/opt/rn50/compat/libnvidia-ptxjitcompiler.so.580.95.05", "");
}

const char* kMapsLine = "7f3a5c000000-7f3a5c600000 r-xp 00000000 08:01 1234                       ";

TEST(CompatLibraries, FoundBesideTheBinaryAndInUseWhenLoadedFromThere) {
  FakeHost host;
  image_tree(host);
  host.write("/proc/self/maps", std::string(kMapsLine) + "/opt/rn50/compat/libcuda.so.580.95.05\n");
  CompatLibraries compat = read_compat_libraries(host);
  EXPECT_EQ(compat.folder, "/opt/rn50/compat");
  ASSERT_TRUE(compat.driver);
  EXPECT_EQ(compat.driver->text, "580.95.05");  // from the file's name, not libcuda.so.1's
  EXPECT_EQ(compat.loaded, "/opt/rn50/compat/libcuda.so.580.95.05");
  EXPECT_EQ(compat_state(compat), CompatState::kInUse);
  // The driver's own libcuda loaded: present, unused, whatever LD_LIBRARY_PATH says.
  host.write("/proc/self/maps", std::string(kMapsLine) + "/usr/lib/x86_64-linux-gnu/libcuda.so.535.104.05\n");
  host.environment["LD_LIBRARY_PATH"] = "/opt/rn50/compat";
  compat = read_compat_libraries(host);
  EXPECT_EQ(compat_state(compat), CompatState::kUnused);
}

TEST(CompatLibraries, BeforeCudaLoadsTheLibraryPathDecides) {
  FakeHost host;
  image_tree(host);
  host.write("/proc/self/maps", std::string(kMapsLine) + "/opt/rn50/bin/rn50\n");
  EXPECT_EQ(compat_state(read_compat_libraries(host)), CompatState::kUnused);
  host.environment["LD_LIBRARY_PATH"] = "/opt/rn50/compat/:/opt/rn50/nccl-plugin";  // rn50-entry's, a slash added
  const CompatLibraries compat = read_compat_libraries(host);
  EXPECT_TRUE(compat.on_library_path);
  EXPECT_EQ(compat.loaded, "");
  EXPECT_EQ(compat_state(compat), CompatState::kInUse);
}

TEST(CompatLibraries, NvidiasFolderOrOneNamedCompatThatCudaLoadedFrom) {
  FakeHost host;
  host.link("/proc/self/exe", "/src/build/rn50");
  host.write("/usr/local/cuda/compat/lib/libcuda.so.570.124.06", "");
  CompatLibraries compat = read_compat_libraries(host);
  EXPECT_EQ(compat.folder, "/usr/local/cuda/compat/lib");
  EXPECT_EQ(compat.driver->branch, 570);
  EXPECT_EQ(compat_state(compat), CompatState::kUnused);
  host.write("/usr/local/cuda-13.0/compat/libcuda.so.580.65.06", "");
  host.write("/proc/self/maps", std::string(kMapsLine) + "/usr/local/cuda-13.0/compat/libcuda.so.580.65.06\n");
  compat = read_compat_libraries(host);
  EXPECT_EQ(compat.folder, "/usr/local/cuda-13.0/compat");
  EXPECT_EQ(compat_state(compat), CompatState::kInUse);
}

TEST(CompatLibraries, NoneOnABuildMachine) {
  FakeHost host;
  host.link("/proc/self/exe", "/src/build/rn50");
  host.write("/src/compat/README", "not a library");
  const CompatLibraries compat = read_compat_libraries(host);
  EXPECT_EQ(compat.folder, "");
  EXPECT_EQ(compat_state(compat), CompatState::kAbsent);
}

TEST(ProcDriverVersion, ReadFromTheFakeProc) {
  FakeHost host;
  EXPECT_EQ(read_proc_driver_version(host), std::nullopt);
  host.write("/proc/driver/nvidia/version",
             "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  535.161.08  Release Build\n");
  ASSERT_TRUE(read_proc_driver_version(host));
  EXPECT_EQ(read_proc_driver_version(host)->text, "535.161.08");
}

TEST(NvmlDriverFacts, TheDriverItsCudaAndTheGpusKind) {
  monitor::testing::FakeNvml nvml;
  nvml.driver = "535.104.05";
  nvml.cuda_driver = 12020;
  nvml.gpus = {{"NVIDIA GeForce RTX 4090", "GPU-0", std::nullopt, 7, {}, {}, std::nullopt},
               {"NVIDIA H100 80GB HBM3", "GPU-1", std::nullopt, 7, {}, {}, std::nullopt}};
  nvml.brands[1] = GpuBrand::kNvidia;
  DriverFacts facts;
  read_nvml_driver_facts(nvml, 1, facts);  // the CUDA device is NVML's GPU 1
  ASSERT_TRUE(facts.driver);
  EXPECT_EQ(facts.driver->text, "535.104.05");
  EXPECT_EQ(facts.nvml_cuda, 12020);
  EXPECT_EQ(facts.gpu_name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(facts.gpu, GpuKind::kDataCenter);
  EXPECT_EQ(facts.no_driver_reason, "");
  facts = {};
  read_nvml_driver_facts(nvml, 0, facts);
  EXPECT_EQ(facts.gpu, GpuKind::kGeForce);  // by its name: no brand
  // No GPU NVML can see, and a driver version that is none: a one-line reason, and the row says so.
  nvml.gpus.clear();
  nvml.driver = "N/A";
  nvml.cuda_driver.reset();
  facts = {};
  facts.runtime_cuda = 12080;
  read_nvml_driver_facts(nvml, 0, facts);
  EXPECT_FALSE(facts.driver);
  EXPECT_EQ(facts.gpu, GpuKind::kUnknown);
  EXPECT_EQ(facts.gpu_name, "");
  EXPECT_EQ(facts.nvml_cuda, std::nullopt);
  const ReportRow row = driver_row(facts);
  EXPECT_EQ(row.value, "none found; CUDA 12.8 needs 570+");
  EXPECT_EQ(row.note, "NVML's driver version 'N/A' is not one");
}

// A data-center GPU under R535 running the image's CUDA 13.0 with its compat libraries in use.
DriverFacts r535_with_compat() {
  DriverFacts f;
  f.runtime_cuda = 13000;
  f.driver = parse_driver_version("535.104.05");
  f.compat.folder = "/opt/rn50/compat";
  f.compat.driver = parse_driver_version("580.95.05");
  f.compat.loaded = "/opt/rn50/compat/libcuda.so.580.95.05";
  f.gpu = GpuKind::kDataCenter;
  f.cuda_works = true;
  return f;
}

TEST(DriverRow, CpuOnlyBuildNeedsNoDriver) {
  const ReportRow row = driver_row(DriverFacts{});
  EXPECT_EQ(row.section, "gpu");
  EXPECT_EQ(row.check, "NVIDIA driver");
  EXPECT_EQ(row.value, "not needed");
  EXPECT_EQ(row.verdict, "info");
}

TEST(DriverRow, NoDriverSaysSoInOneLine) {
  DriverFacts f;
  f.runtime_cuda = 12080;
  f.no_driver_reason =
      "cannot open libnvidia-ml.so.1: no such file (NVML comes with the NVIDIA driver; a container "
      "needs --gpus)";
  ReportRow row = driver_row(f);
  EXPECT_EQ(row.value, "none found; CUDA 12.8 needs 570+");
  EXPECT_EQ(row.verdict, "info");
  EXPECT_EQ(row.note, f.no_driver_reason);
  f.no_driver_reason.clear();
  row = driver_row(f);
  EXPECT_EQ(row.note, "no NVIDIA driver here (a container needs --gpus)");
  EXPECT_EQ(row.note.find('\n'), std::string::npos);
}

TEST(DriverRow, ANewEnoughDriverIsOk) {
  DriverFacts f;
  f.runtime_cuda = 12080;
  f.driver = parse_driver_version("570.124.06");
  f.cuda_works = true;
  ReportRow row = driver_row(f);
  EXPECT_EQ(row.value, "570.124.06 (CUDA 12.8); CUDA 12.8 needs 570+");
  EXPECT_EQ(row.verdict, "ok");
  EXPECT_EQ(row.note, "");
  f.driver = parse_driver_version("580.95.05");
  f.gpu = GpuKind::kGeForce;  // no matter: no forward compatibility needed
  row = driver_row(f);
  EXPECT_EQ(row.value, "580.95.05 (CUDA 13.0); CUDA 12.8 needs 570+");
  EXPECT_EQ(row.verdict, "ok");
  f.cuda_works = false;  // the driver is visible (/proc), the GPU is not
  row = driver_row(f);
  EXPECT_EQ(row.verdict, "ok");
  EXPECT_TRUE(has(row.note, "CUDA found no device here (a container needs --gpus)")) << row.note;
}

TEST(DriverRow, ABranchNewerThanTheTableUsesNvmlsCuda) {
  DriverFacts f;
  f.runtime_cuda = 13000;
  f.driver = parse_driver_version("620.10.01");
  f.nvml_cuda = 13040;
  f.cuda_works = true;
  ReportRow row = driver_row(f);
  EXPECT_EQ(row.value, "620.10.01 (CUDA 13.4); CUDA 13.0 needs 580+");
  EXPECT_EQ(row.verdict, "ok");
  f.nvml_cuda.reset();  // and without it, the branch against the table's 580
  row = driver_row(f);
  EXPECT_EQ(row.value, "620.10.01; CUDA 13.0 needs 580+");
  EXPECT_EQ(row.verdict, "ok");
  f.runtime_cuda = 13090;  // a runtime newer than the table: NVML's CUDA decides
  f.nvml_cuda = 13040;
  row = driver_row(f);
  EXPECT_EQ(row.value, "620.10.01 (CUDA 13.4); CUDA 13.9 needs a driver of CUDA 13.9+");
  EXPECT_EQ(row.verdict, "warn");  // the same major version: minor-version compatibility
  EXPECT_TRUE(has(row.note, "driver 620.10.01 is older than CUDA 13.9 needs: it runs by CUDA's minor-version"))
      << row.note;
  EXPECT_TRUE(has(row.note, "update the driver to one of CUDA 13.9 or newer")) << row.note;
}

TEST(DriverRow, R535WithTheCompatLibrariesInUseIsOkOnADataCenterGpu) {
  const ReportRow row = driver_row(r535_with_compat());
  EXPECT_EQ(row.value,
            "535.104.05 (CUDA 12.2); CUDA 13.0 needs 580+ (535+ on data-center GPUs with the compat "
            "libraries)");
  EXPECT_EQ(row.verdict, "ok");
  EXPECT_EQ(row.note,
            "driver 535.104.05 is older than CUDA 13.0's 580: the compat libraries in /opt/rn50/compat (from driver "
            "580.95.05) make it work on this data-center GPU");
}

TEST(DriverRow, CompatInUseButCudaFailsSaysWhy) {
  DriverFacts f = r535_with_compat();
  f.cuda_works = false;
  f.gpu = GpuKind::kGeForce;
  ReportRow row = driver_row(f);
  EXPECT_EQ(row.verdict, "bad");
  EXPECT_TRUE(has(row.note, "do not work on GeForce GPUs (CUDA error 804): update the driver to 580 or newer"))
      << row.note;
  f.gpu = GpuKind::kWorkstation;
  row = driver_row(f);
  EXPECT_EQ(row.verdict, "bad");
  EXPECT_TRUE(has(row.note, "data-center GPUs and some RTX server models only; update the driver")) << row.note;
  f.gpu = GpuKind::kDataCenter;
  row = driver_row(f);
  EXPECT_EQ(row.verdict, "bad");
  EXPECT_TRUE(has(row.note, "yet CUDA found no device (a container needs --gpus)")) << row.note;
  f.driver = parse_driver_version("525.147.05");  // below R535
  row = driver_row(f);
  EXPECT_EQ(row.verdict, "bad");
  EXPECT_TRUE(has(row.note, "need R535 or newer beneath them: update the driver to 580 or newer")) << row.note;
  f = r535_with_compat();
  f.cuda_works = false;
  f.compat.driver = parse_driver_version("570.124.06");  // compat of CUDA 12.8 under a CUDA 13.0 runtime
  row = driver_row(f);
  EXPECT_EQ(row.verdict, "bad");
  EXPECT_TRUE(has(row.note, "are older than that too: they must be CUDA 13.0's cuda-compat")) << row.note;
}

TEST(DriverRow, CompatPresentButUnusedTellsHowToStartRn50) {
  DriverFacts f = r535_with_compat();
  f.compat.loaded = "/usr/lib/x86_64-linux-gnu/libcuda.so.535.104.05";  // apptainer exec rn50 ..., no rn50-entry
  f.cuda_works = false;
  ReportRow row = driver_row(f);
  EXPECT_EQ(row.verdict, "bad");
  EXPECT_EQ(row.note,
            "driver 535.104.05 is older than CUDA 13.0's 580: CUDA cannot start; the compat libraries in "
            "/opt/rn50/compat (from driver 580.95.05) are not in use: start rn50 through rn50-entry, which puts them "
            "first on LD_LIBRARY_PATH (apptainer exec rn50.sif rn50-entry ...), or update the driver to 580 or newer");
  f.gpu = GpuKind::kUnknown;
  row = driver_row(f);
  EXPECT_TRUE(has(row.note, "(they work on data-center GPUs and some RTX server models only)")) << row.note;
  f.gpu = GpuKind::kGeForce;
  row = driver_row(f);
  EXPECT_TRUE(has(row.note,
                  "CUDA cannot start; update the driver to 580 or newer (forward compatibility does not "
                  "work on GeForce GPUs)"))
      << row.note;
  EXPECT_FALSE(has(row.note, "rn50-entry")) << row.note;
}

// CUDA 12.8 on R535 (CUDA 12.2): the same major version, so it starts, without PTX compiled at run time.
TEST(DriverRow, TheSameMajorVersionRunsByMinorVersionCompatibilityWithAWarning) {
  DriverFacts f;
  f.runtime_cuda = 12080;
  f.driver = parse_driver_version("535.104.05");
  f.gpu = GpuKind::kDataCenter;
  f.cuda_works = true;
  ReportRow row = driver_row(f);
  EXPECT_EQ(row.value, "535.104.05 (CUDA 12.2); CUDA 12.8 needs 570+");
  EXPECT_EQ(row.verdict, "warn");
  EXPECT_TRUE(has(row.note,
                  "driver 535.104.05 is older than CUDA 12.8's 570: it runs by CUDA's minor-version "
                  "compatibility, but kernels compiled from PTX at run time"))
      << row.note;
  EXPECT_TRUE(has(row.note,
                  "update the driver to 570 or newer, or on a data-center GPU use CUDA's "
                  "forward-compatibility libraries (the rn50 GPU image carries them)"))
      << row.note;
  f.driver = parse_driver_version("520.61.05");  // CUDA 11.8: another major version
  row = driver_row(f);
  EXPECT_EQ(row.verdict, "bad");
  EXPECT_TRUE(has(row.note, "older than CUDA 12.8's 570: CUDA cannot start; ")) << row.note;
}

TEST(DriverRow, ADifferentMajorVersionWithoutCompatCannotStart) {
  DriverFacts f;
  f.runtime_cuda = 13000;
  f.driver = parse_driver_version("550.127.05");
  f.gpu = GpuKind::kDataCenter;
  const ReportRow row = driver_row(f);
  EXPECT_EQ(row.value, "550.127.05 (CUDA 12.4); CUDA 13.0 needs 580+");
  EXPECT_EQ(row.verdict, "bad");
  EXPECT_TRUE(has(row.note, "CUDA cannot start; update the driver to 580 or newer, or on a data-center GPU"))
      << row.note;
}

TEST(DriverRow, CompatInUseUnderANewerDriverIsRefused) {
  DriverFacts f = r535_with_compat();
  f.driver = parse_driver_version("590.44.01");  // newer than the compat libraries' 580
  ReportRow row = driver_row(f);
  EXPECT_EQ(row.verdict, "bad");
  EXPECT_TRUE(has(row.note,
                  "(from driver 580.95.05) are older than the driver 590.44.01: CUDA refuses them (error "
                  "803)"))
      << row.note;
  f.driver = parse_driver_version("580.65.06");  // the same branch: allowed, only not needed
  row = driver_row(f);
  EXPECT_EQ(row.verdict, "ok");
  EXPECT_TRUE(has(row.note, "are in use, though this driver needs none")) << row.note;
}

}  // namespace
}  // namespace rn50::doctor
