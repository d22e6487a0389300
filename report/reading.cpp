// report/reading.cpp: the rules that turn utilisation figures into a sentence.
#include "report/reading.h"

#include <algorithm>

#include "core/log.h"

namespace rn50::report {
namespace {

// Below these the GPU idles between kernels, leaves SMs idle, or does no tensor-core work; above kDramBound the
// memory bus is the limit; at kKeptBusy the GPU hid the host's input wait. They separate the H200 ablation's
// configurations (docs/reports.md#the-reading).
constexpr double kBusy = 80, kKeptBusy = 95, kSmFilled = 60, kNoTensor = 2, kDramBound = 70, kInputWait = 0.10;

std::string pct(double x) { return strprintf("%.1f%%", x); }

// The switches that are known to be off and make kernels faster, for the last case.
std::string kernel_advice(const SwitchFacts& f) {
  std::vector<std::string> ways;
  if (f.precision == "fp32") ways.emplace_back("fp16 or bf16 autocast");
  if (f.channels_last && !*f.channels_last) ways.emplace_back("channels_last");
  if (f.fusion == "off") ways.emplace_back("fusion: bn");
  if (f.precision.empty() && f.fusion.empty()) return " (faster kernels: fp16/bf16, channels_last, fusion: bn)";
  if (ways.empty()) return "";
  std::string out = " (faster kernels: ";
  for (size_t i = 0; i < ways.size(); ++i) out += (i ? ", " : "") + ways[i];
  return out + ")";
}

}  // namespace

std::string read_utilisation(bool cuda, const Utilisation& u, std::optional<double> wait, const SwitchFacts& facts) {
  const bool waits = wait && *wait >= kInputWait;
  if (!cuda) {
    std::string s = "A CPU run: GPU utilisation does not apply.";
    if (waits) s += strprintf(" The step waited for its input %.0f%% of the time.", 100 * *wait);
    return s;
  }
  if (!u.gpu_util_pct) return "No NVML readings were recorded (NVML unavailable, or a MIG instance).";
  const double gpu = *u.gpu_util_pct;
  const std::string head = "The GPU was busy " + pct(gpu) + " of the time (NVML)";
  if (waits && gpu < kBusy) {
    return head + strprintf(
                      ", and the step waited for its input %.0f%% of the time: the input pipeline is the limit "
                      "(more decode workers, pin_memory, prefetch, or decode: gpu).",
                      100 * *wait);
  }
  if (gpu < kBusy) {
    return head + strprintf(": it sat idle %.0f%% of the time, waiting for the host to queue work (", 100 - gpu) +
           (facts.cuda_graph && *facts.cuda_graph ? "" : "a CUDA graph or ") + "a larger batch closes the gaps).";
  }
  // The host's wait costs time only where the GPU ran out of queued steps meanwhile.
  std::string overlap;
  if (waits && gpu >= kKeptBusy) {
    overlap = strprintf(
        " The host waited for input %.0f%% of the time, but the GPU stayed busy: the wait overlapped "
        "queued steps.",
        100 * *wait);
  } else if (waits) {
    overlap = strprintf(
        " The host waited for input %.0f%% of the time and the GPU was idle %.0f%%: part of the wait "
        "is lost time.",
        100 * *wait, 100 - gpu);
  }
  if (!u.tensor_util_pct) {
    return head +
           ", but SM and tensor-core activity were not recorded (GPM: Hopper and newer): NVML's figure only says "
           "that some kernel was running, not how much of the GPU it used." +
           overlap;
  }
  const double tensor = *u.tensor_util_pct;
  const std::string sms = u.sm_util_pct ? ", its SMs " + pct(*u.sm_util_pct) : "";
  if (u.sm_util_pct && *u.sm_util_pct < kSmFilled) {
    return head + sms +
           strprintf(
               ": kernels ran but left %.0f%% of the SMs idle (small kernels: a larger batch fills "
               "them).",
               100 - *u.sm_util_pct) +
           overlap;
  }
  if (tensor < kNoTensor) {
    const std::string how =
        facts.precision == "fp32" && facts.tf32 == "off" ? "in true FP32 (tf32: off)" : "on the ordinary FP32 units";
    return head + " but its tensor cores only " + pct(tensor) + ": the step runs " + how +
           "; TF32 or fp16/bf16 autocast moves the convolutions onto the tensor cores." + overlap;
  }
  const std::string tensors = ", its tensor cores " + pct(tensor);
  if (u.dram_bw_util_pct && *u.dram_bw_util_pct >= kDramBound) {
    return head + sms + tensors + " and DRAM bandwidth " + pct(*u.dram_bw_util_pct) +
           ": memory bandwidth is the limit" + (facts.fusion == "off" ? " (fusion: bn saves memory passes)." : ".") +
           overlap;
  }
  const std::string dram = u.dram_bw_util_pct ? " and DRAM bandwidth " + pct(*u.dram_bw_util_pct) : "";
  if (waits && gpu < kKeptBusy) {
    return head + sms + tensors + dram +
           strprintf(
               ": the input is what is left to remove: the host waited for it %.0f%% of the time and the GPU "
               "was idle %.0f%% (more decode workers, pin_memory, prefetch, or decode: gpu).",
               100 * *wait, 100 - gpu);
  }
  return head + sms + tensors + dram +
         ": no idle time or input wait is left to remove; what remains is inside the "
         "kernels" +
         kernel_advice(facts) + "." + overlap;
}

std::string read_across(const std::vector<NamedFigures>& rows, bool per_gpu) {
  const NamedFigures *slow = nullptr, *fast = nullptr;
  for (const auto& r : rows) {
    if (!r.u.gpu_util_pct || !r.u.tensor_util_pct || r.images_per_s <= 0) continue;
    if (!slow || r.images_per_s < slow->images_per_s) slow = &r;
    if (!fast || r.images_per_s > fast->images_per_s) fast = &r;
  }
  // Misleading: the faster configuration trains much faster without NVML's figure reading clearly higher.
  if (!slow || !fast || fast->images_per_s < 1.5 * slow->images_per_s ||
      *fast->u.gpu_util_pct > *slow->u.gpu_util_pct + 2) {
    return "";
  }
  return "NVML's GPU utilisation (what nvidia-smi shows) reads " + pct(*slow->u.gpu_util_pct) + " for " + slow->name +
         " and " + pct(*fast->u.gpu_util_pct) + " for " + fast->name +
         strprintf(", which trains %.2fx faster%s; their tensor cores read ", fast->images_per_s / slow->images_per_s,
                   per_gpu ? " per GPU" : "") +
         pct(*slow->u.tensor_util_pct) + " and " + pct(*fast->u.tensor_util_pct) +
         ". NVML counts the time in which any kernel ran, not how much of the GPU it used: read the SM and "
         "tensor-core columns.";
}

const std::vector<UtilisationColumn>& utilisation_columns() {
  static const std::vector<UtilisationColumn> columns = {
      {"GPU util (NVML)", "gpu_util_pct", "%", &Utilisation::gpu_util_pct},
      {"memory util (NVML)", "mem_bw_util_pct", "%", &Utilisation::mem_bw_util_pct},
      {"SM active", "sm_util_pct", "%", &Utilisation::sm_util_pct},
      {"SM occupancy", "sm_occupancy_pct", "%", &Utilisation::sm_occupancy_pct},
      {"tensor active", "tensor_util_pct", "%", &Utilisation::tensor_util_pct},
      {"DRAM bandwidth", "dram_bw_util_pct", "%", &Utilisation::dram_bw_util_pct},
      {"power", "power_w", " W", &Utilisation::power_w},
      {"SM clock", "sm_clock_mhz", " MHz", &Utilisation::sm_clock_mhz},
  };
  return columns;
}

std::string format_figure(const UtilisationColumn& column, const std::optional<double>& value) {
  if (!value) return "unavailable";
  return std::string(column.unit) == "%" ? pct(*value) : strprintf("%.0f%s", *value, column.unit);
}

}  // namespace rn50::report
