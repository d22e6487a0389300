// bench/ops/graph_timing.h: GPU time per call of a benchmark's body, captured in a CUDA graph and replayed
// between events (the trainer replays a graph too, so host launch time is not counted), and the --batch option; for
// the rn50_bench_* tools.
#pragma once

#include <ATen/cuda/CUDAContext.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "cuda/cuda_check.h"
#include "cuda/cuda_event.h"
#include "cuda/device_ops.h"

namespace rn50::test {

// The one option of the single-op benchmarks: --batch N (default 256).
inline int64_t batch_option(int argc, char** argv, const char* tool) {
  if (argc == 1) return 256;
  if (argc == 3 && std::string(argv[1]) == "--batch") return std::stoll(argv[2]);
  throw std::invalid_argument(std::string("usage: ") + tool + " [--batch N]");
}

struct Timing {
  double seconds = 0;  // per call, median
  bool graph = true;   // false: capture failed, timed eagerly (host launch time included)
  bool ran = false;
};

// Median seconds per call of `call(i)` over input sets i = 0..sets-1, run back to back: captured once in a graph,
// replayed `repeats` times between events.
inline Timing time_calls(const std::function<void(int)>& call, int sets, int repeats) {
  Timing t;
  const auto all = [&] {
    for (int i = 0; i < sets; ++i) call(i);
  };
  for (int warm = 0; warm < 2; ++warm) all();  // handles, plans, cuDNN's heuristics, autograd's threads
  cuda::CudaGraph graph;
  std::function<void()> run_once = [&] { graph.replay(); };
  try {
    graph.capture(all);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "capture failed (%s): timing eagerly\n", e.what());
    t.graph = false;
    run_once = all;
  }
  for (int warm = 0; warm < 3; ++warm) run_once();
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream().stream();
  std::vector<cuda::Event> marks(repeats + 1);
  RN50_CUDA_CHECK(cudaEventRecord(marks[0].event, stream));
  for (int r = 0; r < repeats; ++r) {
    run_once();
    RN50_CUDA_CHECK(cudaEventRecord(marks[r + 1].event, stream));
  }
  RN50_CUDA_CHECK(cudaEventSynchronize(marks[repeats].event));
  std::vector<double> each;
  for (int r = 0; r < repeats; ++r) each.push_back(cuda::elapsed_seconds(marks[r].event, marks[r + 1].event));
  std::sort(each.begin(), each.end());
  t.seconds = each[each.size() / 2] / sets;
  t.ran = true;
  return t;
}

}  // namespace rn50::test
