// ops/cudnn_graph.cpp: the graph API wrapper: descriptor lifetimes, the graph builder, heuristics, plan timing.
#include "ops/cudnn_graph.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "cuda/cuda_check.h"
#include "cuda/cuda_event.h"
#include "cuda/cudnn_check.h"

namespace rn50::ops::cudnn_graph {

Descriptor::Descriptor(cudnnBackendDescriptorType_t type) {
  RN50_CUDNN_CHECK(cudnnBackendCreateDescriptor(type, &desc_));
}

Descriptor::~Descriptor() {
  if (desc_ != nullptr) cudnnBackendDestroyDescriptor(desc_);
}

Descriptor::Descriptor(Descriptor&& other) noexcept : desc_(std::exchange(other.desc_, nullptr)) {}

Descriptor& Descriptor::operator=(Descriptor&& other) noexcept {
  if (this != &other) {
    if (desc_ != nullptr) cudnnBackendDestroyDescriptor(desc_);
    desc_ = std::exchange(other.desc_, nullptr);
  }
  return *this;
}

Descriptor& Descriptor::set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, int64_t count,
                            const void* values) {
  RN50_CUDNN_CHECK(cudnnBackendSetAttribute(desc_, name, type, count, values));
  return *this;
}

Descriptor& Descriptor::set_int(cudnnBackendAttributeName_t name, int64_t value) {
  return set(name, CUDNN_TYPE_INT64, 1, &value);
}

Descriptor& Descriptor::set_ints(cudnnBackendAttributeName_t name, const std::vector<int64_t>& values) {
  return set(name, CUDNN_TYPE_INT64, static_cast<int64_t>(values.size()), values.data());
}

Descriptor& Descriptor::set_data_type(cudnnBackendAttributeName_t name, cudnnDataType_t value) {
  return set(name, CUDNN_TYPE_DATA_TYPE, 1, &value);
}

Descriptor& Descriptor::set_bool(cudnnBackendAttributeName_t name, bool value) {
  return set(name, CUDNN_TYPE_BOOLEAN, 1, &value);
}

Descriptor& Descriptor::set_float(cudnnBackendAttributeName_t name, float value) {
  return set(name, CUDNN_TYPE_FLOAT, 1, &value);
}

Descriptor& Descriptor::set_double(cudnnBackendAttributeName_t name, double value) {
  return set(name, CUDNN_TYPE_DOUBLE, 1, &value);
}

Descriptor& Descriptor::set_desc(cudnnBackendAttributeName_t name, const Descriptor& value) {
  cudnnBackendDescriptor_t raw = value.get();
  return set(name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &raw);
}

Descriptor& Descriptor::set_descs(cudnnBackendAttributeName_t name, const std::vector<const Descriptor*>& values) {
  std::vector<cudnnBackendDescriptor_t> raw;
  raw.reserve(values.size());
  for (const Descriptor* d : values) raw.push_back(d->get());
  return set(name, CUDNN_TYPE_BACKEND_DESCRIPTOR, static_cast<int64_t>(raw.size()), raw.data());
}

Descriptor& Descriptor::set_handle(cudnnBackendAttributeName_t name, cudnnHandle_t handle) {
  return set(name, CUDNN_TYPE_HANDLE, 1, &handle);
}

Descriptor& Descriptor::finalize() {
  RN50_CUDNN_CHECK(cudnnBackendFinalize(desc_));
  return *this;
}

cudnnStatus_t Descriptor::try_finalize() { return cudnnBackendFinalize(desc_); }

// ---- the builder ---------------------------------------------------------------------------------------------------

const Descriptor& GraphBuilder::keep(Descriptor d) {
  kept_.push_back(std::make_unique<Descriptor>(std::move(d)));
  return *kept_.back();
}

