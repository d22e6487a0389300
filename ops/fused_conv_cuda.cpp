// ops/fused_conv_cuda.cpp: the fused convolutions on cuDNN's graph API (CUDA builds only): one operation graph per
// pattern and shape, its plan chosen once by cuDNN's heuristics and timing and cached per thread (plans and handles
// are a thread's own); outputs and workspaces from the caching allocator on the current stream, so that a CUDA graph
// captures the calls once the plans exist.
#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <c10/core/DeviceGuard.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "core/build_info.h"
#include "core/plan_cache.h"
#include "core/plan_search.h"
#include "cuda/cuda_check.h"
#include "cuda/cuda_event.h"
#include "cuda/cudnn_check.h"
#include "ops/conv_bn_kernels.h"
#include "ops/cudnn_graph.h"
#include "ops/cudnn_handle.h"
#include "ops/current_stream.h"
#include "ops/fused_conv.h"

namespace rn50::ops {
namespace {

namespace cg = cudnn_graph;

enum class Pattern {
  kForwardStats,
  kBackwardFilter,
  kBackwardDataBn,
  kBackwardData,
  kBackwardDataAccumulate,
  kBackwardDataAddBn
};

// The variant pack's names.
enum Uid : int64_t {
  kX = 1,
  kW,
  kY,
  kSum,
  kSqSum,
  kScale,
  kBias,
  kDy,
  kDw,
  kDz,
  kMean,
  kInvstd,
  kGamma,
  kBeta,
  kDgamma,
  kDbeta,
  kEqDy,
  kEqX,
  kEqBias,
  kAccumulate,
  kResidual,
  kVirtual = 100,
};

constexpr auto kChannelsLast = at::MemoryFormat::ChannelsLast;

cudnnDataType_t cudnn_type(at::ScalarType t) {
  switch (t) {
    case at::kHalf:
      return CUDNN_DATA_HALF;
    case at::kBFloat16:
      return CUDNN_DATA_BFLOAT16;
    default:
      throw std::invalid_argument(std::string("fused conv: dtype ") + c10::toString(t) + " (half or bfloat16 only)");
  }
}

std::vector<int64_t> vec(at::IntArrayRef a) { return {a.begin(), a.end()}; }

std::vector<int64_t> channel_dims(int64_t c) { return {1, c, 1, 1}; }
std::vector<int64_t> channel_strides(int64_t c) { return {c, 1, c, c}; }

// How a graph's intermediate tensors and per-channel inputs are typed: tried in order until cuDNN offers a plan.
struct Variant {
  bool float_virtual = true;   // intermediates in float (else in the data's dtype)
  bool narrow_params = false;  // the prologue's scale and bias in the data's dtype (else float)
};
constexpr Variant kVariants[] = {{true, false}, {false, false}, {true, true}, {false, true}};

std::string variant_name(Variant v) {
  return std::string(v.float_virtual ? "float" : "narrow") + " intermediates, " +
         (v.narrow_params ? "narrow" : "float") + " scale and bias";
}

// The variant pack's pointers for a variant, with the tensors made for it (kept alive until the call is queued).
struct Bound {
  std::vector<void*> pointers;
  std::vector<at::Tensor> keep;
};
// `timing`: for the candidates' timing runs, which must leave the caller's tensors as they are (an accumulating
// output gets a scratch copy).
using Bind = std::function<Bound(Variant, bool timing)>;

struct Shapes {
  std::vector<int64_t> x, w, y;  // N, C, H, W order; the data in channels-last strides
  cudnnDataType_t type = CUDNN_DATA_HALF;
  int64_t stride = 1, padding = 0;
  bool prologue = false;
};

cg::ConvSpec conv_spec(const Shapes& s) {
  cg::ConvSpec c;
  c.stride = {s.stride, s.stride};
  c.padding = {s.padding, s.padding};
  return c;
}

// relu(x * scale + bias) as three virtual tensors; returns the last.
const cg::Descriptor& add_prologue(cg::GraphBuilder& g, const cg::Descriptor& x, const std::vector<int64_t>& dims,
                                   cudnnDataType_t type, Variant v, int64_t* next_virtual) {
  const int64_t c = dims[1];
  const cudnnDataType_t vt = v.float_virtual ? CUDNN_DATA_FLOAT : type;
  const cudnnDataType_t pt = v.narrow_params ? type : CUDNN_DATA_FLOAT;
  const auto& scale = g.tensor({kScale, channel_dims(c), channel_strides(c), pt});
  const auto& bias = g.tensor({kBias, channel_dims(c), channel_strides(c), pt});
  const auto& scaled = g.tensor({(*next_virtual)++, dims, cg::nhwc_strides(dims), vt, true});
  const auto& shifted = g.tensor({(*next_virtual)++, dims, cg::nhwc_strides(dims), vt, true});
  const auto& relu = g.tensor({(*next_virtual)++, dims, cg::nhwc_strides(dims), vt, true});
  g.pointwise(CUDNN_POINTWISE_MUL, x, &scale, scaled);
  g.pointwise(CUDNN_POINTWISE_ADD, scaled, &bias, shifted);
  g.pointwise(CUDNN_POINTWISE_RELU_FWD, shifted, nullptr, relu);
  return relu;
}

// BatchNorm's output recomputed from its input for the ReLU mask of the data gradient's epilogue: (x - mean) * invstd *
// gamma + beta as four virtual tensors; returns the last.
const cg::Descriptor& add_bn_recompute(cg::GraphBuilder& g, const cg::Descriptor& x, const cg::Descriptor& mean,
                                       const cg::Descriptor& invstd, const cg::Descriptor& gamma,
                                       const cg::Descriptor& beta, const std::vector<int64_t>& dims, cudnnDataType_t vt,
                                       int64_t* next_virtual) {
  const auto strides = cg::nhwc_strides(dims);
  const auto& centred = g.tensor({(*next_virtual)++, dims, strides, vt, true});
  const auto& normed = g.tensor({(*next_virtual)++, dims, strides, vt, true});
  const auto& scaled = g.tensor({(*next_virtual)++, dims, strides, vt, true});
  const auto& bn = g.tensor({(*next_virtual)++, dims, strides, vt, true});
  g.pointwise(CUDNN_POINTWISE_SUB, x, &mean, centred);
  g.pointwise(CUDNN_POINTWISE_MUL, centred, &invstd, normed);
  g.pointwise(CUDNN_POINTWISE_MUL, normed, &gamma, scaled);
  g.pointwise(CUDNN_POINTWISE_ADD, scaled, &beta, bn);
  return bn;
}

void build_graph(cg::GraphBuilder& g, Pattern pattern, const Shapes& s, Variant v) {
  int64_t next_virtual = kVirtual;
  const auto wstrides = cg::nhwc_strides(s.w);
  switch (pattern) {
    case Pattern::kForwardStats: {
      const auto& x = g.tensor({kX, s.x, cg::nhwc_strides(s.x), s.type});
      const auto& w = g.tensor({kW, s.w, wstrides, s.type});
      const auto& y = g.tensor({kY, s.y, cg::nhwc_strides(s.y), s.type});
      const int64_t k = s.y[1];
      const auto& sum = g.tensor({kSum, channel_dims(k), channel_strides(k), CUDNN_DATA_FLOAT});
      const auto& sq = g.tensor({kSqSum, channel_dims(k), channel_strides(k), CUDNN_DATA_FLOAT});
      const auto& in = s.prologue ? add_prologue(g, x, s.x, s.type, v, &next_virtual) : x;
      g.conv_forward(in, w, y, conv_spec(s));
      g.gen_stats(y, sum, sq);
      return;
    }
    case Pattern::kBackwardFilter: {
      const auto& x = g.tensor({kX, s.x, cg::nhwc_strides(s.x), s.type});
      const auto& dy = g.tensor({kDy, s.y, cg::nhwc_strides(s.y), s.type});
      const auto& dw = g.tensor({kDw, s.w, wstrides, s.type});
      const auto& in = s.prologue ? add_prologue(g, x, s.x, s.type, v, &next_virtual) : x;
      g.conv_backward_filter(in, dy, dw, conv_spec(s));
      return;
    }
    case Pattern::kBackwardData:
    case Pattern::kBackwardDataAccumulate: {
      const auto& dy = g.tensor({kDy, s.y, cg::nhwc_strides(s.y), s.type});
      const auto& w = g.tensor({kW, s.w, wstrides, s.type});
      const auto& dx = g.tensor({kX, s.x, cg::nhwc_strides(s.x), s.type});
      g.conv_backward_data(dy, w, dx, conv_spec(s), pattern == Pattern::kBackwardDataAccumulate ? 1.0F : 0.0F);
      return;
    }
    case Pattern::kBackwardDataBn:
    case Pattern::kBackwardDataAddBn: {
      // kBackwardDataAddBn, a block boundary: the next block's input gradient (dgrad plus the identity's or
      // downsample's gradient), through the ReLU of this block's output, into bn3's backward weights. cuDNN 9.19 plans
      // the mask only as a recomputation, relu_backward against bn3(y3) + residual (a ReLU input read whole, the block
      // output, was refused: "no engine configuration offered", H100, 2026-12-06).
      const bool boundary = pattern == Pattern::kBackwardDataAddBn;
      const cudnnDataType_t vt = v.float_virtual ? CUDNN_DATA_FLOAT : s.type;
      const int64_t c = s.x[1];
      const auto xs = cg::nhwc_strides(s.x);
      const auto& dy = g.tensor({kDy, s.y, cg::nhwc_strides(s.y), s.type});
      const auto& w = g.tensor({kW, s.w, wstrides, s.type});
      const auto& dgrad = g.tensor({next_virtual++, s.x, xs, boundary ? vt : s.type, true});
      g.conv_backward_data(dy, w, dgrad, conv_spec(s));
      const cg::Descriptor* grad = &dgrad;  // what ReLU's backward masks
      if (boundary) {
        const auto& acc = g.tensor({kAccumulate, s.x, xs, s.type});
        const auto& total = g.tensor({next_virtual++, s.x, xs, vt, true});
        g.pointwise(CUDNN_POINTWISE_ADD, dgrad, &acc, total);
        grad = &total;
      }
      const auto& x = g.tensor({kX, s.x, xs, s.type});
      auto channel = [&](int64_t uid) -> const cg::Descriptor& {
        return g.tensor({uid, channel_dims(c), channel_strides(c), CUDNN_DATA_FLOAT});
      };
      const auto& mean = channel(kMean);
      const auto& invstd = channel(kInvstd);
      const auto& gamma = channel(kGamma);
      const auto& bn = add_bn_recompute(g, x, mean, invstd, gamma, channel(kBeta), s.x, vt, &next_virtual);
      const cg::Descriptor* mask = &bn;  // ReLU's input, recomputed
      if (boundary) {
        const auto& residual = g.tensor({kResidual, s.x, xs, s.type});
        const auto& pre_relu = g.tensor({next_virtual++, s.x, xs, vt, true});
        g.pointwise(CUDNN_POINTWISE_ADD, bn, &residual, pre_relu);
        mask = &pre_relu;
      }
      const auto& dz = g.tensor({kDz, s.x, xs, s.type});
      g.relu_backward(*grad, *mask, dz);
      g.bn_backward_weights(x, mean, invstd, gamma, dz, channel(kDgamma), channel(kDbeta), channel(kEqDy),
                            channel(kEqX), channel(kEqBias));
      return;
    }
  }
}

// One pattern and shape's graph and chosen plan, or why there is none.
struct Cached {
  std::unique_ptr<cg::GraphBuilder> builder;
  std::unique_ptr<cg::Descriptor> graph;
  cg::Plan plan;
  Variant variant;
  int variant_index = 0;  // in kVariants
  bool untried = false;   // from the plan cache and not yet run: a failure then searches again
  std::string description, error;
};

using Key = std::tuple<int, int, int, std::vector<int64_t>, std::vector<int64_t>, std::vector<int64_t>, int64_t,
                       int64_t, bool, bool, int>;

struct ThreadPlans {
  std::map<Key, std::unique_ptr<Cached>> plans;
  std::string last;
  std::map<Key, bool> separate;  // PrologueRun::kTimed's choices: the prologue as a pass of its own
};

// Never destroyed, as the handle they were made with (ops/cudnn_handle.cpp: cuDNN calls from thread-local destructors
// at exit crashed).
ThreadPlans& thread_plans() {
  thread_local auto* state = new ThreadPlans();
  return *state;
}

// The timed choices' log lines, until take_prologue_choices(): one list for the process, since the weight gradients
// are chosen on autograd's backward thread and logged by the thread that ran the probe.
struct ChoiceLog {
  std::mutex mutex;
  std::vector<std::string> lines;
};

ChoiceLog& choice_log() {
  static ChoiceLog log;
  return log;
}

const char* pattern_name(Pattern p) {
  switch (p) {
    case Pattern::kForwardStats:
      return "conv+stats";
    case Pattern::kBackwardFilter:
      return "wgrad";
    case Pattern::kBackwardDataBn:
      return "dgrad+drelu+dbn";
    case Pattern::kBackwardData:
      return "dgrad";
    case Pattern::kBackwardDataAccumulate:
      return "dgrad+=";
    case Pattern::kBackwardDataAddBn:
      return "dgrad+add+drelu+dbn";
  }
  return "?";
}

at::Tensor workspace(int64_t bytes, const at::Tensor& like) {
  return at::empty({std::max<int64_t>(bytes, 1)}, like.options().dtype(at::kByte));
}

// Deterministic cuDNN asked for: plans and epilogue sums that repeat bit for bit (run() and the sums below).
bool deterministic_requested() { return at::globalContext().deterministicCuDNN(); }

Key key_of(Pattern pattern, int device, const Shapes& s, bool reproducible, PlanSearch search) {
  return {static_cast<int>(pattern),
          device,
          static_cast<int>(s.type),
          s.x,
          s.w,
          s.y,
          s.stride,
          s.padding,
          s.prologue,
          reproducible,
          static_cast<int>(search)};
}

// Configurations timed for each pattern, shape and variant (cudnn_graph.cpp says why this many).
constexpr int kMaxCandidates = 16;

// Whether the search tries a typing for the pattern: only the prologue's parameters have a narrow form, and only the
// patterns with intermediates try their two types.
bool variant_applies(Variant v, Pattern pattern, const Shapes& s) {
  if (v.narrow_params && !s.prologue) return false;
  // The boundary graph only in float: its recomputed ReLU mask must agree with the forward's output.
  return v.float_virtual || pattern == Pattern::kForwardStats || pattern == Pattern::kBackwardFilter ||
         pattern == Pattern::kBackwardDataBn;
}

// The GPU as one word of the plan cache's keys: its name, SM count and compute capability (a MIG slice of the same
// GPU has fewer SMs, and its best plans may differ).
std::string gpu_word(int device) {
  static std::mutex mutex;
  static std::map<int, std::string> words;
  const std::lock_guard<std::mutex> lock(mutex);
  auto it = words.find(device);
  if (it == words.end()) {
    cudaDeviceProp p{};
    RN50_CUDA_CHECK(cudaGetDeviceProperties(&p, device));
    std::string name = p.name;
    for (char& c : name) {
      if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))) c = '_';
    }
    name += "-sm" + std::to_string(p.multiProcessorCount) + "-cc" + std::to_string(p.major) + std::to_string(p.minor);
    it = words.emplace(device, name).first;
  }
  return it->second;
}

