// tests/parallel/test_data_parallel.cpp: data parallel across real processes: two ranks at batch B against one
// process at batch 2B (ResNet-18, and each port of another architecture), the fused steps (fusion: conv and bn) of two
// ranks sharing one GPU against one process, and (two GPUs) graph-replayed against eager data-parallel steps.
//
// The test re-runs its own binary as the ranks (filter DataParallelWorker.*), with torchrun's variables set;
// each rank writes its final weights to a file that the parent compares. RN50_DP_DEVICE=cuda runs the
// ranks on GPUs (cuda:LOCAL_RANK modulo the GPUs there are; NCCL with a GPU per rank, Gloo on a shared one); the
// default is the CPU over Gloo.
#include <ATen/Context.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <torch/torch.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/errors.h"
#include "core/launch_env.h"
#include "cuda/cuda_support.h"
#include "cuda/device_ops.h"
#include "models/model.h"
#include "parallel/distributed.h"
#include "parallel/grad_sync.h"
#include "tests/support/temp_dir.h"
#include "trainer/executor.h"
#include "trainer/sgd.h"
#include "trainer/step_timer.h"
#include "trainer/train_step.h"

extern char** environ;

namespace rn50 {
namespace {

constexpr int kSteps = 4;
constexpr int kBatch = 4;  // per rank
constexpr int kImage = 32;
constexpr int kClasses = 4;
constexpr const char* kModelVariable = "RN50_DP_MODEL";  // the model the ranks and the reference train
// A worker that cannot join (no Gloo in this build) says so.
constexpr int kSkipExitCode = 77;

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v ? v : fallback;
}

// A rank's device: the CPU, or its own GPU where there are enough, else a shared one (as rn50 train picks them).
c10::Device test_device(int local_rank) {
  if (env_or("RN50_DP_DEVICE", "cpu") != "cuda") return c10::Device(c10::kCPU);
  const int gpus = std::max(1, cuda::device_count());
  return c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(local_rank % gpus));
}

std::string dp_model() { return env_or(kModelVariable, "resnet18"); }

// The fused modes ("fused_conv", "fused_bn"): ResNet-50 (bottleneck blocks, which fusion: conv fuses whole) at 64 px,
// fp16 autocast, channels-last, BatchNorm in training mode, as the optimized configuration trains.
bool fused_mode(const std::string& mode) { return mode.rfind("fused_", 0) == 0; }
constexpr int kFusedImage = 64;
constexpr int kFusedSteps = 2;

std::shared_ptr<models::Classifier> make_fused_model(const std::string& mode, c10::Device device) {
  torch::manual_seed(7);
  models::ModelOptions options{kClasses, false};
  options.fusion = mode == "fused_conv" ? models::Fusion::kConv : models::Fusion::kBatchNorm;
  auto model = models::create("resnet50", options);
  model->to(device);
  models::to_channels_last(*model);
  return model;
}

// Step `step`'s global batch for the fused modes: 2B images at 64 px.
std::pair<at::Tensor, at::Tensor> fused_global_batch(int step, c10::Device device) {
  auto gen = at::detail::createCPUGenerator(2000 + step);
  const at::Tensor x = at::randn({2 * kBatch, 3, kFusedImage, kFusedImage}, gen);
  const at::Tensor y = at::randint(kClasses, {2 * kBatch}, gen, at::TensorOptions().dtype(at::kLong));
  return {x.to(device).contiguous(at::MemoryFormat::ChannelsLast), y.to(device)};
}