const Descriptor& GraphBuilder::tensor(const TensorSpec& spec) {
  if (spec.dims.size() != spec.strides.size() || spec.dims.empty()) {
    throw std::invalid_argument("cudnn_graph: tensor " + std::to_string(spec.uid) + ": dims and strides differ");
  }
  Descriptor d(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  d.set_data_type(CUDNN_ATTR_TENSOR_DATA_TYPE, spec.type)
      .set_ints(CUDNN_ATTR_TENSOR_DIMENSIONS, spec.dims)
      .set_ints(CUDNN_ATTR_TENSOR_STRIDES, spec.strides)
      .set_int(CUDNN_ATTR_TENSOR_UNIQUE_ID, spec.uid)
      .set_int(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, 16)
      .set_bool(CUDNN_ATTR_TENSOR_IS_VIRTUAL, spec.is_virtual)
      .finalize();
  return keep(std::move(d));
}

const Descriptor& GraphBuilder::pointwise_desc(cudnnPointwiseMode_t mode) {
  Descriptor pw(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
  pw.set(CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode)
      .set_data_type(CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_DATA_FLOAT)
      .finalize();
  return keep(std::move(pw));
}

void GraphBuilder::pointwise(cudnnPointwiseMode_t mode, const Descriptor& x, const Descriptor* b, const Descriptor& y) {
  Descriptor op(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
  op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pointwise_desc(mode))
      .set_desc(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, x);
  if (b != nullptr) op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_BDESC, *b);
  op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, y).finalize();
  ops_.push_back(&keep(std::move(op)));
}

void GraphBuilder::relu_backward(const Descriptor& dy, const Descriptor& x, const Descriptor& dx) {
  Descriptor op(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
  op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pointwise_desc(CUDNN_POINTWISE_RELU_BWD))
      .set_desc(CUDNN_ATTR_OPERATION_POINTWISE_DYDESC, dy)
      .set_desc(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, x)
      .set_desc(CUDNN_ATTR_OPERATION_POINTWISE_DXDESC, dx)
      .finalize();
  ops_.push_back(&keep(std::move(op)));
}

namespace {

Descriptor convolution(const ConvSpec& conv) {
  Descriptor d(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR);
  const cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  d.set_data_type(CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_DATA_FLOAT)
      .set(CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode)
      .set_int(CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, static_cast<int64_t>(conv.stride.size()))
      .set_ints(CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, conv.stride)
      .set_ints(CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, conv.padding)
      .set_ints(CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, conv.padding)
      .set_ints(CUDNN_ATTR_CONVOLUTION_DILATIONS, conv.dilation)
      .finalize();
  return d;
}

}  // namespace

// One convolution op's attribute names: its type, its three tensors (the order of each op's own naming), the
// convolution, alpha and beta.
struct ConvOpNames {
  cudnnBackendDescriptorType_t type;
  cudnnBackendAttributeName_t first, second, third, conv, alpha, beta;
};

namespace {

constexpr ConvOpNames kForward{CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR,
                               CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X,
                               CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W,
                               CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y,
                               CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC,
                               CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA,
                               CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA};
constexpr ConvOpNames kBackwardData{CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR,
                                    CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY,
                                    CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W,
                                    CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX,
                                    CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC,
                                    CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA,
                                    CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA};
constexpr ConvOpNames kBackwardFilter{CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR,
                                      CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X,
                                      CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY,
                                      CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW,
                                      CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC,
                                      CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA,
                                      CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA};

}  // namespace

void GraphBuilder::conv_op(const ConvOpNames& names, const Descriptor& first, const Descriptor& second,
                           const Descriptor& third, const ConvSpec& conv, float beta) {
  const Descriptor& c = keep(convolution(conv));
  Descriptor op(names.type);
  op.set_desc(names.first, first)
      .set_desc(names.second, second)
      .set_desc(names.third, third)
      .set_desc(names.conv, c)
      .set_float(names.alpha, 1.0F)
      .set_float(names.beta, beta)
      .finalize();
  ops_.push_back(&keep(std::move(op)));
}

void GraphBuilder::conv_forward(const Descriptor& x, const Descriptor& w, const Descriptor& y, const ConvSpec& conv) {
  conv_op(kForward, x, w, y, conv, 0.0F);
}

void GraphBuilder::conv_backward_data(const Descriptor& dy, const Descriptor& w, const Descriptor& dx,
                                      const ConvSpec& conv, float beta) {
  conv_op(kBackwardData, dy, w, dx, conv, beta);
}

void GraphBuilder::conv_backward_filter(const Descriptor& x, const Descriptor& dy, const Descriptor& dw,
                                        const ConvSpec& conv) {
  conv_op(kBackwardFilter, x, dy, dw, conv, 0.0F);
}