std::string join(const std::vector<int64_t>& v) {
  std::string out;
  for (const int64_t x : v) out += (out.empty() ? "" : "x") + std::to_string(x);
  return out;
}

// The plan cache's key for a pattern and shape on a device: one word, e.g.
// "NVIDIA_H200-sm132-cc90/wgrad/f16/x256x64x56x56/w64x64x3x3/s1p1/prologue"; "/exhaustive" at the end for a choice
// of plan_search: exhaustive (a heuristics search's choice is not one for it, nor the other way round).
std::string cache_key(Pattern pattern, int device, const Shapes& s, PlanSearch search) {
  std::string p = pattern_name(pattern);
  for (char& c : p) {
    if (c == '+') c = '_';
  }
  return gpu_word(device) + "/" + p + "/" + (s.type == CUDNN_DATA_HALF ? "f16" : "bf16") + "/x" + join(s.x) + "/w" +
         join(s.w) + "/s" + std::to_string(s.stride) + "p" + std::to_string(s.padding) +
         (s.prologue ? "/prologue" : "") + (search == PlanSearch::kExhaustive ? "/exhaustive" : "");
}

// The plan a run before chose for this pattern and shape (core/plan_cache.h), built without a search: its typing's
// graph and only that configuration finalized. False where it no longer builds (the caller searches).
bool plan_from_choice(const PlanChoice& choice, Pattern pattern, const Shapes& shapes, PlanSearch search,
                      cudnnHandle_t handle, Cached* cached) {
  if (choice.variant < 0 || choice.variant >= static_cast<int>(std::size(kVariants))) return false;
  const Variant v = kVariants[choice.variant];
  if (!variant_applies(v, pattern, shapes)) return false;
  try {
    auto builder = std::make_unique<cg::GraphBuilder>();
    build_graph(*builder, pattern, shapes, v);
    auto graph = std::make_unique<cg::Descriptor>(builder->build(handle));
    std::optional<cg::Plan> plan = cg::plan_of(handle, *graph, choice.engine, choice.knobs, kMaxCandidates);
    if (!plan && search == PlanSearch::kExhaustive)
      plan = cg::plan_from_knobs(handle, *graph, choice.engine, choice.knobs);
    if (!plan) return false;
    plan->time_ms = static_cast<float>(choice.time_ms);
    cached->plan = std::move(*plan);
    cached->graph = std::move(graph);
    cached->builder = std::move(builder);
    cached->variant = v;
    cached->variant_index = choice.variant;
    cached->untried = true;
    return true;
  } catch (const c10::Error&) {
    throw;
  } catch (const std::runtime_error&) {  // a cuDNN call's status
    return false;
  }
}

