// ops/cudnn_handle.cpp: the per-thread, per-device cuDNN handles.
#include "ops/cudnn_handle.h"

#include <c10/core/DeviceGuard.h>

#include <map>

#include "cuda/cudnn_check.h"

namespace rn50::ops::detail {

// Never destroyed. cudnnCreate most likely makes cuDNN's own thread-local state after this thread's map, so at thread exit
// (the main thread's at process exit) that state is gone before a destructor here could call cudnnDestroy, which then
// crashed inside libcudnn_graph after every run had finished (SIGSEGV in __call_tls_dtors, 2026-12-05, H200, cuDNN
// 9.19). The threads that use cuDNN (the training thread, autograd's device threads) live as long as the process,
// so nothing accumulates; PyTorch leaves its handles to the process's end too.
cudnnHandle_t cudnn_handle(int device) {
  thread_local auto* handles = new std::map<int, cudnnHandle_t>();
  auto it = handles->find(device);
  if (it == handles->end()) {
    // cudnnCreate binds the handle to the current device.
    const c10::DeviceGuard guard(c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(device)));
    cudnnHandle_t handle = nullptr;
    RN50_CUDNN_CHECK(cudnnCreate(&handle));
    it = handles->emplace(device, handle).first;
  }
  return it->second;
}

}  // namespace rn50::ops::detail
