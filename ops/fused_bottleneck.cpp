// ops/fused_bottleneck.cpp: the bottleneck block's autograd function over the fused convolutions (weight gradients on
// a side stream), and its probe.
#include "ops/fused_bottleneck.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <torch/autograd.h>

#include <atomic>
#include <stdexcept>
#include <string>

#include "cuda/nvtx.h"
#include "ops/fused_batch_norm_backend.h"
#include "ops/fused_conv.h"
#include "ops/side_stream.h"

namespace rn50::ops {

struct BoundaryLink {
  // Block k's forward: bn3's input and statistics, its residual (block k's input), and block k's output address (that
  // block k+1's input must be). armed: block k can use a fused boundary (an identity residual). generation: unique
  // to the forward that armed it (one counter for the process, so no other link repeats it), so that a backward of an
  // older forward (two forwards before one backward) falls back. refused: cuDNN offered no plan at this boundary's
  // shape, so it is not tried again.
  int64_t generation = 0;
  bool armed = false;
  bool refused = false;
  BnSaved bn3;
  at::Tensor residual;
  const void* output = nullptr;
  // Block k+1's backward: bn3's backward weights and the masked gradient (also block k's residual gradient), with
  // that gradient's version counter then (an in-place change since, say autograd adding another consumer's gradient,
  // makes block k fall back).
  bool filled = false;
  DgradBn grad;
  int64_t grad_version = 0;