// The pattern and its shapes, for logs.
std::string shape_text(Pattern pattern, const Shapes& s) {
  char text[160];
  std::snprintf(text, sizeof(text), "%s x %lldx%lldx%lldx%lld, w %lldx%lldx%lldx%lld, stride %lld",
                pattern_name(pattern), static_cast<long long>(s.x[0]), static_cast<long long>(s.x[1]),
                static_cast<long long>(s.x[2]), static_cast<long long>(s.x[3]), static_cast<long long>(s.w[0]),
                static_cast<long long>(s.w[1]), static_cast<long long>(s.w[2]), static_cast<long long>(s.w[3]),
                static_cast<long long>(s.stride));
  return text;
}

// Runs the pattern with these tensors, building and choosing its plan on first use for the shape.
void run(Pattern pattern, const Shapes& shapes, const at::Tensor& like, const std::vector<int64_t>& uids,
         const Bind& bind) {
  const int device = like.get_device();
  const cudnnHandle_t handle = detail::cudnn_handle(device);
  const cudaStream_t stream = detail::current_stream(device);
  RN50_CUDNN_CHECK(cudnnSetStream(handle, stream));
  ThreadPlans& tp = thread_plans();
  // Deterministic cuDNN chooses among other plans (below): a plan chosen without it is not reused with it; nor is a
  // plan of one search for the other. plan_search: exhaustive then times, for the typing the heuristics chose, every
  // engine's knob settings too (deterministic cuDNN keeps the heuristics' order).
  const bool reproducible = deterministic_requested();
  const PlanSearch search = reproducible ? PlanSearch::kHeuristics : current_plan_search();
  const Key key = key_of(pattern, device, shapes, reproducible, search);
  auto it = tp.plans.find(key);
  if (it == tp.plans.end()) {
    auto cached = std::make_unique<Cached>();
    const auto start = std::chrono::steady_clock::now();
    std::string why;
    size_t offered = 0;
    // Every variant's candidates are timed: which typing reaches cuDNN's specialised engines differs by pattern, and
    // a runtime-compiled generic engine that takes another typing can be several times slower. Deterministic cuDNN
    // asked for (at::Context, as rn50's tests do): the first deterministic plan of the first variant that has one, by
    // the heuristics' order alone, so that every process chooses the same and reruns compute the same bits.
    // A choice a run before saved (core/plan_cache.h) is built alone and untimed; deterministic plans are never
    // timed, so they do not use it.
    PlanCache* disk = reproducible ? nullptr : current_plan_cache();
    const std::string disk_key = disk ? cache_key(pattern, device, shapes, search) : "";
    bool from_disk = false;
    size_t beyond = 0;                                    // candidates of the enumeration, not listed by the heuristics
    float heuristics_ms = -1;                             // the heuristics' choice's time, for the log
    std::vector<std::pair<int64_t, std::string>> listed;  // the chosen typing's heuristic candidates
    // One timing run of a candidate plan on the bound buffers.
    const auto timing_run = [&](const Bound& bound) {
      return [&, bound_ptr = &bound](const cg::Plan& p) {
        at::Tensor ws = workspace(p.workspace_bytes, like);
        cg::execute(handle, p, uids, bound_ptr->pointers, ws.data_ptr());
      };
    };
    if (disk) {
      if (const std::optional<PlanChoice> choice = disk->plan(disk_key)) {
        from_disk = plan_from_choice(*choice, pattern, shapes, search, handle, cached.get());
        if (!from_disk) disk->drop_plan(disk_key);  // no longer offered: searched for again below
      }
    }
    for (size_t vi = 0; vi < std::size(kVariants) && !from_disk; ++vi) {
      const Variant v = kVariants[vi];
      if (reproducible && cached->plan.plan) break;
      if (!variant_applies(v, pattern, shapes)) continue;
      auto builder = std::make_unique<cg::GraphBuilder>();
      try {
        build_graph(*builder, pattern, shapes, v);
        auto graph = std::make_unique<cg::Descriptor>(builder->build(handle));
        std::string none;
        auto candidates = cg::candidate_plans(handle, *graph, kMaxCandidates, &none);
        if (reproducible) {
          candidates.erase(std::remove_if(candidates.begin(), candidates.end(),
                                          [](const cg::Plan& p) { return p.nondeterministic; }),
                           candidates.end());
          if (candidates.empty() && none.empty()) none = "only nondeterministic engines";
        }
        if (candidates.empty()) {
          why += " " + variant_name(v) + ": " + none + ";";
          continue;
        }
        offered += candidates.size();
        std::vector<std::pair<int64_t, std::string>> ids;
        for (const cg::Plan& p : candidates) ids.emplace_back(p.engine, p.knobs);
        const Bound bound = bind(v, true);
        cg::Plan chosen = cg::choose_plan(std::move(candidates), timing_run(bound), stream, 1, reproducible ? 0 : 3);
        if (cached->plan.plan && cached->plan.time_ms <= chosen.time_ms) continue;
        listed = std::move(ids);
        cached->plan = std::move(chosen);
        cached->graph = std::move(graph);
        cached->builder = std::move(builder);
        cached->variant = v;
        cached->variant_index = static_cast<int>(vi);
      } catch (const c10::Error&) {
        throw;  // out of memory and other LibTorch errors are not cuDNN refusing the graph
      } catch (const std::runtime_error& e) {
        why += " " + variant_name(v) + ": " + e.what() + ";";  // a cuDNN call's status
      }
    }
    // plan_search: exhaustive: the typing the heuristics' search chose, with every other configuration of its graph
    // timed too (each typing's would take four times as long; the typing decides which engines apply at all).
    if (search == PlanSearch::kExhaustive && cached->plan.plan && !from_disk) {
      heuristics_ms = cached->plan.time_ms;
      try {
        std::vector<cg::Plan> more;
        for (cg::Plan& p : cg::enumerated_plans(handle, *cached->graph, cg::Enumeration{})) {
          if (std::find(listed.begin(), listed.end(), std::make_pair(p.engine, p.knobs)) == listed.end()) {
            more.push_back(std::move(p));
          }
        }
        beyond = more.size();
        offered += more.size();
        if (!more.empty()) {
          const Bound bound = bind(cached->variant, true);
          cg::Plan chosen = cg::choose_plan(std::move(more), timing_run(bound), stream, 1, 3);
          if (chosen.time_ms < cached->plan.time_ms) cached->plan = std::move(chosen);
        }
      } catch (const c10::Error&) {
        throw;
      } catch (const std::runtime_error&) {  // every enumerated candidate failed to run: the heuristics' choice stands
      }
    }
    if (cached->plan.plan && disk && !from_disk) {
      disk->put_plan(disk_key, PlanChoice{cached->variant_index, cached->plan.engine, cached->plan.knobs,
                                          static_cast<double>(cached->plan.time_ms)});
    }
    if (cached->plan.plan) {
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      char text[384];
      if (from_disk) {
        std::snprintf(text, sizeof(text),
                      "%s: engine %lld%s, %.3f ms when chosen, from the plan cache, planned in %.2f s; %s",
                      pattern_name(pattern), static_cast<long long>(cached->plan.engine),
                      cached->plan.runtime_compiled ? " (runtime-compiled)" : "", cached->plan.time_ms, seconds,
                      variant_name(cached->variant).c_str());
      } else if (reproducible) {
        std::snprintf(text, sizeof(text),
                      "%s: engine %lld%s, the heuristics' first deterministic one (deterministic "
                      "cuDNN), planned in %.2f s; %s",
                      pattern_name(pattern), static_cast<long long>(cached->plan.engine),
                      cached->plan.runtime_compiled ? " (runtime-compiled)" : "", seconds,
                      variant_name(cached->variant).c_str());
      } else if (search == PlanSearch::kExhaustive) {
        std::snprintf(text, sizeof(text),
                      "%s: engine %lld%s, %.3f ms, fastest of %zu (%zu of them enumerated beyond the heuristics; "
                      "this one %s; the heuristics' choice %.3f ms), planned in %.2f s; %s",
                      pattern_name(pattern), static_cast<long long>(cached->plan.engine),
                      cached->plan.runtime_compiled ? " (runtime-compiled)" : "", cached->plan.time_ms, offered, beyond,
                      cached->plan.enumerated ? "enumerated" : "listed", heuristics_ms, seconds,
                      variant_name(cached->variant).c_str());
        // Each exhaustive choice is logged with its shape (the probe's log lines): what the enumeration found.
        ChoiceLog& log = choice_log();
        const std::lock_guard<std::mutex> lock(log.mutex);
        log.lines.push_back(shape_text(pattern, shapes) + ": plan" +
                            std::string(text).substr(std::strlen(pattern_name(pattern))));
      } else {
        std::snprintf(text, sizeof(text), "%s: engine %lld%s, %.3f ms, fastest of %zu, planned in %.2f s; %s",
                      pattern_name(pattern), static_cast<long long>(cached->plan.engine),
                      cached->plan.runtime_compiled ? " (runtime-compiled)" : "", cached->plan.time_ms, offered,
                      seconds, variant_name(cached->variant).c_str());
      }
      cached->description = text;
    }
    if (!cached->plan.plan) cached->error = std::string(pattern_name(pattern)) + ": no plan:" + why;
    it = tp.plans.emplace(key, std::move(cached)).first;
  }
  Cached& c = *it->second;
  tp.last = c.plan.plan ? c.description : c.error;
  if (!c.plan.plan) throw NoPlanError("fused conv: " + c.error);
  // A plan from the cache runs for the first time: where cuDNN refuses to execute it (as the search skips such a
  // candidate; nothing was launched), it leaves the file and the pattern is planned again, searched and timed. Any
  // other failure is the run's.
  bool refused = false;
  {
    const Bound bound = bind(c.variant, false);
    at::Tensor ws = workspace(c.plan.workspace_bytes, like);
    if (!c.untried) {
      cg::execute(handle, c.plan, uids, bound.pointers, ws.data_ptr());
      return;
    }
    try {
      cg::execute(handle, c.plan, uids, bound.pointers, ws.data_ptr());
      c.untried = false;
    } catch (const cg::ExecuteRefused&) {
      refused = true;
    }
  }
  if (!refused) return;
  if (PlanCache* disk = current_plan_cache()) disk->drop_plan(cache_key(pattern, device, shapes, search));
  tp.plans.erase(it);  // c is not used again
  run(pattern, shapes, like, uids, bind);
}