// SGD steps through the fused ops; returns the last step's gradients (averaged over the ranks). BatchNorm normalises
// over each rank's own images (as in PyTorch's DDP without SyncBatchNorm), so the one process that must match the
// ranks takes the same global batch as the ranks' two halves in turn, their gradients summed and halved (`buckets`
// null), where the ranks all-reduce theirs (sum, then halve). A small rate: at 0.05 the weights grew 45-fold in 3
// steps and the run turned chaotic (any rounding difference grew to order one).
std::vector<at::Tensor> fused_steps(models::Classifier& model, trainer::Sgd& sgd, parallel::GradientBuckets* buckets,
                                    int rank, int world, c10::Device device) {
  std::vector<at::Tensor> grads;
  trainer::ExecutorOptions options;
  options.autocast = at::kHalf;
  trainer::Executor executor(model, options);
  (void)world;  // two ranks: the halves are rank 0's and rank 1's
  for (int step = 0; step < kFusedSteps; ++step) {
    const auto [x, y] = fused_global_batch(step, device);
    if (buckets) {
      buckets->zero_gradients();
      executor.forward_backward(x.narrow(0, rank * kBatch, kBatch), y.narrow(0, rank * kBatch, kBatch), nullptr);
      buckets->finish();
    } else {
      sgd.zero_grad();
      for (int half = 0; half < 2; ++half) {
        executor.forward_backward(x.narrow(0, half * kBatch, kBatch), y.narrow(0, half * kBatch, kBatch), nullptr);
      }
      torch::NoGradGuard no_grad;
      for (auto& g : sgd.grads()) g.div_(2);
    }
    grads.clear();
    for (const auto& g : sgd.grads()) grads.push_back(g.detach().to(at::kCPU).contiguous());
    sgd.set_lr(0.002);
    sgd.step(nullptr);
  }
  return grads;
}

// ViT-B/16 takes 224 px only, with fewer images and steps (RN50_DP_MODEL=vit_b_16 runs it; no test asks for it).
int64_t image_size() { return dp_model() == "vit_b_16" ? 224 : kImage; }
int64_t batch_per_rank() { return dp_model() == "vit_b_16" ? 2 : kBatch; }
int steps() { return dp_model() == "vit_b_16" ? 3 : kSteps; }

// The global batch of step `step`: 2B images and labels drawn from a fixed seed; rank r takes rows [rB, (r+1)B).
std::pair<at::Tensor, at::Tensor> global_batch(int step, c10::Device device) {
  auto gen = at::detail::createCPUGenerator(1000 + step);
  const int64_t size = image_size(), batch = 2 * batch_per_rank();
  const at::Tensor x = at::randn({batch, 3, size, size}, gen);
  const at::Tensor y = at::randint(kClasses, {batch}, gen, at::TensorOptions().dtype(at::kLong));
  return {x.to(device), y.to(device)};
}

std::shared_ptr<models::Classifier> make_model(c10::Device device) {
  torch::manual_seed(7);
  auto model = models::create(dp_model(), {kClasses, false});
  model->to(device);
  return model;
}

std::vector<at::Tensor> weights_of(models::Classifier& model) {
  std::vector<at::Tensor> out;
  for (const auto& p : model.parameters()) out.push_back(p.detach().to(at::kCPU).contiguous());
  return out;
}

// Plain SGD steps in eval mode (BatchNorm's running statistics, no dropout or stochastic depth, so a batch's gradient
// is the mean of its images' gradients and the split across ranks is exact up to rounding).
void exact_steps(models::Classifier& model, trainer::Sgd& sgd, parallel::GradientBuckets* buckets, int rank, int world,
                 c10::Device device) {
  model.eval();
  for (int step = 0; step < steps(); ++step) {
    auto [x, y] = global_batch(step, device);
    const int64_t per_rank = x.size(0) / world;
    x = x.narrow(0, rank * per_rank, per_rank);
    y = y.narrow(0, rank * per_rank, per_rank);
    if (buckets) {
      buckets->zero_gradients();
    } else {
      sgd.zero_grad();
    }
    torch::nn::functional::cross_entropy(model.forward(x), y).backward();
    if (buckets) buckets->finish();
    sgd.set_lr(0.05);
    sgd.step(nullptr);
  }
}

// Deterministic cuDNN and no TF32 (which alone leaves 1e-3 relative differences between batch sizes).
void exact_math() {
  auto& ctx = at::globalContext();
  ctx.setDeterministicCuDNN(true);
  ctx.setAllowTF32CuDNN(false);
  ctx.setAllowTF32CuBLAS(false);
}

// ---- the ranks --------------------------------------------------------------------------------------------

