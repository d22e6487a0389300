// ops/cudnn_graph.h: cuDNN's graph (backend) API in RAII form: descriptors, a builder for operation graphs of
// tensors, convolutions, pointwise ops and BatchNorm statistics, execution plans chosen by heuristics and timing.
// CUDA builds only; no LibTorch here, so that this layer stays a thin, checkable wrapper of cuDNN's backend API.
#pragma once

#include <cudnn.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace rn50::ops::cudnn_graph {

// Owns one cudnnBackendDescriptor_t of a type; attributes are set in place, `finalize` ends the building.
class Descriptor {
 public:
  explicit Descriptor(cudnnBackendDescriptorType_t type);
  ~Descriptor();
  Descriptor(Descriptor&& other) noexcept;
  Descriptor& operator=(Descriptor&& other) noexcept;
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;

  Descriptor& set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, int64_t count,
                  const void* values);
  Descriptor& set_int(cudnnBackendAttributeName_t name, int64_t value);
  Descriptor& set_ints(cudnnBackendAttributeName_t name, const std::vector<int64_t>& values);
  Descriptor& set_data_type(cudnnBackendAttributeName_t name, cudnnDataType_t value);
  Descriptor& set_bool(cudnnBackendAttributeName_t name, bool value);
  Descriptor& set_float(cudnnBackendAttributeName_t name, float value);
  Descriptor& set_double(cudnnBackendAttributeName_t name, double value);
  Descriptor& set_desc(cudnnBackendAttributeName_t name, const Descriptor& value);
  Descriptor& set_descs(cudnnBackendAttributeName_t name, const std::vector<const Descriptor*>& values);
  Descriptor& set_handle(cudnnBackendAttributeName_t name, cudnnHandle_t handle);
  Descriptor& finalize();
  // finalize, returning the status instead of throwing (engine configurations that do not take a graph).
  cudnnStatus_t try_finalize();

  cudnnBackendDescriptor_t get() const { return desc_; }

 private:
  cudnnBackendDescriptor_t desc_ = nullptr;
};

// A tensor of a graph: dims always in N, C, H, W order, strides saying the memory layout (NHWC: C fastest).
struct TensorSpec {
  int64_t uid = 0;
  std::vector<int64_t> dims, strides;
  cudnnDataType_t type = CUDNN_DATA_HALF;
  bool is_virtual = false;  // an intermediate that never reaches memory
};

// Convolution geometry of a 2-D cross-correlation.
struct ConvSpec {
  std::vector<int64_t> stride{1, 1}, padding{0, 0}, dilation{1, 1};
};

struct ConvOpNames;

// Builds one operation graph; keeps every descriptor it made alive for as long as the graph lives.
class GraphBuilder {
 public:
  // Returns the tensor's descriptor, kept by the builder (its uid names it in the variant pack when not virtual).
  const Descriptor& tensor(const TensorSpec& spec);
  // y = mode(x[, b]) (MUL, ADD, SUB, RELU_FWD, ...), computed in float.
  void pointwise(cudnnPointwiseMode_t mode, const Descriptor& x, const Descriptor* b, const Descriptor& y);
  // dx = relu_bwd(dy, x): dy where x > 0, else 0.
  void relu_backward(const Descriptor& dy, const Descriptor& x, const Descriptor& dx);
  void conv_forward(const Descriptor& x, const Descriptor& w, const Descriptor& y, const ConvSpec& conv);
  void conv_backward_data(const Descriptor& dy, const Descriptor& w, const Descriptor& dx, const ConvSpec& conv,
                          float beta = 0.0F);
  void conv_backward_filter(const Descriptor& x, const Descriptor& dy, const Descriptor& dw, const ConvSpec& conv);
  // Per-channel sum and sum of squares of x (float [1, C, 1, 1]).
  void gen_stats(const Descriptor& x, const Descriptor& sum, const Descriptor& sq_sum);
  // BatchNorm's backward weights: dscale, dbias and dx's coefficients (dx = eq_dy * dy + eq_x * x + eq_bias) from
  // x, the saved mean and inverse standard deviation, the scale and dy.
  void bn_backward_weights(const Descriptor& x, const Descriptor& mean, const Descriptor& invstd,
                           const Descriptor& scale, const Descriptor& dy, const Descriptor& dscale,
                           const Descriptor& dbias, const Descriptor& eq_dy, const Descriptor& eq_x,
                           const Descriptor& eq_bias);
  // The finalized operation graph over every op added so far.
  Descriptor build(cudnnHandle_t handle);