// The prologue's scale and bias in the variant's type.
void bind_prologue(const Prologue& p, const at::Tensor& like, Variant v, Bound* b) {
  if (!p.defined()) return;
  if (v.narrow_params) {
    b->keep.push_back(p.scale.to(like.scalar_type()));
    b->keep.push_back(p.bias.to(like.scalar_type()));
    b->pointers.push_back(b->keep[b->keep.size() - 2].data_ptr());
    b->pointers.push_back(b->keep.back().data_ptr());
  } else {
    b->pointers.push_back(p.scale.data_ptr());
    b->pointers.push_back(p.bias.data_ptr());
  }
}

void check_data(const at::Tensor& t, const char* what, const at::Tensor& like) {
  if (!t.defined() || t.dim() != 4 || !t.is_cuda() || t.scalar_type() != like.scalar_type() ||
      t.device() != like.device() || !t.is_contiguous(kChannelsLast)) {
    throw std::invalid_argument(std::string("fused conv: ") + what +
                                " must be a 4-D channels-last CUDA tensor of the input's dtype and device");
  }
  // The graphs' tensors are declared 16-byte aligned (cudnn_graph.cpp); a view at an odd offset is refused.
  if (reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 != 0) {
    throw std::invalid_argument(std::string("fused conv: ") + what + " must start at a 16-byte aligned address");
  }
}