void GraphBuilder::gen_stats(const Descriptor& x, const Descriptor& sum, const Descriptor& sq_sum) {
  const cudnnGenStatsMode_t mode = CUDNN_GENSTATS_SUM_SQSUM;
  Descriptor op(CUDNN_BACKEND_OPERATION_GEN_STATS_DESCRIPTOR);
  op.set(CUDNN_ATTR_OPERATION_GENSTATS_MODE, CUDNN_TYPE_GENSTATS_MODE, 1, &mode)
      .set_data_type(CUDNN_ATTR_OPERATION_GENSTATS_MATH_PREC, CUDNN_DATA_FLOAT)
      .set_desc(CUDNN_ATTR_OPERATION_GENSTATS_XDESC, x)
      .set_desc(CUDNN_ATTR_OPERATION_GENSTATS_SUMDESC, sum)
      .set_desc(CUDNN_ATTR_OPERATION_GENSTATS_SQSUMDESC, sq_sum)
      .finalize();
  ops_.push_back(&keep(std::move(op)));
}

void GraphBuilder::bn_backward_weights(const Descriptor& x, const Descriptor& mean, const Descriptor& invstd,
                                       const Descriptor& scale, const Descriptor& dy, const Descriptor& dscale,
                                       const Descriptor& dbias, const Descriptor& eq_dy, const Descriptor& eq_x,
                                       const Descriptor& eq_bias) {
  Descriptor op(CUDNN_BACKEND_OPERATION_BN_BWD_WEIGHTS_DESCRIPTOR);
  op.set_data_type(CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_MATH_PREC, CUDNN_DATA_FLOAT)
      .set_desc(CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_X_DESC, x)
      .set_desc(CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_MEAN_DESC, mean)
      .set_desc(CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_INVSTD_DESC, invstd)
      .set_desc(CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_BN_SCALE_DESC, scale)
      .set_desc(CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_DY_DESC, dy)
      .set_desc(CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_DBN_SCALE_DESC, dscale)
      .set_desc(CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_DBN_BIAS_DESC, dbias)
      .set_desc(CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_EQ_DY_SCALE_DESC, eq_dy)
      .set_desc(CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_EQ_X_SCALE_DESC, eq_x)
      .set_desc(CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_EQ_BIAS, eq_bias)
      .finalize();
  ops_.push_back(&keep(std::move(op)));
}