TEST(DataParallelWorker, Run) {
  const std::string out = env_or("RN50_DP_OUT", "");
  if (out.empty()) GTEST_SKIP() << "runs only as a rank started by the DataParallel tests";
  const LaunchEnv launch = read_launch_env();
  const c10::Device device = test_device(launch.local_rank);
  if (device.is_cuda()) cuda::use_side_stream(device.index());
  exact_math();
  parallel::DistributedOptions options;
  options.timeout_s = 60;
  const std::string backend = env_or("RN50_DP_BACKEND", "auto");  // "shm": shared memory asked for
  if (backend == "shm") options.backend = parallel::DistributedOptions::Backend::kShm;
  std::unique_ptr<parallel::Distributed> dist;
  try {
    dist = std::make_unique<parallel::Distributed>(launch, options, device);
  } catch (const ConfigError& e) {
    std::fprintf(stderr, "cannot join: %s\n", e.what());
    std::exit(kSkipExitCode);
  }
  const std::string mode = env_or("RN50_DP_MODE", "exact");
  auto model = fused_mode(mode) ? make_fused_model(mode, device) : make_model(device);
  // As runs with channels_last have them: gradient views with channels-last strides.
  if (!fused_mode(mode) && mode != "exact") {
    torch::NoGradGuard no_grad;
    for (auto& p : model->parameters()) {
      if (p.dim() == 4) p.set_data(p.contiguous(at::MemoryFormat::ChannelsLast));
    }
  }
  if (backend == "shm") {
    EXPECT_EQ(dist->comm().backend(), "shm");
  }
  {
    // Rank 0's weights reach every rank (rank 1's differ before), channels-last ones included.
    torch::NoGradGuard no_grad;
    if (dist->rank() != 0) {
      for (auto& p : model->parameters()) p.add_(1.0);
    }
    dist->comm().broadcast_from_rank0(model->parameters());
    at::Tensor count = at::full({3}, dist->rank() + 1.0, at::TensorOptions(device));
    dist->comm().sum(count);
    EXPECT_TRUE(at::equal(count.cpu(), at::full({3}, 3.0))) << count;  // 1 + 2
  }
  trainer::Sgd sgd(*model, 0.9, 1e-4, false);
  // 1 MB buckets: ResNet-18's 45 MB of gradients in many buckets, so that their order matters.
  parallel::GradientBuckets buckets(model->parameters(), dist->comm(), 1 << 20);
  EXPECT_GT(buckets.num_buckets(), 10);
  // Ranks sharing a GPU talk over Gloo (NCCL refuses them); a GPU each, over NCCL.
  std::fprintf(stderr, "rank %d on %s over %s (%s)\n", dist->rank(), device.str().c_str(),
               dist->comm().backend().c_str(), dist->backend_reason().c_str());
  if (fused_mode(mode)) {
    torch::save(fused_steps(*model, sgd, &buckets, dist->rank(), dist->world_size(), device),
                out + "/grads" + std::to_string(dist->rank()) + ".pt");
  } else if (mode == "exact") {
    exact_steps(*model, sgd, &buckets, dist->rank(), dist->world_size(), device);
  } else {  // "eager" or "graph": the training step as runs use it (bf16, channels-last, BatchNorm training)
    trainer::StepOptions step_options;
    step_options.batch_size = kBatch;
    step_options.image_size = kImage;
    step_options.input_dtype = at::kBFloat16;
    step_options.channels_last = true;
    step_options.cuda_graph = mode == "graph";
    step_options.executor.autocast = at::kBFloat16;
    step_options.executor.label_smoothing = 0.1;  // the configuration's default, as before
    auto timer = trainer::make_cuda_step_timer();
    trainer::TrainStep train_step(*model, sgd, step_options, device, *timer);
    train_step.set_gradient_sync(&buckets);
    for (int step = 0; step < 2 * kSteps; ++step) {
      const auto [x, y] = global_batch(step, device);
      train_step.images().copy_(x.narrow(0, dist->rank() * kBatch, kBatch));
      train_step.labels().copy_(y.narrow(0, dist->rank() * kBatch, kBatch));
      timer->begin_step();
      train_step.run(0.05);
    }
    timer->take_totals();
    EXPECT_EQ(train_step.graphed(), mode == "graph") << train_step.graph_status();
  }
  torch::save(weights_of(*model), out + "/rank" + std::to_string(dist->rank()) + ".pt");
}