void check_channel(const at::Tensor& t, const char* what, int64_t c, const at::Tensor& like) {
  if (!t.defined() || t.dim() != 1 || t.size(0) != c || t.scalar_type() != at::kFloat || t.device() != like.device() ||
      !t.is_contiguous()) {
    throw std::invalid_argument(std::string("fused conv: ") + what + " must be float32 [" + std::to_string(c) +
                                "] on the input's device");
  }
}

int64_t out_size(int64_t in, int64_t kernel, ConvGeometry g) { return (in + 2 * g.padding - kernel) / g.stride + 1; }

Shapes shapes_of(const at::Tensor& x, at::IntArrayRef w, ConvGeometry g, bool prologue) {
  Shapes s;
  s.x = vec(x.sizes());
  s.w = vec(w);
  s.y = {s.x[0], s.w[0], out_size(s.x[2], s.w[2], g), out_size(s.x[3], s.w[3], g)};
  s.type = cudnn_type(x.scalar_type());
  s.stride = g.stride;
  s.padding = g.padding;
  s.prologue = prologue;
  if (s.w[1] != s.x[1]) throw std::invalid_argument("fused conv: the weight's input channels differ from x's");
  if (s.y[2] <= 0 || s.y[3] <= 0) throw std::invalid_argument("fused conv: empty output");
  return s;
}

at::Tensor empty_nhwc(const std::vector<int64_t>& dims, const at::Tensor& like) {
  return at::empty(dims, like.options().memory_format(kChannelsLast));
}

// Deterministic cuDNN asked for (config key deterministic, or the tests): the epilogues' per-channel sums accumulate
// across thread blocks in whatever order they finish (two runs of one ResNet-50 block on the H200 differed in the
// forward's output by 5e-5 relative), so their results are replaced by ATen's reductions of the tensors the kernels
// wrote, which combine in a fixed order: a slower pass over each output, for reproducible runs only.
at::Tensor channel_sum(const at::Tensor& t) { return t.sum({0, 2, 3}, false, at::kFloat); }

void recompute_stats(ConvStats* out) {
  const at::Tensor y = out->y.to(at::kFloat);
  out->sum = channel_sum(y);
  out->sq_sum = channel_sum(y * y);
}

// BatchNorm's backward weights from dz and the BatchNorm's input, as the data gradient's epilogue defines them: with
// xhat = (x - mean) * invstd over M = N*H*W values, dweight = sum(dz * xhat), dbias = sum(dz), and the input gradient
// w * invstd * (dz - dbias / M - xhat * dweight / M) written as eq_dy * dz + eq_x * x + eq_bias.
void recompute_bn_weights(const BnSaved& bn, DgradBn* out) {
  const auto per_channel = [](const at::Tensor& t) { return t.view({1, -1, 1, 1}); };
  const double m = static_cast<double>(bn.x.numel() / bn.x.size(1));
  const at::Tensor dz = out->dz.to(at::kFloat);
  const at::Tensor xhat = (bn.x.to(at::kFloat) - per_channel(bn.mean)) * per_channel(bn.invstd);
  out->dbias = channel_sum(dz);
  out->dweight = channel_sum(dz * xhat);
  const at::Tensor scale = bn.weight * bn.invstd;
  out->eq_dy = scale;
  out->eq_x = -scale * bn.invstd * out->dweight / m;
  out->eq_bias = scale * (bn.mean * bn.invstd * out->dweight - out->dbias) / m;
}