  void reset() {
    armed = filled = false;
    bn3 = {};
    residual = at::Tensor();
    output = nullptr;
    grad = {};
  }
};

std::shared_ptr<BoundaryLink> make_boundary_link() { return std::make_shared<BoundaryLink>(); }

void reset_boundary_link(BoundaryLink* link) {
  if (link != nullptr) link->reset();
}

namespace {
std::atomic<int64_t> generations{0};
std::atomic<int64_t> boundaries_filled{0}, boundaries_taken{0};
}  // namespace

BoundaryCounts fused_boundaries_run() { return {boundaries_filled.load(), boundaries_taken.load()}; }

namespace {

constexpr auto kChannelsLast = at::MemoryFormat::ChannelsLast;

// What the function needs besides its differentiable inputs: the running statistics (buffers updated in place,
// unseen by autograd) and the geometry.
struct BlockSettings {
  BatchNormState bn1, bn2, bn3, bnd;  // running statistics, counters, momentum, eps; weight and bias unused here
  int64_t stride = 1;
  bool downsample = false;
  bool wgrad_stream = true;
  PrologueRun prologue = PrologueRun::kTimed;
  std::string backward_range;
  std::shared_ptr<BoundaryLink> in_link, out_link;
};

// The links travel through autograd's saved data as addresses: the model owns them for as long as it runs the blocks.
int64_t link_word(const BoundaryLink* link) { return static_cast<int64_t>(reinterpret_cast<intptr_t>(link)); }
BoundaryLink* link_of(const c10::IValue& word) { return reinterpret_cast<BoundaryLink*>(word.toInt()); }

BatchNormState with_affine(const BatchNormState& s, const at::Tensor& weight, const at::Tensor& bias) {
  BatchNormState out = s;
  out.weight = weight;
  out.bias = bias;
  return out;
}

int64_t rows_of(const at::Tensor& y) { return y.size(0) * y.size(2) * y.size(3); }

// The block output's BatchNorm (and the downsample's) backward with rn50's own kernels: dReLU from the forward's bits
// where given (else from the output y), the residual's gradient written out.
detail::BackwardOut own_bn_backward(const at::Tensor& dy, const at::Tensor& x, const at::Tensor& y,
                                    const at::Tensor& weight, const at::Tensor& bias, const at::Tensor& mean,
                                    const at::Tensor& invstd, bool residual, bool relu, double eps,
                                    const at::Tensor& relu_bits = {}) {
  detail::BackwardIn in;
  in.dy = dy;
  in.x = x;
  in.y = y;
  in.relu_bits = relu_bits;
  in.weight = weight;
  in.bias = bias;
  in.mean = mean;
  in.invstd = invstd;
  in.has_residual = residual;
  in.relu = relu;
  in.training = true;
  in.eps = eps;
  in.kernels = BnKernels::kOwn;
  in.ran = detail::Ran::kOwn;
  return detail::backward(in);
}

class BottleneckFunction : public torch::autograd::Function<BottleneckFunction> {
 public:
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x,
                                                const at::Tensor& w1, const at::Tensor& w2, const at::Tensor& w3,
                                                const c10::optional<at::Tensor>& wd, const at::Tensor& g1,
                                                const at::Tensor& b1, const at::Tensor& g2, const at::Tensor& b2,
                                                const at::Tensor& g3, const at::Tensor& b3,
                                                const c10::optional<at::Tensor>& gd,
                                                const c10::optional<at::Tensor>& bd, const BlockSettings& s) {
    const ConvGeometry one{1, 0}, three{s.stride, 1}, down{s.stride, 0};
    const ConvStats c1 = conv_forward_stats(x, w1, one);
    const BnFinal f1 = bn_finalize(c1.sum, c1.sq_sum, rows_of(c1.y), with_affine(s.bn1, g1, b1));
    const ConvStats c2 = conv_forward_stats(c1.y, w2, three, {f1.scale, f1.shift, s.prologue});
    const BnFinal f2 = bn_finalize(c2.sum, c2.sq_sum, rows_of(c2.y), with_affine(s.bn2, g2, b2));
    const ConvStats c3 = conv_forward_stats(c2.y, w3, one, {f2.scale, f2.shift, s.prologue});
    const BnFinal f3 = bn_finalize(c3.sum, c3.sq_sum, rows_of(c3.y), with_affine(s.bn3, g3, b3));
    at::Tensor yd;
    BnFinal fd;
    if (s.downsample) {
      const ConvStats cd = conv_forward_stats(x, *wd, down);
      fd = bn_finalize(cd.sum, cd.sq_sum, rows_of(cd.y), with_affine(s.bnd, *gd, *bd));
      yd = cd.y;
    }
    // The block output with ReLU's mask as bits where C allows: bn3's backward reads them instead of the output, a
    // sixteenth of its bytes (its reduction is one of the step's largest passes).
    const at::Tensor residual = s.downsample ? yd : x;
    AppliedRelu applied;
    if (c3.y.size(1) % 8 == 0) {
      applied = bn_apply_relu_bits(c3.y, f3.scale, f3.shift, residual, fd.scale, fd.shift);
    } else {
      applied.y = bn_apply(c3.y, f3.scale, f3.shift, true, residual, fd.scale, fd.shift);
    }
    const at::Tensor& out = applied.y;
    // This block's output boundary: armed where the residual is the block's input itself (with a downsample it is a
    // scale-shift of yd, which the boundary graph does not take).
    BoundaryLink* out_link = s.out_link.get();
    if (out_link != nullptr) {
      out_link->reset();
      if (!s.downsample) {
        out_link->generation = generations.fetch_add(1) + 1;
        out_link->armed = true;
        out_link->bn3 = {c3.y, f3.mean, f3.invstd, g3, b3};
        out_link->residual = x;
        out_link->output = out.data_ptr();
      }
    }
    // The input boundary takes part only if this block's input is that block's output.
    BoundaryLink* in_link = s.in_link.get();
    if (in_link != nullptr && !(in_link->armed && in_link->output == x.data_ptr())) in_link = nullptr;
    // The convolutions' raw outputs and the block's output (and its ReLU bits): the activations in between are never
    // written.
    ctx->save_for_backward({x, w1, w2, w3, s.downsample ? *wd : at::Tensor(), c1.y, c2.y, c3.y, yd, out, g1, b1, g2, b2,
                            g3, b3, s.downsample ? *gd : at::Tensor(), s.downsample ? *bd : at::Tensor(),
                            applied.relu_bits});
    ctx->saved_data["stats"] = std::vector<at::Tensor>{f1.mean,  f1.invstd, f1.scale, f1.shift,  f2.mean, f2.invstd,
                                                       f2.scale, f2.shift,  f3.mean,  f3.invstd, fd.mean, fd.invstd};
    ctx->saved_data["stride"] = s.stride;
    ctx->saved_data["downsample"] = s.downsample;
    ctx->saved_data["wgrad_stream"] = s.wgrad_stream;
    ctx->saved_data["prologue"] = static_cast<int64_t>(s.prologue);
    ctx->saved_data["range"] = s.backward_range;
    ctx->saved_data["eps3"] = s.bn3.eps;
    ctx->saved_data["in_link"] = link_word(in_link);
    ctx->saved_data["in_generation"] = in_link != nullptr ? in_link->generation : int64_t{0};
    if (out_link != nullptr && !out_link->armed) out_link = nullptr;
    ctx->saved_data["out_link"] = link_word(out_link);
    ctx->saved_data["out_generation"] = out_link != nullptr ? out_link->generation : int64_t{0};
    ctx->saved_data["epsd"] = s.bnd.eps;
    return {out};
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    const auto v = ctx->get_saved_variables();
    const at::Tensor &x = v[0], &w1 = v[1], &w2 = v[2], &w3 = v[3], &wd = v[4], &y1 = v[5], &y2 = v[6], &y3 = v[7],
                     &yd = v[8], &out = v[9], &g1 = v[10], &b1 = v[11], &g2 = v[12], &b2 = v[13], &g3 = v[14],
                     &b3 = v[15], &gd = v[16], &bd = v[17], &relu_bits = v[18];
    const auto st = ctx->saved_data["stats"].toTensorVector();
    const int64_t stride = ctx->saved_data["stride"].toInt();
    const bool downsample = ctx->saved_data["downsample"].toBool();
    const ConvGeometry one{1, 0}, three{stride, 1}, down{stride, 0};
    const auto prologue = static_cast<PrologueRun>(ctx->saved_data["prologue"].toInt());
    // The backward runs on autograd's device thread: the block's range is pushed there, around its kernels.
    const std::string range = ctx->saved_data["range"].toStringRef();
    const cuda::NvtxRange profiled(range.empty() ? "bottleneck backward" : range.c_str());
    const at::Tensor dout = grad_outputs[0].contiguous(kChannelsLast);
    // The data gradients are the chain the next block waits for; each weight gradient needs only its layer's output
    // gradient, so it can run beside that chain. Joined before returning: autograd hands the weight gradients on at
    // once, and the locals the side stream reads must not be freed under it.
    SideStream side(dout.get_device(), ctx->saved_data["wgrad_stream"].toBool());

    // The block output: dReLU, bn3's backward and the residual's gradient g, then the downsample's BatchNorm. Where the
    // next block's input gradient already did bn3's part (the boundary graph), dout is g and only dx remains.
    BoundaryLink* out_link = link_of(ctx->saved_data["out_link"]);
    if (out_link != nullptr && out_link->generation != ctx->saved_data["out_generation"].toInt()) out_link = nullptr;
    detail::BackwardOut o3;
    if (out_link != nullptr && out_link->filled && out_link->grad.dz.data_ptr() == dout.data_ptr() &&
        out_link->grad_version == dout._version()) {
      boundaries_taken.fetch_add(1);
      o3.dx = dbn_apply(out_link->grad, y3);
      o3.dweight = out_link->grad.dweight;
      o3.dbias = out_link->grad.dbias;
      o3.dresidual = dout;
    } else {
      o3 = own_bn_backward(dout, y3, out, g3, b3, st[8], st[9], true, true, ctx->saved_data["eps3"].toDouble(),
                           relu_bits);
    }
    if (out_link != nullptr) out_link->reset();  // its tensors go as this backward's do
    at::Tensor dyd, dgd, dbd, dwd;
    if (downsample) {
      const detail::BackwardOut od = own_bn_backward(o3.dresidual, yd, {}, gd, bd, st[10], st[11], false, false,
                                                     ctx->saved_data["epsd"].toDouble());
      dyd = od.dx;
      dgd = od.dweight;
      dbd = od.dbias;
      dwd = side.run([&] { return conv_backward_filter(x, dyd, wd.sizes(), down); });
    }
    // conv3: weight gradient with bn2's scale-bias-ReLU recomputed in the prologue; data gradient with bn2's dReLU
    // and backward weights in the epilogue, then bn2's input gradient.
    const at::Tensor dw3 = side.run([&] {
      return conv_backward_filter(y2, o3.dx, w3.sizes(), one, {st[6], st[7], prologue});
    });
    const DgradBn d2 = conv_backward_data_bn(o3.dx, w3, {y2, st[4], st[5], g2, b2}, one);
    const at::Tensor dy2 = dbn_apply(d2, y2);
    const at::Tensor dw2 = side.run([&] {
      return conv_backward_filter(y1, dy2, w2.sizes(), three, {st[2], st[3], prologue});
    });
    const DgradBn d1 = conv_backward_data_bn(dy2, w2, {y1, st[0], st[1], g1, b1}, three);
    const at::Tensor dy1 = dbn_apply(d1, y1);
    const at::Tensor dw1 = side.run([&] { return conv_backward_filter(x, dy1, w1.sizes(), one); });
    // The block input's two gradients summed inside the second data gradient (cuDNN's beta = 1), not by autograd; at
    // a fused boundary that graph also takes the previous block's ReLU and bn3's backward weights, and x's gradient
    // is returned masked (that block's g: it masks its gradient first anyway, and x has no other consumer).
    at::Tensor dx = downsample ? conv_backward_data(dyd, wd, x.sizes(), down) : o3.dresidual;
    BoundaryLink* in_link = link_of(ctx->saved_data["in_link"]);
    bool boundary = false;
    if (in_link != nullptr && in_link->armed && !in_link->refused &&
        in_link->generation == ctx->saved_data["in_generation"].toInt()) {
      try {
        in_link->grad = conv_backward_data_add_bn(dy1, w1, dx, in_link->residual, in_link->bn3, one);
        in_link->grad_version = in_link->grad.dz._version();
        in_link->filled = boundary = true;
        boundaries_filled.fetch_add(1);
        dx = in_link->grad.dz;
      } catch (const NoPlanError&) {
        in_link->refused = true;  // no plan at this shape: the two passes apart from now on, as without a link
      }
    }
    if (!boundary) dx = conv_backward_data(dy1, w1, x.sizes(), one, dx);
    side.join();
    return {dx,         dw1,      dw2,        dw3,      dwd, d1.dweight, d1.dbias,
            d2.dweight, d2.dbias, o3.dweight, o3.dbias, dgd, dbd,        at::Tensor()};
  }
};

at::Tensor half_weight(const at::Tensor& w, const at::Tensor& x) {
  return w.to(x.scalar_type()).contiguous(kChannelsLast);
}

c10::optional<at::Tensor> maybe(const at::Tensor& t) {
  return t.defined() ? c10::optional<at::Tensor>(t) : c10::nullopt;
}

}  // namespace