// ---- the parent ---------------------------------------------------------------------------------------------

std::string this_binary() {
  char buffer[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buffer, sizeof(buffer) - 1);
  return n > 0 ? std::string(buffer, static_cast<size_t>(n)) : "";
}

// (No std::filesystem here: see tests/support/temp_dir.h.)
class DataParallel : public ::testing::Test {
 public:
  void SetUp() override {
    if (std::getenv("RN50_DP_OUT")) GTEST_SKIP() << "a rank does not start ranks";
    ASSERT_FALSE(dir_.path().empty());
  }

  // Starts two ranks of this binary in `mode`; returns their exit codes.
  std::vector<int> run_two_ranks(const std::string& mode, const std::string& out, int port) {
    const std::string model = std::string(kModelVariable) + "=" + dp_model();
    std::vector<pid_t> pids;
    for (int rank = 0; rank < 2; ++rank) {
      std::vector<std::string> env;
      for (char** e = environ; *e; ++e) env.emplace_back(*e);
      for (const std::string& v :
           {"RANK=" + std::to_string(rank), "LOCAL_RANK=" + std::to_string(rank), std::string("WORLD_SIZE=2"),
            std::string("MASTER_ADDR=127.0.0.1"), "MASTER_PORT=" + std::to_string(port), "RN50_DP_OUT=" + out,
            "RN50_DP_MODE=" + mode, model}) {
        env.push_back(v);
      }
      std::vector<char*> envp;
      for (auto& v : env) envp.push_back(v.data());
      envp.push_back(nullptr);
      std::string self = this_binary(), filter = "--gtest_filter=DataParallelWorker.*";
      char* argv[] = {self.data(), filter.data(), nullptr};
      pid_t pid = -1;
      EXPECT_EQ(posix_spawn(&pid, self.c_str(), nullptr, nullptr, argv, envp.data()), 0);
      pids.push_back(pid);
    }
    std::vector<int> codes;
    for (const pid_t pid : pids) {
      int status = 0;
      waitpid(pid, &status, 0);
      codes.push_back(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
    }
    return codes;
  }

  std::vector<at::Tensor> load(const std::string& file) {
    std::vector<at::Tensor> t;
    torch::load(t, file);
    return t;
  }

  testing::TempDir dir_;
};

double max_relative_difference(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = (a[i].to(at::kDouble) - b[i].to(at::kDouble)).norm().item<double>() /
                     (b[i].to(at::kDouble).norm().item<double>() + 1e-12);
    worst = std::max(worst, d);
  }
  return worst;
}

// ||a - b|| / ||b|| over all tensors together: unlike the worst tensor's relative difference, not dominated by a tensor
// near zero (a BatchNorm bias two small steps from its zero start).
double global_relative_difference(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff += (a[i].to(at::kDouble) - b[i].to(at::kDouble)).pow(2).sum().item<double>();
    norm += b[i].to(at::kDouble).pow(2).sum().item<double>();
  }
  return std::sqrt(diff) / (std::sqrt(norm) + 1e-30);
}

int port_for(int offset) { return 20000 + (::getpid() * 7 + offset) % 20000; }

// Tolerance: 1e-5 relative after 4 steps (fp32; the ranks' mean of two half-batch gradients against one
// full-batch gradient differ only in the order of additions). The ranks themselves must agree exactly.
void expect_two_ranks_match_one_process(DataParallel& test, const std::string& dir, int port);

TEST_F(DataParallel, TwoRanksAtBatchBMatchOneProcessAtBatch2B) {
  expect_two_ranks_match_one_process(*this, dir_.path(), port_for(0));
}