// Milliseconds a call takes on the current stream: once to build its plans and warm up, then the mean of ten (enough
// that the first call's launch latency, which a CUDA graph's replay would not pay, is a small part).
double time_ms(const std::function<void()>& call, cudaStream_t stream) {
  constexpr int kRepeats = 10;
  call();
  // Nothing else of this process's queued work beside it: the backward probe queues data gradients on the main stream
  // beside this (side) one. A device-wide wait, which would break a capture on another thread of this device: rn50
  // captures only on the training thread, after every block's probe has chosen.
  RN50_CUDA_CHECK(cudaDeviceSynchronize());
  const cuda::Event start, stop;
  RN50_CUDA_CHECK(cudaEventRecord(start.event, stream));
  for (int k = 0; k < kRepeats; ++k) call();
  RN50_CUDA_CHECK(cudaEventRecord(stop.event, stream));
  RN50_CUDA_CHECK(cudaEventSynchronize(stop.event));
  return cuda::elapsed_seconds(start.event, stop.event) * 1000.0 / kRepeats;
}

// Whether a pattern with a prologue runs it as a pass of its own (bn_apply writes the activation, the plain pattern
// reads it) rather than inside the convolution. cuDNN's engines that fuse the prologue are slower than its plain ones
// at some shapes by more than the extra pass costs (on the H200, layer1's 3x3 weight gradient 0.238 ms fused against
// 0.131 ms plain), and have no plan at others (bfloat16 weight gradients), so kTimed times both once per pattern and
// shape, outside a CUDA graph's capture, and keeps the faster. Deterministic cuDNN keeps the fused form untimed, so
// that every process computes the same bits.
bool run_separately(Pattern pattern, const Shapes& s, const at::Tensor& like, PrologueRun mode,
                    const std::function<void()>& fused, const std::function<void()>& separate) {
  if (mode == PrologueRun::kFused) return false;
  if (mode == PrologueRun::kSeparate) return true;
  if (deterministic_requested()) return false;
  ThreadPlans& tp = thread_plans();
  const PlanSearch search = current_plan_search();  // the plans it compares depend on it
  const Key key = key_of(pattern, like.get_device(), s, false, search);
  const auto it = tp.separate.find(key);
  if (it != tp.separate.end()) return it->second;
  const cudaStream_t stream = detail::current_stream(like.get_device());
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  RN50_CUDA_CHECK(cudaStreamIsCapturing(stream, &capture));
  if (capture != cudaStreamCaptureStatusNone) return false;  // no timing under capture: the fused form, not kept
  PlanCache* disk = current_plan_cache();
  const std::string disk_key = disk ? cache_key(pattern, like.get_device(), s, search) : "";
  if (disk) {
    if (const std::optional<bool> separate = disk->prologue_separate(disk_key)) {
      const std::string line =
          shape_text(pattern, s) + ": prologue " + (*separate ? "separately" : "fused") + ", from the plan cache";
      {
        ChoiceLog& log = choice_log();
        const std::lock_guard<std::mutex> lock(log.mutex);
        log.lines.push_back(line);
      }
      tp.separate.emplace(key, *separate);
      return *separate;
    }
  }
  // Either form may have no plan (cuDNN has no fused bfloat16 weight gradient); only both failing is an error.
  double fused_ms = -1, separate_ms = -1;
  std::string fused_error;
  try {
    fused_ms = time_ms(fused, stream);
  } catch (const NoPlanError& e) {
    fused_error = e.what();
  }
  try {
    separate_ms = time_ms(separate, stream);
  } catch (const NoPlanError& e) {
    if (fused_ms < 0) throw NoPlanError(fused_error + "; run separately: " + e.what());
  }
  const bool choice = separate_ms >= 0 && (fused_ms < 0 || separate_ms < fused_ms);
  char text[320];
  if (fused_ms < 0) {
    std::snprintf(text, sizeof(text), "%s: prologue separately, %.3f ms (fused: no plan)",
                  shape_text(pattern, s).c_str(), separate_ms);
  } else if (separate_ms < 0) {
    std::snprintf(text, sizeof(text), "%s: prologue fused, %.3f ms (separately: no plan)",
                  shape_text(pattern, s).c_str(), fused_ms);
  } else {
    std::snprintf(text, sizeof(text), "%s: prologue %s, %.3f ms fused, %.3f ms separately",
                  shape_text(pattern, s).c_str(), choice ? "separately" : "fused", fused_ms, separate_ms);
  }
  {
    ChoiceLog& log = choice_log();
    const std::lock_guard<std::mutex> lock(log.mutex);
    log.lines.emplace_back(text);
  }
  tp.separate.emplace(key, choice);
  if (disk) disk->put_prologue(disk_key, choice);
  return choice;
}

}  // namespace

ConvStats conv_forward_stats(const at::Tensor& x, const at::Tensor& w, ConvGeometry geometry,
                             const Prologue& prologue) {
  check_data(x, "x", x);
  check_data(w, "w", x);
  const c10::DeviceGuard guard(x.device());
  const Shapes s = shapes_of(x, w.sizes(), geometry, prologue.defined());
  if (prologue.defined()) {
    check_channel(prologue.scale, "prologue scale", s.x[1], x);
    check_channel(prologue.bias, "prologue bias", s.x[1], x);
    const auto separately = [&] {
      return conv_forward_stats(bn_apply(x, prologue.scale, prologue.bias, true), w, geometry);
    };
    Prologue fused = prologue;
    fused.run = PrologueRun::kFused;
    if (run_separately(
            Pattern::kForwardStats, s, x, prologue.run, [&] { conv_forward_stats(x, w, geometry, fused); },
            separately)) {
      return separately();
    }
  }
  ConvStats out;
  out.y = empty_nhwc(s.y, x);
  out.sum = at::empty({s.y[1]}, x.options().dtype(at::kFloat));
  out.sq_sum = at::empty({s.y[1]}, x.options().dtype(at::kFloat));
  std::vector<int64_t> uids{kX, kW, kY, kSum, kSqSum};
  if (prologue.defined()) uids.insert(uids.end(), {kScale, kBias});
  run(Pattern::kForwardStats, s, x, uids, [&](Variant v, bool) {
    Bound b{{x.data_ptr(), w.data_ptr(), out.y.data_ptr(), out.sum.data_ptr(), out.sq_sum.data_ptr()}, {}};
    bind_prologue(prologue, x, v, &b);
    return b;
  });
  if (deterministic_requested()) recompute_stats(&out);
  return out;
}