std::string bottleneck_input_unsupported_reason(const at::Tensor& x) {
  const std::string why = fused_conv_unsupported_reason(x);
  if (!why.empty()) return why;
  if (x.scalar_type() != at::kHalf) {
    return "bfloat16: cuDNN's fused data- and weight-gradient patterns have no bfloat16 engines";
  }
  return "";
}

// The fused convolutions (ops/fused_conv.h) build dense, undilated cuDNN graphs only.
std::string bottleneck_geometry_unsupported_reason(const BottleneckParams& p) {
  if (p.groups != 1) {
    return "grouped 3x3 convolution (groups " + std::to_string(p.groups) + "): the fused convolutions are dense only";
  }
  if (p.dilation != 1) {
    return "dilated 3x3 convolution (dilation " + std::to_string(p.dilation) +
           "): the fused convolutions are undilated only";
  }
  return "";
}

std::string bottleneck_unsupported_reason(const at::Tensor& x, const BottleneckParams& p) {
  std::string why = bottleneck_geometry_unsupported_reason(p);
  if (!why.empty()) return why;
  why = bottleneck_input_unsupported_reason(x);
  if (!why.empty()) return why;
  const bool down = p.wd.defined();
  for (const BatchNormState* bn : {&p.bn1, &p.bn2, &p.bn3, down ? &p.bnd : &p.bn3}) {
    if (!bn->training) return "evaluation";
    if (!bn->running_mean.defined() || !bn->running_var.defined()) return "BatchNorm without running statistics";
  }
  return "";
}