// The same for the ports of other architectures (grouped convolutions, LayerNorm with its fused ops' CPU path,
// depthwise convolutions with squeeze-excite), each in its own folder and port. ViT-B/16 is left out: at its 224 px a
// rank took over 6 minutes of this CPU for 3 steps of 2 images (2026-12-03), and its per-sample ops (LayerNorm,
// attention) split across ranks as ConvNeXt's do.
TEST_F(DataParallel, EachPortsTwoRanksMatchOneProcess) {
  if (env_or("RN50_DP_DEVICE", "cpu") == "cuda") GTEST_SKIP() << "the ports run on the CPU over Gloo";
  const std::string before = env_or(kModelVariable, "");
  int offset = 1;
  for (const char* model : {"resnext50_32x4d", "efficientnet_b0", "convnext_tiny"}) {
    SCOPED_TRACE(model);
    ::setenv(kModelVariable, model, 1);
    testing::TempDir dir;
    expect_two_ranks_match_one_process(*this, dir.path(), port_for(offset++));
  }
  if (before.empty()) {
    ::unsetenv(kModelVariable);
  } else {
    ::setenv(kModelVariable, before.c_str(), 1);
  }
}

void expect_two_ranks_match_one_process(DataParallel& test, const std::string& dir, int port) {
  const bool cuda = env_or("RN50_DP_DEVICE", "cpu") == "cuda";
  if (cuda && torch::cuda::device_count() < 2) GTEST_SKIP() << "needs two GPUs";
  const auto codes = test.run_two_ranks("exact", dir, port);
  if (codes[0] == kSkipExitCode) GTEST_SKIP() << "this build cannot run data parallel on this device";
  ASSERT_EQ(codes, std::vector<int>({0, 0}));
  const c10::Device device = test_device(0);
  exact_math();
  auto model = make_model(device);
  trainer::Sgd sgd(*model, 0.9, 1e-4, false);
  exact_steps(*model, sgd, nullptr, 0, 1, device);
  const auto reference = weights_of(*model);
  const auto rank0 = test.load(dir + "/rank0.pt"), rank1 = test.load(dir + "/rank1.pt");
  ASSERT_EQ(rank0.size(), reference.size());
  EXPECT_EQ(max_relative_difference(rank0, rank1), 0.0) << "the ranks' weights differ";
  EXPECT_LT(max_relative_difference(rank0, reference), 1e-5);
  // The steps changed the weights: a comparison of untouched weights could not fail.
  EXPECT_GT(max_relative_difference(reference, weights_of(*make_model(device))), 1e-4);
}

// The same through shared memory (dist_backend shm) instead of Gloo: what ranks sharing a GPU use.
TEST_F(DataParallel, TwoRanksOverSharedMemoryMatchOneProcess) {
  if (env_or("RN50_DP_DEVICE", "cpu") == "cuda") GTEST_SKIP() << "on GPUs, FusedStepsOfTwoRanksMatchOneProcess";
  ::setenv("RN50_DP_BACKEND", "shm", 1);
  expect_two_ranks_match_one_process(*this, dir_.path(), port_for(5));
  ::unsetenv("RN50_DP_BACKEND");
}