at::Tensor conv_backward_filter(const at::Tensor& x, const at::Tensor& dy, at::IntArrayRef w_sizes,
                                ConvGeometry geometry, const Prologue& prologue) {
  check_data(x, "x", x);
  check_data(dy, "dy", x);
  const c10::DeviceGuard guard(x.device());
  const Shapes s = shapes_of(x, w_sizes, geometry, prologue.defined());
  if (vec(dy.sizes()) != s.y) throw std::invalid_argument("fused conv: dy's shape is not the convolution's output's");
  if (prologue.defined()) {
    check_channel(prologue.scale, "prologue scale", s.x[1], x);
    check_channel(prologue.bias, "prologue bias", s.x[1], x);
    const auto separately = [&] {
      return conv_backward_filter(bn_apply(x, prologue.scale, prologue.bias, true), dy, w_sizes, geometry);
    };
    Prologue fused = prologue;
    fused.run = PrologueRun::kFused;
    if (run_separately(
            Pattern::kBackwardFilter, s, x, prologue.run,
            [&] { conv_backward_filter(x, dy, w_sizes, geometry, fused); }, separately)) {
      return separately();
    }
  }
  at::Tensor dw = empty_nhwc(s.w, x);
  std::vector<int64_t> uids{kX, kDy, kDw};
  if (prologue.defined()) uids.insert(uids.end(), {kScale, kBias});
  run(Pattern::kBackwardFilter, s, x, uids, [&](Variant v, bool) {
    Bound b{{x.data_ptr(), dy.data_ptr(), dw.data_ptr()}, {}};
    bind_prologue(prologue, x, v, &b);
    return b;
  });
  return dw;
}

namespace {

// A tensor of x's shape that a data-gradient-into-BatchNorm graph reads besides the common ones, under its uid.
struct Extra {
  int64_t uid;
  const at::Tensor* tensor;
  const char* what;
};

// The data gradient into a BatchNorm's backward weights, both forms: checks, outputs and the variant pack's common part
// (dy, w, the BatchNorm's input and statistics, dz and the weights' gradients); the boundary form adds the gradient to
// accumulate and the residual (`extra`).
DgradBn backward_data_bn(Pattern pattern, const at::Tensor& dy, const at::Tensor& w, const BnSaved& bn,
                         ConvGeometry geometry, const std::vector<Extra>& extra) {
  check_data(bn.x, "the BatchNorm's input", bn.x);
  check_data(dy, "dy", bn.x);
  check_data(w, "w", bn.x);
  for (const Extra& e : extra) {
    check_data(*e.tensor, e.what, bn.x);
    if (e.tensor->sizes() != bn.x.sizes()) {
      throw std::invalid_argument(std::string("fused conv: ") + e.what + " must have x's shape");
    }
  }
  const c10::DeviceGuard guard(bn.x.device());
  const Shapes s = shapes_of(bn.x, w.sizes(), geometry, false);
  if (vec(dy.sizes()) != s.y) throw std::invalid_argument("fused conv: dy's shape is not the convolution's output's");
  const int64_t c = s.x[1];
  check_channel(bn.mean, "mean", c, bn.x);
  check_channel(bn.invstd, "invstd", c, bn.x);
  check_channel(bn.weight, "BatchNorm weight", c, bn.x);
  check_channel(bn.bias, "BatchNorm bias", c, bn.x);
  DgradBn out;
  out.dz = empty_nhwc(s.x, bn.x);
  auto channel = [&] { return at::empty({c}, bn.x.options().dtype(at::kFloat)); };
  out.dweight = channel();
  out.dbias = channel();
  out.eq_dy = channel();
  out.eq_x = channel();
  out.eq_bias = channel();
  std::vector<int64_t> uids{kDy, kW, kX, kMean, kInvstd, kGamma, kBeta, kDz, kDgamma, kDbeta, kEqDy, kEqX, kEqBias};
  std::vector<void*> ptrs{dy.data_ptr(),          w.data_ptr(),         bn.x.data_ptr(),      bn.mean.data_ptr(),
                          bn.invstd.data_ptr(),   bn.weight.data_ptr(), bn.bias.data_ptr(),   out.dz.data_ptr(),
                          out.dweight.data_ptr(), out.dbias.data_ptr(), out.eq_dy.data_ptr(), out.eq_x.data_ptr(),
                          out.eq_bias.data_ptr()};
  for (const Extra& e : extra) {
    uids.push_back(e.uid);
    ptrs.push_back(e.tensor->data_ptr());
  }
  run(pattern, s, bn.x, uids, [&](Variant, bool) { return Bound{ptrs, {}}; });
  if (deterministic_requested()) recompute_bn_weights(bn, &out);
  return out;
}

}  // namespace

DgradBn conv_backward_data_bn(const at::Tensor& dy, const at::Tensor& w, const BnSaved& bn, ConvGeometry geometry) {
  return backward_data_bn(Pattern::kBackwardDataBn, dy, w, bn, geometry, {});
}

DgradBn conv_backward_data_add_bn(const at::Tensor& dy, const at::Tensor& w, const at::Tensor& accumulate,
                                  const at::Tensor& residual, const BnSaved& bn, ConvGeometry geometry) {
  return backward_data_bn(Pattern::kBackwardDataAddBn, dy, w, bn, geometry,
                          {{kAccumulate, &accumulate, "the added gradient"}, {kResidual, &residual, "the residual"}});
}

at::Tensor conv_backward_data(const at::Tensor& dy, const at::Tensor& w, at::IntArrayRef x_sizes, ConvGeometry geometry,
                              const at::Tensor& accumulate) {
  check_data(dy, "dy", dy);
  check_data(w, "w", dy);
  const c10::DeviceGuard guard(dy.device());
  Shapes s;
  s.x = vec(x_sizes);
  s.w = vec(w.sizes());
  if (s.x.size() != 4 || s.w[1] != s.x[1]) throw std::invalid_argument("fused conv: x's shape does not fit the weight");
  s.y = {s.x[0], s.w[0], out_size(s.x[2], s.w[2], geometry), out_size(s.x[3], s.w[3], geometry)};
  if (vec(dy.sizes()) != s.y) throw std::invalid_argument("fused conv: dy's shape is not the convolution's output's");
  s.type = cudnn_type(dy.scalar_type());
  s.stride = geometry.stride;
  s.padding = geometry.padding;
  at::Tensor dx = accumulate;
  if (accumulate.defined()) {
    check_data(accumulate, "the accumulated gradient", dy);
    if (vec(accumulate.sizes()) != s.x) throw std::invalid_argument("fused conv: the accumulated gradient's shape");
  } else {
    dx = empty_nhwc(s.x, dy);
  }
  const Pattern pattern = accumulate.defined() ? Pattern::kBackwardDataAccumulate : Pattern::kBackwardData;
  at::Tensor scratch;
  run(pattern, s, dy, {kDy, kW, kX}, [&](Variant, bool timing) {
    if (timing && accumulate.defined()) {
      if (!scratch.defined()) scratch = accumulate.clone(kChannelsLast);
      return Bound{{dy.data_ptr(), w.data_ptr(), scratch.data_ptr()}, {}};
    }
    return Bound{{dy.data_ptr(), w.data_ptr(), dx.data_ptr()}, {}};
  });
  return dx;
}