 private:
  std::vector<std::unique_ptr<Descriptor>> kept_;
  std::vector<const Descriptor*> ops_;
  const Descriptor& keep(Descriptor d);
  const Descriptor& pointwise_desc(cudnnPointwiseMode_t mode);  // computed in float
  void conv_op(const ConvOpNames& names, const Descriptor& first, const Descriptor& second, const Descriptor& third,
               const ConvSpec& conv, float beta);
};

// A finalized execution plan and what it needs.
struct Plan {
  std::unique_ptr<Descriptor> plan;
  int64_t workspace_bytes = 0;
  int64_t engine = -1;  // cuDNN's global engine index
  bool runtime_compiled = false;
  bool nondeterministic = false;  // cuDNN's numerical note: results may differ run to run (atomics, split reductions)
  float time_ms = -1.0F;          // when chosen by timing
  std::string knobs;              // knob choices, "type=value,..." ("none": no knobs; empty: cuDNN does not say)
  bool enumerated = false;        // found by enumerated_plans, not listed by the heuristics
};

// Runs one candidate plan once on the current buffers (the caller's variant pack), for timing.
using RunPlan = std::function<void(const Plan&)>;

// The plans cuDNN's heuristics offer for the graph and that finalize: mode A's configurations in its order, then mode
// B's not listed already (the fallback list only where neither offers one that builds); `why_none` says what failed
// when the list is empty. At most `max_plans`.
std::vector<Plan> candidate_plans(cudnnHandle_t handle, const Descriptor& graph, int max_plans, std::string* why_none);

// The configuration named by cuDNN's engine index and knob settings (as a Plan of candidate_plans describes them;
// knobs named), looked up among those candidate_plans(max_plans) could have reached and finalized: a choice made
// before (core/plan_cache.h) built without building and timing the others. None where it is not among them or does
// not finalize.
std::optional<Plan> plan_of(cudnnHandle_t handle, const Descriptor& graph, int64_t engine, const std::string& knobs,
                            int max_plans);

// How far enumerated_plans looks: settings per knob, knob combinations tried per engine, plans returned, and the
// largest workspace a plan may ask for.
struct Enumeration {
  int max_knob_values = 32;
  int64_t max_tries_per_engine = 256;
  int max_plans = 96;
  int64_t max_workspace_bytes = int64_t{256} << 20;
};

// Beyond the heuristics: each engine cuDNN has (by global index) that takes the graph and does not compile at run
// time, with its knobs' settings enumerated (every combination where there are at most max_tries_per_engine, else a
// fixed sample of that many), the configurations that finalize, in engine order. For plan_search: exhaustive.
std::vector<Plan> enumerated_plans(cudnnHandle_t handle, const Descriptor& graph, const Enumeration& limits);

// The configuration of that engine and knob settings ("type=value,..." as a Plan names them) built directly, without
// the heuristics' lists: a choice enumerated_plans found, taken from the plan cache. None where it no longer builds.
std::optional<Plan> plan_from_knobs(cudnnHandle_t handle, const Descriptor& graph, int64_t engine,
                                    const std::string& knobs);

// The fastest of the candidates, each run `warmup` + `repeats` times through `run` on `stream` (not under capture),
// its time_ms set; with `repeats` 0 the first, untimed. A candidate whose warm-up run throws std::runtime_error (a
// cuDNN status) is skipped. Throws std::runtime_error for an empty list or when every candidate failed.
Plan choose_plan(std::vector<Plan> candidates, const RunPlan& run, cudaStream_t stream, int warmup, int repeats);

// cuDNN refusing to execute a plan (a bad-parameter or not-supported status): nothing was launched, and another plan
// may run where this one does not.
class ExecuteRefused : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Executes the plan with the tensors named by uid (virtual tensors are not in the pack) and a workspace of at least
// plan.workspace_bytes, on the handle's stream. Throws ExecuteRefused where cuDNN refuses the plan, std::runtime_error
// for any other failure.
void execute(cudnnHandle_t handle, const Plan& plan, const std::vector<int64_t>& uids,
             const std::vector<void*>& pointers, void* workspace);

// NHWC strides for dims in N, C, H, W order; per-channel [1, C, 1, 1] tensors get {C, 1, C, C}.
std::vector<int64_t> nhwc_strides(const std::vector<int64_t>& dims);

}  // namespace rn50::ops::cudnn_graph