// Two ranks on one GPU (shared memory), or on two (NCCL), each step through fusion: conv's and fusion: bn's fused ops,
// against one process that takes the same halves in turn (see fused_steps): the last step's averaged gradients and the
// weights after it, each as one vector (global_relative_difference). Deterministic cuDNN in every process: fusion: conv
// then takes the heuristics' first deterministic plan instead of the fastest by timing, which can differ between
// processes. Under deterministic cuDNN fusion: conv's epilogue sums are recomputed by ordered reductions too, so both
// paths repeat bit for bit (the one process run twice: 0 on the H200, 2026-12-04). The ranks must agree exactly.
// Against the one process: exactly over shared memory (one GPU), which adds the ranks' gradients in rank order as the
// one process does; over NCCL (two GPUs) its average rounds otherwise, so the path's own spread times 2 plus 1e-3
// relative (fp16 autocast; BatchNorm over 16 values a channel at layer4 amplifies rounding). The steps must have moved
// conv1's weights by more than 1e-4 relative.
TEST_F(DataParallel, FusedStepsOfTwoRanksMatchOneProcess) {
  if (env_or("RN50_DP_DEVICE", "cpu") != "cuda" || cuda::device_count() < 1) GTEST_SKIP() << "the fused ops need a GPU";
  int offset = 10;
  for (const std::string mode : {"fused_conv", "fused_bn"}) {
    SCOPED_TRACE(mode);
    testing::TempDir dir;
    const auto codes = run_two_ranks(mode, dir.path(), port_for(offset++));
    ASSERT_EQ(codes, std::vector<int>({0, 0}));
    const c10::Device device = test_device(0);
    exact_math();
    std::vector<at::Tensor> reference, grads, again_weights, again_grads;
    for (int run = 0; run < 2; ++run) {
      auto model = make_fused_model(mode, device);
      trainer::Sgd sgd(*model, 0.9, 1e-4, false);
      auto g = fused_steps(*model, sgd, nullptr, 0, 1, device);
      (run == 0 ? grads : again_grads) = std::move(g);
      (run == 0 ? reference : again_weights) = weights_of(*model);
    }
    const auto rank0 = load(dir.path() + "/rank0.pt"), rank1 = load(dir.path() + "/rank1.pt");
    const auto grads0 = load(dir.path() + "/grads0.pt"), grads1 = load(dir.path() + "/grads1.pt");
    ASSERT_EQ(rank0.size(), reference.size());
    ASSERT_EQ(grads0.size(), grads.size());
    EXPECT_EQ(max_relative_difference(rank0, rank1), 0.0) << "the ranks' weights differ";
    EXPECT_EQ(max_relative_difference(grads0, grads1), 0.0) << "the ranks' gradients differ";
    const double spread =
        std::max(global_relative_difference(again_grads, grads), global_relative_difference(again_weights, reference));
    const double grad_difference = global_relative_difference(grads0, grads);
    const double weight_difference = global_relative_difference(rank0, reference);
    const double moved = max_relative_difference({reference[0]}, {weights_of(*make_fused_model(mode, device))[0]});
    std::printf(
        "[ diff     ] %s: two ranks against one process: gradients %.3g, weights %.3g relative (worst tensor "
        "%.3g, %.3g); one process against itself %.3g (worst tensor %.3g); conv1's weights moved %.3g\n",
        mode.c_str(), grad_difference, weight_difference, max_relative_difference(grads0, grads),
        max_relative_difference(rank0, reference), spread, max_relative_difference(again_grads, grads), moved);
    EXPECT_EQ(spread, 0.0) << "one process run twice differs: the fused path is not deterministic";
    const double tolerance = cuda::device_count() < 2 ? 0.0 : 2 * spread + 1e-3;
    EXPECT_LE(grad_difference, tolerance);
    EXPECT_LE(weight_difference, tolerance);
    EXPECT_GT(moved, 1e-4);
  }
}

// Two GPUs: data-parallel steps replayed from a CUDA graph (all-reduces inside the graph) end with the weights
// of eager data-parallel steps. Tolerance: 2e-3 relative (bf16; both runs use deterministic cuDNN).
TEST_F(DataParallel, GraphedStepsMatchEagerSteps) {
  if (env_or("RN50_DP_DEVICE", "cpu") != "cuda" || torch::cuda::device_count() < 2) GTEST_SKIP() << "needs two GPUs";
  ::mkdir(dir_.file("eager").c_str(), 0755);
  ::mkdir(dir_.file("graph").c_str(), 0755);
  ASSERT_EQ(run_two_ranks("eager", dir_.file("eager"), port_for(1)), std::vector<int>({0, 0}));
  ASSERT_EQ(run_two_ranks("graph", dir_.file("graph"), port_for(2)), std::vector<int>({0, 0}));
  const auto eager = load(dir_.file("eager/rank0.pt")), graph = load(dir_.file("graph/rank0.pt"));
  EXPECT_EQ(max_relative_difference(graph, load(dir_.file("graph/rank1.pt"))), 0.0);
  EXPECT_LT(max_relative_difference(graph, eager), 2e-3);
}

}  // namespace
}  // namespace rn50
