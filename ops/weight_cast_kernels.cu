// ops/weight_cast_kernels.cu: the multi-tensor cast: the __global__ wrapper around ops/weight_cast_kernels_impl.cuh
// and its launch.
#include <cstdint>
#include <stdexcept>

#include "cuda/cuda_check.h"
#include "cuda/launch.h"
#include "ops/weight_cast_kernels.h"
#include "ops/weight_cast_kernels_impl.cuh"

namespace rn50::ops::kernels {
namespace {

static_assert(cast_impl::kThreads == cuda::launch::kThreads, "the emulation's block is the launch's");
static_assert(sizeof(CastList) <= 4000, "a kernel's parameters stay within 4 KB");

template <typename From, typename To, int VEC>
__global__ void __launch_bounds__(cuda::launch::kThreads) cast_many_kernel(const CastList l) {
  cast_impl::cast_thread<From, To, VEC>(l, blockIdx.x, static_cast<int>(threadIdx.x));
}

template <typename From, typename To>
void launch(const CastList& l, cudaStream_t stream) {
  const auto blocks = static_cast<unsigned>(l.first_chunk[l.count]);
  if (l.vec == cast_impl::kVector) {
    cast_many_kernel<From, To, cast_impl::kVector><<<blocks, cuda::launch::kThreads, 0, stream>>>(l);
  } else {
    cast_many_kernel<From, To, 1><<<blocks, cuda::launch::kThreads, 0, stream>>>(l);
  }
  RN50_CUDA_CHECK(cudaGetLastError());
}

bool misaligned(const void* p) { return reinterpret_cast<uintptr_t>(p) % cuda::launch::kVectorBytes != 0; }

// A list whose chunks do not add up, or that claims vectors on pointers that do not allow them, would touch wrong
// memory.
void check_list(const CastList& l) {
  if (l.count < 1 || l.count > kCastListMax) throw std::invalid_argument("cast_many: a list of no or too many tensors");
  if (l.vec != 1 && l.vec != cast_impl::kVector) throw std::invalid_argument("cast_many: a vector width of neither");
  if (l.first_chunk[0] != 0 || l.first_chunk[l.count] > 2147483647LL) {
    throw std::invalid_argument("cast_many: a list whose chunks do not start at 0 or exceed a grid's x dimension");
  }
  for (int i = 0; i < l.count; ++i) {
    if (l.src[i] == nullptr || l.dst[i] == nullptr || l.numel[i] < 1) {
      throw std::invalid_argument("cast_many: a null pointer or an empty tensor");
    }
    if (l.first_chunk[i + 1] - l.first_chunk[i] != (l.numel[i] + kCastChunk - 1) / kCastChunk) {
      throw std::invalid_argument("cast_many: a tensor's chunks do not cover it");
    }
    if (l.vec > 1 && (misaligned(l.src[i]) || misaligned(l.dst[i]))) {
      throw std::invalid_argument("cast_many: a list with 16-byte accesses got a misaligned pointer");
    }
  }
}

}  // namespace

void cast_many(const CastList& list, CastType from, CastType to, cudaStream_t stream) {
  check_list(list);
  if (from == CastType::kFloat && to == CastType::kHalf) return launch<float, __half>(list, stream);
  if (from == CastType::kFloat && to == CastType::kBFloat16) return launch<float, __nv_bfloat16>(list, stream);
  if (from == CastType::kHalf && to == CastType::kFloat) return launch<__half, float>(list, stream);
  if (from == CastType::kBFloat16 && to == CastType::kFloat) return launch<__nv_bfloat16, float>(list, stream);
  throw std::invalid_argument("cast_many: only float32 to float16 or bfloat16 and back");
}

}  // namespace rn50::ops::kernels