BnFinal bn_finalize(const at::Tensor& sum, const at::Tensor& sq_sum, int64_t count, const BatchNormState& bn) {
  const int64_t c = sum.numel();
  check_channel(sum, "sum", c, sum);
  check_channel(sq_sum, "sq_sum", c, sum);
  check_channel(bn.weight, "BatchNorm weight", c, sum);
  check_channel(bn.bias, "BatchNorm bias", c, sum);
  const bool running = bn.running_mean.defined();
  if (running) {
    check_channel(bn.running_mean, "running_mean", c, sum);
    check_channel(bn.running_var, "running_var", c, sum);
  }
  const c10::DeviceGuard guard(sum.device());
  auto channel = [&] { return at::empty({c}, sum.options()); };
  BnFinal out{channel(), channel(), channel(), channel()};
  kernels::FinalizeArgs a;
  a.sum = sum.data_ptr<float>();
  a.sq_sum = sq_sum.data_ptr<float>();
  a.weight = bn.weight.data_ptr<float>();
  a.bias = bn.bias.data_ptr<float>();
  if (running) {
    a.running_mean = bn.running_mean.data_ptr<float>();
    a.running_var = bn.running_var.data_ptr<float>();
  }
  if (bn.num_batches_tracked.defined()) a.num_batches_tracked = bn.num_batches_tracked.data_ptr<int64_t>();
  a.mean = out.mean.data_ptr<float>();
  a.invstd = out.invstd.data_ptr<float>();
  a.scale = out.scale.data_ptr<float>();
  a.shift = out.shift.data_ptr<float>();
  a.channels = c;
  a.count = count;
  a.momentum = bn.momentum;
  a.eps = bn.eps;
  kernels::bn_finalize(a, detail::current_stream(sum.get_device()));
  return out;
}

namespace {

AppliedRelu apply(const at::Tensor& x, const at::Tensor& scale, const at::Tensor& shift, bool relu,
                  const at::Tensor& residual, const at::Tensor& rscale, const at::Tensor& rshift, bool relu_bits) {
  check_data(x, "x", x);
  const int64_t c = x.size(1);
  check_channel(scale, "scale", c, x);
  check_channel(shift, "shift", c, x);
  if (residual.defined()) {
    check_data(residual, "residual", x);
    if (residual.sizes() != x.sizes()) throw std::invalid_argument("fused conv: residual's shape differs from x's");
  }
  if (rscale.defined()) {
    if (!residual.defined()) throw std::invalid_argument("fused conv: rscale without a residual");
    check_channel(rscale, "rscale", c, x);
    check_channel(rshift, "rshift", c, x);
  }
  if (relu_bits && c % 8 != 0) throw std::invalid_argument("fused conv: ReLU's bits need channels a multiple of 8");
  const c10::DeviceGuard guard(x.device());
  at::Tensor out = at::empty_like(x, x.options().memory_format(kChannelsLast));
  at::Tensor bits = relu_bits ? at::empty({x.numel() / 8}, x.options().dtype(at::kByte)) : at::Tensor();
  kernels::ApplyArgs a;
  a.x = x.data_ptr();
  a.scale = scale.data_ptr<float>();
  a.shift = shift.data_ptr<float>();
  a.residual = residual.defined() ? residual.data_ptr() : nullptr;
  a.rscale = rscale.defined() ? rscale.data_ptr<float>() : nullptr;
  a.rshift = rscale.defined() ? rshift.data_ptr<float>() : nullptr;
  a.out = out.data_ptr();
  a.relu_bits = relu_bits ? bits.data_ptr<uint8_t>() : nullptr;
  a.rows = x.numel() / c;
  a.channels = c;
  a.relu = relu;
  a.half = x.scalar_type() == at::kHalf;
  cudnn_type(x.scalar_type());  // refuses other dtypes
  kernels::bn_apply(a, detail::current_stream(x.get_device()));
  return {out, bits};
}

}  // namespace

at::Tensor bn_apply(const at::Tensor& x, const at::Tensor& scale, const at::Tensor& shift, bool relu,
                    const at::Tensor& residual, const at::Tensor& rscale, const at::Tensor& rshift) {
  return apply(x, scale, shift, relu, residual, rscale, rshift, false).y;
}

AppliedRelu bn_apply_relu_bits(const at::Tensor& x, const at::Tensor& scale, const at::Tensor& shift,
                               const at::Tensor& residual, const at::Tensor& rscale, const at::Tensor& rshift) {
  return apply(x, scale, shift, true, residual, rscale, rshift, true);
}

at::Tensor dbn_apply(const DgradBn& grad, const at::Tensor& x) {
  check_data(x, "x", x);
  check_data(grad.dz, "dz", x);
  if (grad.dz.sizes() != x.sizes()) throw std::invalid_argument("fused conv: dz's shape differs from x's");
  const int64_t c = x.size(1);
  check_channel(grad.eq_dy, "eq_dy", c, x);
  check_channel(grad.eq_x, "eq_x", c, x);
  check_channel(grad.eq_bias, "eq_bias", c, x);
  cudnn_type(x.scalar_type());
  const c10::DeviceGuard guard(x.device());
  at::Tensor dx = at::empty_like(x, x.options().memory_format(kChannelsLast));
  kernels::DbnApplyArgs a;
  a.dz = grad.dz.data_ptr();
  a.x = x.data_ptr();
  a.eq_dy = grad.eq_dy.data_ptr<float>();
  a.eq_x = grad.eq_x.data_ptr<float>();
  a.eq_bias = grad.eq_bias.data_ptr<float>();
  a.dx = dx.data_ptr();
  a.rows = x.numel() / c;
  a.channels = c;
  a.half = x.scalar_type() == at::kHalf;
  kernels::dbn_apply(a, detail::current_stream(x.get_device()));
  return dx;
}

std::string fused_conv_unsupported_reason(const at::Tensor& x) {
  if (!x.is_cuda()) return "on the CPU";
  if (x.scalar_type() != at::kHalf && x.scalar_type() != at::kBFloat16) {
    return std::string("dtype ") + c10::toString(x.scalar_type()) + " (half or bfloat16 only)";
  }
  if (x.dim() != 4 || !x.is_contiguous(kChannelsLast)) return "not a channels-last 4-D tensor";
  return "";
}

std::string last_plan_description() { return thread_plans().last; }

std::string fused_conv_plan_context() {
  int driver = 0;
  RN50_CUDA_CHECK(cudaDriverGetVersion(&driver));
  return build_summary() + "; cuDNN " + std::to_string(cudnnGetVersion()) + " loaded; CUDA driver " +
         std::to_string(driver);
}

std::vector<std::string> take_prologue_choices() {
  ChoiceLog& log = choice_log();
  const std::lock_guard<std::mutex> lock(log.mutex);
  std::vector<std::string> out;
  out.swap(log.lines);
  return out;
}

}  // namespace rn50::ops