at::Tensor bottleneck_forward(const at::Tensor& x, const BottleneckParams& p) {
  const std::string why = bottleneck_unsupported_reason(x, p);
  if (!why.empty()) throw std::invalid_argument("fused bottleneck: " + why);
  BlockSettings s{
      p.bn1,     p.bn2,     p.bn3, p.bnd, p.stride, p.wd.defined(), p.wgrad_stream, p.prologue, p.backward_range,
      p.in_link, p.out_link};
  const bool down = p.wd.defined();
  return BottleneckFunction::apply(x, half_weight(p.w1, x), half_weight(p.w2, x), half_weight(p.w3, x),
                                   down ? maybe(half_weight(p.wd, x)) : c10::nullopt, p.bn1.weight, p.bn1.bias,
                                   p.bn2.weight, p.bn2.bias, p.bn3.weight, p.bn3.bias, maybe(p.bnd.weight),
                                   maybe(p.bnd.bias), s)[0];
}

std::string prepare_bottleneck(const at::Tensor& x, const BottleneckParams& p) {
  const std::string why = bottleneck_unsupported_reason(x, p);
  if (!why.empty()) return why;
  // Copies of everything the block would change: parameters detached (no gradient reaches the real ones), running
  // statistics and counters cloned.
  auto copy_bn = [](const BatchNormState& bn) {
    BatchNormState c = bn;
    if (!bn.weight.defined()) return c;
    c.weight = bn.weight.detach().clone().requires_grad_(true);
    c.bias = bn.bias.detach().clone().requires_grad_(true);
    c.running_mean = bn.running_mean.detach().clone();
    c.running_var = bn.running_var.detach().clone();
    if (bn.num_batches_tracked.defined()) c.num_batches_tracked = bn.num_batches_tracked.detach().clone();
    return c;
  };
  auto copy_w = [](const at::Tensor& w) {
    return w.defined() ? w.detach().clone().requires_grad_(true) : at::Tensor();
  };
  try {
    const c10::AutoGradMode grad_mode(true);  // the probe's backward builds the backward plans
    BottleneckParams q{copy_w(p.w1),   copy_w(p.w2),   copy_w(p.w3),   copy_w(p.wd), copy_bn(p.bn1),
                       copy_bn(p.bn2), copy_bn(p.bn3), copy_bn(p.bnd), p.stride,     p.groups,
                       p.dilation,     p.wgrad_stream, p.prologue,     p.backward_range};
    const at::Tensor input = x.detach().clone(kChannelsLast).requires_grad_(true);
    const at::Tensor y = bottleneck_forward(input, q);
    std::vector<at::Tensor> wrt{input, q.w1, q.w2, q.w3};
    if (q.wd.defined()) wrt.push_back(q.wd);
    torch::autograd::grad({y}, wrt, {at::ones_like(y)});
  } catch (const NoPlanError& e) {
    return e.what();  // cuDNN refuses a pattern at this shape: the block runs fusion: bn; anything else propagates
  }
  return "";
}

}  // namespace rn50::ops