Descriptor GraphBuilder::build(cudnnHandle_t handle) {
  Descriptor graph(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  graph.set_descs(CUDNN_ATTR_OPERATIONGRAPH_OPS, ops_);
  // Deprecated in cuDNN 9 but still read by its engines, as the frontend still sets it.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  graph.set_handle(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, handle);
#pragma GCC diagnostic pop
  graph.finalize();
  // The builder keeps owning the op descriptors; its owner keeps it alive beside the graph and the plans made from
  // it, as cuDNN's frontend keeps its ops.
  return graph;
}

// ---- plans ---------------------------------------------------------------------------------------------------------

namespace {

// `count` new descriptors of one type, and their raw handles: what a getter of a descriptor-array attribute fills.
struct DescriptorArray {
  std::vector<Descriptor> owned;
  std::vector<cudnnBackendDescriptor_t> raw;
};

DescriptorArray make_descriptors(cudnnBackendDescriptorType_t type, int64_t count) {
  DescriptorArray a;
  for (int64_t i = 0; i < count; ++i) {
    a.owned.emplace_back(type);
    a.raw.push_back(a.owned.back().get());
  }
  return a;
}

// The engine configurations one heuristics mode offers (empty when the mode does not take the graph).
std::vector<Descriptor> heuristic_configs(const Descriptor& graph, cudnnBackendHeurMode_t mode, std::string* why) {
  Descriptor heur(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
  heur.set_desc(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph)
      .set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
  const cudnnStatus_t finalized = heur.try_finalize();
  if (finalized != CUDNN_STATUS_SUCCESS) {
    if (why)
      *why += std::string(" heuristics ") + std::to_string(static_cast<int>(mode)) + ": " +
              cudnnGetErrorString(finalized) + ";";
    return {};
  }
  int64_t count = 0;
  RN50_CUDNN_CHECK(cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0,
                                            &count, nullptr));
  DescriptorArray configs = make_descriptors(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, count);
  int64_t got = 0;
  if (count > 0) {
    RN50_CUDNN_CHECK(cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                              count, &got, configs.raw.data()));
  }
  configs.owned.erase(configs.owned.begin() + std::min(got, count), configs.owned.end());
  return std::move(configs.owned);
}

// The engine's global index and whether it compiles at run time, read off a configuration.
void describe_engine(const Descriptor& config, Plan* plan) {
  Descriptor engine(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
  cudnnBackendDescriptor_t raw = engine.get();
  int64_t got = 0;
  if (cudnnBackendGetAttribute(config.get(), CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &got,
                               &raw) != CUDNN_STATUS_SUCCESS) {
    return;
  }
  cudnnBackendGetAttribute(raw, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &got, &plan->engine);
  cudnnBackendBehaviorNote_t notes[CUDNN_BEHAVIOR_NOTE_TYPE_COUNT];
  int64_t n = 0;
  if (cudnnBackendGetAttribute(raw, CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE, CUDNN_TYPE_BEHAVIOR_NOTE,
                               CUDNN_BEHAVIOR_NOTE_TYPE_COUNT, &n, notes) == CUDNN_STATUS_SUCCESS) {
    for (int64_t i = 0; i < n; ++i) plan->runtime_compiled |= notes[i] == CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION;
  }
  cudnnBackendNumericalNote_t numerical[CUDNN_NUMERICAL_NOTE_TYPE_COUNT];
  n = 0;
  if (cudnnBackendGetAttribute(raw, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                               CUDNN_NUMERICAL_NOTE_TYPE_COUNT, &n, numerical) == CUDNN_STATUS_SUCCESS) {
    for (int64_t i = 0; i < n; ++i) plan->nondeterministic |= numerical[i] == CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC;
  }
}

// The configuration's knob choices ("type=value" in cuDNN's order, "none" for an engine without knobs): with the
// engine, what tells two configurations apart. Empty where cuDNN does not say.
std::string knob_choices(const Descriptor& config) {
  DescriptorArray choices = make_descriptors(CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR, CUDNN_KNOB_TYPE_COUNTS);
  int64_t n = 0;
  if (cudnnBackendGetAttribute(config.get(), CUDNN_ATTR_ENGINECFG_KNOB_CHOICES, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                               CUDNN_KNOB_TYPE_COUNTS, &n, choices.raw.data()) != CUDNN_STATUS_SUCCESS) {
    return "";
  }
  std::string out;
  for (int64_t i = 0; i < n; ++i) {
    cudnnBackendKnobType_t type{};
    int64_t value = 0, got = 0;
    if (cudnnBackendGetAttribute(choices.raw[i], CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE, CUDNN_TYPE_KNOB_TYPE, 1, &got,
                                 &type) != CUDNN_STATUS_SUCCESS ||
        cudnnBackendGetAttribute(choices.raw[i], CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, CUDNN_TYPE_INT64, 1, &got,
                                 &value) != CUDNN_STATUS_SUCCESS) {
      return "";
    }
    out += (out.empty() ? "" : ",") + std::to_string(static_cast<int>(type)) + "=" + std::to_string(value);
  }
  return n == 0 ? "none" : out;  // an engine without knobs has one configuration: named, unlike one cuDNN hides
}

// Finalizes a plan of the configuration into p (its engine and knobs described already); false, with why, where
// cuDNN refuses.
bool finalize(cudnnHandle_t handle, const Descriptor& config, Plan* p, std::string* why) {
  auto plan = std::make_unique<Descriptor>(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
  plan->set_desc(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, config);
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  plan->set_handle(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, handle);
#pragma GCC diagnostic pop
  const cudnnStatus_t s = plan->try_finalize();
  if (s != CUDNN_STATUS_SUCCESS) {
    *why += " engine " + std::to_string(p->engine) + ": " + cudnnGetErrorString(s) + ";";
    return false;
  }
  int64_t got = 0;
  RN50_CUDNN_CHECK(cudnnBackendGetAttribute(plan->get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1,
                                            &got, &p->workspace_bytes));
  p->plan = std::move(plan);
  return true;
}

// One knob of an engine and the settings it allows (cuDNN's minimum to maximum by its stride).
struct KnobRange {
  cudnnBackendKnobType_t type{};
  std::vector<int64_t> values;
};

// The engine of that global index for the graph, finalized; none where it does not take the graph.
std::optional<Descriptor> engine_for(const Descriptor& graph, int64_t index) {
  Descriptor engine(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
  engine.set_desc(CUDNN_ATTR_ENGINE_OPERATION_GRAPH, graph).set_int(CUDNN_ATTR_ENGINE_GLOBAL_INDEX, index);
  if (engine.try_finalize() != CUDNN_STATUS_SUCCESS) return std::nullopt;
  return std::optional<Descriptor>(std::move(engine));
}

// Whether the engine compiles its kernels at run time; true also where cuDNN does not say (such an engine is left out
// of the enumeration rather than compiled for each of its settings).
bool compiles_at_run_time(const Descriptor& engine) {
  cudnnBackendBehaviorNote_t notes[CUDNN_BEHAVIOR_NOTE_TYPE_COUNT];
  int64_t n = 0;
  if (cudnnBackendGetAttribute(engine.get(), CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE, CUDNN_TYPE_BEHAVIOR_NOTE,
                               CUDNN_BEHAVIOR_NOTE_TYPE_COUNT, &n, notes) != CUDNN_STATUS_SUCCESS) {
    return true;
  }
  return std::any_of(notes, notes + n,
                     [](cudnnBackendBehaviorNote_t b) { return b == CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION; });
}

// The engine's knobs, each with at most max_values settings (evenly spaced over its range where it has more).
std::vector<KnobRange> knob_ranges(const Descriptor& engine, int max_values) {
  DescriptorArray infos = make_descriptors(CUDNN_BACKEND_KNOB_INFO_DESCRIPTOR, CUDNN_KNOB_TYPE_COUNTS);
  int64_t n = 0;
  if (cudnnBackendGetAttribute(engine.get(), CUDNN_ATTR_ENGINE_KNOB_INFO, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                               CUDNN_KNOB_TYPE_COUNTS, &n, infos.raw.data()) != CUDNN_STATUS_SUCCESS) {
    return {};
  }
  std::vector<KnobRange> ranges;
  for (int64_t i = 0; i < n; ++i) {
    KnobRange r;
    int64_t lo = 0, hi = 0, stride = 1, got = 0;
    if (cudnnBackendGetAttribute(infos.raw[i], CUDNN_ATTR_KNOB_INFO_TYPE, CUDNN_TYPE_KNOB_TYPE, 1, &got, &r.type) !=
            CUDNN_STATUS_SUCCESS ||
        cudnnBackendGetAttribute(infos.raw[i], CUDNN_ATTR_KNOB_INFO_MINIMUM_VALUE, CUDNN_TYPE_INT64, 1, &got, &lo) !=
            CUDNN_STATUS_SUCCESS ||
        cudnnBackendGetAttribute(infos.raw[i], CUDNN_ATTR_KNOB_INFO_MAXIMUM_VALUE, CUDNN_TYPE_INT64, 1, &got, &hi) !=
            CUDNN_STATUS_SUCCESS) {
      continue;  // a knob cuDNN does not describe keeps its default
    }
    cudnnBackendGetAttribute(infos.raw[i], CUDNN_ATTR_KNOB_INFO_STRIDE, CUDNN_TYPE_INT64, 1, &got, &stride);
    if (stride <= 0) stride = 1;
    if (hi < lo) continue;
    // In 128 bits: cuDNN's range is not trusted to keep (hi - lo) or a step times the stride within int64.
    const __int128 count = (static_cast<__int128>(hi) - lo) / stride + 1;
    const __int128 take = std::min<__int128>(count, std::max(1, max_values));
    for (__int128 k = 0; k < take; ++k) {
      const __int128 step = take == 1 ? 0 : k * (count - 1) / (take - 1);
      r.values.push_back(static_cast<int64_t>(lo + step * stride));  // within [lo, hi]
    }
    ranges.push_back(std::move(r));
  }
  return ranges;
}

// An engine configuration and the knob choices it was given, kept alive together until its plan is finalized (as
// GraphBuilder keeps a graph's descriptors: cuDNN is not relied on to copy what a descriptor attribute points at).
struct Config {
  Descriptor config{CUDNN_BACKEND_ENGINECFG_DESCRIPTOR};
  std::vector<Descriptor> choices;
};

// The engine's configuration of these knob settings; none where cuDNN refuses the combination.
std::optional<Config> config_of(const Descriptor& engine,
                                const std::vector<std::pair<cudnnBackendKnobType_t, int64_t>>& settings) {
  Config c;
  c.config.set_desc(CUDNN_ATTR_ENGINECFG_ENGINE, engine);
  std::vector<cudnnBackendDescriptor_t> raw;
  for (const auto& [type, value] : settings) {
    Descriptor choice(CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR);
    choice.set(CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE, CUDNN_TYPE_KNOB_TYPE, 1, &type)
        .set_int(CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, value);
    if (choice.try_finalize() != CUDNN_STATUS_SUCCESS) return std::nullopt;
    raw.push_back(choice.get());
    c.choices.push_back(std::move(choice));
  }
  if (!raw.empty() &&
      cudnnBackendSetAttribute(c.config.get(), CUDNN_ATTR_ENGINECFG_KNOB_CHOICES, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                               static_cast<int64_t>(raw.size()), raw.data()) != CUDNN_STATUS_SUCCESS) {
    return std::nullopt;
  }
  if (c.config.try_finalize() != CUDNN_STATUS_SUCCESS) return std::nullopt;
  return std::optional<Config>(std::move(c));
}

// "type=value,..." as knob_choices writes it, read back; none for text it does not write.
std::optional<std::vector<std::pair<cudnnBackendKnobType_t, int64_t>>> parse_knobs(const std::string& knobs) {
  std::vector<std::pair<cudnnBackendKnobType_t, int64_t>> out;
  if (knobs == "none") return out;
  if (knobs.empty() || knobs.back() == ',') return std::nullopt;
  size_t at = 0;
  while (at < knobs.size()) {
    const size_t end = std::min(knobs.find(',', at), knobs.size());
    const std::string item = knobs.substr(at, end - at);
    const size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == item.size() || item.size() > 40) return std::nullopt;
    try {
      size_t used = 0;
      const long long type = std::stoll(item.substr(0, eq), &used);
      if (used != eq || type < 0 || type >= CUDNN_KNOB_TYPE_COUNTS) return std::nullopt;
      const std::string v = item.substr(eq + 1);
      const long long value = std::stoll(v, &used);
      if (used != v.size()) return std::nullopt;
      out.emplace_back(static_cast<cudnnBackendKnobType_t>(type), value);
    } catch (const std::exception&) {
      return std::nullopt;
    }
    at = end + 1;
  }
  if (out.empty() || out.size() > CUDNN_KNOB_TYPE_COUNTS) return std::nullopt;
  return out;
}

}  // namespace

std::vector<Plan> enumerated_plans(cudnnHandle_t handle, const Descriptor& graph, const Enumeration& limits) {
  int64_t engines = 0, got = 0;
  if (cudnnBackendGetAttribute(graph.get(), CUDNN_ATTR_OPERATIONGRAPH_ENGINE_GLOBAL_COUNT, CUDNN_TYPE_INT64, 1, &got,
                               &engines) != CUDNN_STATUS_SUCCESS) {
    return {};
  }
  // Each engine's configurations apart, then taken in turn (one of each engine, then a second of each, ...): an engine
  // with many settings that finalize does not crowd out those after it when max_plans cuts the list.
  std::vector<std::vector<Plan>> by_engine;
  std::string ignored;
  for (int64_t index = 0; index < engines; ++index) {
    const std::optional<Descriptor> engine = engine_for(graph, index);
    if (!engine || compiles_at_run_time(*engine)) continue;  // compiling each setting would take seconds
    const std::vector<KnobRange> ranges = knob_ranges(*engine, limits.max_knob_values);
    int64_t combinations = 1;
    for (const KnobRange& r : ranges) {
      combinations = std::min<int64_t>(combinations * static_cast<int64_t>(r.values.size()), int64_t{1} << 40);
    }
    // Every combination where they are few; otherwise a fixed pseudo-random sample of them (the same each run).
    const bool all = combinations <= limits.max_tries_per_engine;
    const int64_t tries = all ? combinations : limits.max_tries_per_engine;
    uint64_t state = 0x9E3779B97F4A7C15ull ^ static_cast<uint64_t>(index);
    std::vector<Plan> plans;
    for (int64_t t = 0; t < tries && static_cast<int>(plans.size()) < limits.max_plans; ++t) {
      std::vector<std::pair<cudnnBackendKnobType_t, int64_t>> settings;
      int64_t rest = t;
      for (const KnobRange& r : ranges) {
        const auto size = static_cast<int64_t>(r.values.size());
        int64_t pick = 0;
        if (all) {
          pick = rest % size;
          rest /= size;
        } else {
          state = state * 6364136223846793005ull + 1442695040888963407ull;
          pick = static_cast<int64_t>((state >> 33) % static_cast<uint64_t>(size));
        }
        settings.emplace_back(r.type, r.values[static_cast<size_t>(pick)]);
      }
      try {
        const std::optional<Config> config = config_of(*engine, settings);
        if (!config) continue;
        Plan p;
        describe_engine(config->config, &p);
        p.knobs = knob_choices(config->config);
        if (p.knobs.empty()) continue;  // a choice it could not name could not be kept or told apart
        // Told apart by the knobs cuDNN reads back, as text: the same configuration spelled otherwise is timed twice.
        const bool seen = std::any_of(plans.begin(), plans.end(), [&](const Plan& q) { return q.knobs == p.knobs; });
        if (seen) continue;
        if (!finalize(handle, config->config, &p, &ignored)) continue;
        if (p.workspace_bytes > limits.max_workspace_bytes) continue;
        p.enumerated = true;
        plans.push_back(std::move(p));
      } catch (const std::runtime_error&) {  // a cuDNN call's status for this setting: the next one may build
      }
    }
    if (!plans.empty()) by_engine.push_back(std::move(plans));
  }
  std::vector<Plan> out;
  for (size_t round = 0; static_cast<int>(out.size()) < limits.max_plans; ++round) {
    bool any = false;
    for (std::vector<Plan>& plans : by_engine) {
      if (round >= plans.size() || static_cast<int>(out.size()) >= limits.max_plans) continue;
      out.push_back(std::move(plans[round]));
      any = true;
    }
    if (!any) break;
  }
  return out;
}

std::optional<Plan> plan_from_knobs(cudnnHandle_t handle, const Descriptor& graph, int64_t engine,
                                    const std::string& knobs) {
  if (engine < 0) return std::nullopt;
  const auto settings = parse_knobs(knobs);
  if (!settings) return std::nullopt;
  const std::optional<Descriptor> e = engine_for(graph, engine);
  if (!e) return std::nullopt;
  const std::optional<Config> config = config_of(*e, *settings);
  if (!config) return std::nullopt;
  Plan p;
  describe_engine(config->config, &p);
  p.knobs = knob_choices(config->config);
  if (p.engine != engine || p.knobs != knobs) return std::nullopt;  // cuDNN read the settings otherwise
  std::string why;
  if (!finalize(handle, config->config, &p, &why)) return std::nullopt;
  return std::optional<Plan>(std::move(p));
}

std::vector<Plan> candidate_plans(cudnnHandle_t handle, const Descriptor& graph, int max_plans, std::string* why_none) {
  std::vector<Plan> plans;
  std::string why;
  // Modes A and B rank differently, and an engine's other knob settings (tile shapes) can beat the one listed first
  // for a shape: timing up to 16 of them made the fused step 0.6% faster on the H200 than mode A's first setting of
  // each engine (bench/results/2026-12-04-wgrad-stream.md).
  for (const cudnnBackendHeurMode_t mode : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_B, CUDNN_HEUR_MODE_FALLBACK}) {
    if (mode == CUDNN_HEUR_MODE_FALLBACK && !plans.empty()) break;  // only where A and B offer nothing that builds
    for (Descriptor& config : heuristic_configs(graph, mode, &why)) {
      if (static_cast<int>(plans.size()) >= max_plans) break;
      Plan p;
      describe_engine(config, &p);
      p.knobs = knob_choices(config);
      // The same configuration listed by both modes is timed once (unless cuDNN does not name its knobs).
      const bool seen = std::any_of(plans.begin(), plans.end(),
                                    [&](const Plan& q) { return q.engine == p.engine && q.knobs == p.knobs; });
      if (seen && p.engine >= 0 && !p.knobs.empty()) continue;
      if (finalize(handle, config, &p, &why)) plans.push_back(std::move(p));
    }
  }
  if (plans.empty() && why_none) *why_none = why.empty() ? "no engine configuration offered" : why.substr(1);
  return plans;
}

std::optional<Plan> plan_of(cudnnHandle_t handle, const Descriptor& graph, int64_t engine, const std::string& knobs,
                            int max_plans) {
  if (engine < 0 || knobs.empty()) return std::nullopt;
  // Where the search finds its candidates: the first configurations of modes A and B in its order (it finalizes up
  // to max_plans, passing over those that do not finalize: a window of four times that), and the fallback list (which
  // it takes where nothing of A and B finalizes). A file cannot pick a configuration far down a list.
  const int window = 4 * max_plans;
  std::string why;
  int listed = 0;
  std::vector<std::pair<int64_t, std::string>> seen;
  for (const cudnnBackendHeurMode_t mode : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_B, CUDNN_HEUR_MODE_FALLBACK}) {
    const bool fallback = mode == CUDNN_HEUR_MODE_FALLBACK;
    for (Descriptor& config : heuristic_configs(graph, mode, &why)) {
      if (!fallback && listed >= window) break;
      Plan p;
      describe_engine(config, &p);
      p.knobs = knob_choices(config);
      const std::pair<int64_t, std::string> id{p.engine, p.knobs};
      if (std::find(seen.begin(), seen.end(), id) != seen.end()) continue;
      seen.push_back(id);
      if (!fallback) ++listed;
      if (p.engine != engine || p.knobs != knobs) continue;
      if (finalize(handle, config, &p, &why)) return std::optional<Plan>(std::move(p));
      return std::nullopt;
    }
  }
  return std::nullopt;
}

