// ops/cudnn_handle.cpp: the per-thread, per-device cuDNN handles.
#include "ops/cudnn_handle.h"

#include <c10/core/DeviceGuard.h>

#include <map>
#include <memory>

#include "cuda/cudnn_check.h"

namespace rn50::ops::detail {
namespace {

// Owns a cuDNN handle.
class Handle {
 public:
  Handle() { RN50_CUDNN_CHECK(cudnnCreate(&handle_)); }
  ~Handle() { cudnnDestroy(handle_); }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  cudnnHandle_t get() const { return handle_; }

 private:
  cudnnHandle_t handle_ = nullptr;
};

}  // namespace

cudnnHandle_t cudnn_handle(int device) {
  thread_local std::map<int, std::unique_ptr<Handle>> handles;
  auto it = handles.find(device);
  if (it == handles.end()) {
    // cudnnCreate binds the handle to the current device.
    const c10::DeviceGuard guard(c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(device)));
    it = handles.emplace(device, std::make_unique<Handle>()).first;
  }
  return it->second->get();
}

}  // namespace rn50::ops::detail