Plan choose_plan(std::vector<Plan> candidates, const RunPlan& run, cudaStream_t stream, int warmup, int repeats) {
  if (candidates.empty()) throw std::runtime_error("cudnn_graph: no plan to choose from");
  if (repeats <= 0) return std::move(candidates.front());
  cuda::Event start, stop;
  int best = -1;
  std::string failures;
  for (size_t i = 0; i < candidates.size(); ++i) {
    try {
      for (int k = 0; k < warmup; ++k) run(candidates[i]);
    } catch (const std::runtime_error& e) {  // this engine refused to execute: the others may not
      failures += std::string(" engine ") + std::to_string(candidates[i].engine) + ": " + e.what() + ";";
      continue;
    }
    RN50_CUDA_CHECK(cudaEventRecord(start.event, stream));
    for (int k = 0; k < repeats; ++k) run(candidates[i]);
    RN50_CUDA_CHECK(cudaEventRecord(stop.event, stream));
    RN50_CUDA_CHECK(cudaEventSynchronize(stop.event));
    candidates[i].time_ms =
        static_cast<float>(cuda::elapsed_seconds(start.event, stop.event) * 1000.0 / static_cast<double>(repeats));
    if (best < 0 || candidates[i].time_ms < candidates[static_cast<size_t>(best)].time_ms) best = static_cast<int>(i);
  }
  if (best < 0) throw std::runtime_error("cudnn_graph: every candidate failed to execute:" + failures);
  return std::move(candidates[static_cast<size_t>(best)]);
}

void execute(cudnnHandle_t handle, const Plan& plan, const std::vector<int64_t>& uids,
             const std::vector<void*>& pointers, void* workspace) {
  if (uids.size() != pointers.size()) throw std::invalid_argument("cudnn_graph: uids and pointers differ in count");
  Descriptor pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
  pack.set_ints(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, uids)
      .set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, static_cast<int64_t>(pointers.size()),
           pointers.data())
      .set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace)
      .finalize();
  const cudnnStatus_t status = cudnnBackendExecute(handle, plan.plan->get(), pack.get());
  const int category = CUDNN_STATUS_CATEGORY(static_cast<int>(status));
  if (category == CUDNN_STATUS_BAD_PARAM || category == CUDNN_STATUS_NOT_SUPPORTED) {
    throw ExecuteRefused(std::string("cudnnBackendExecute: ") + cudnnGetErrorString(status));
  }
  RN50_CUDNN_CHECK(status);
}

std::vector<int64_t> nhwc_strides(const std::vector<int64_t>& dims) {
  if (dims.size() != 4) throw std::invalid_argument("cudnn_graph: nhwc_strides wants 4 dims");
  const int64_t c = dims[1], h = dims[2], w = dims[3];
  return {c * h * w, 1, w * c, c};
}

}  // namespace rn50::ops::cudnn_graph
