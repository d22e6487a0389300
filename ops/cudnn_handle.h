// ops/cudnn_handle.h: this thread's cuDNN handle for a device, shared by ops/'s cuDNN callers (CUDA builds only).
#pragma once

#include <cudnn.h>

namespace rn50::ops::detail {

// One handle per thread and device (cuDNN handles are not for concurrent use from several threads, and autograd runs
// the backward on its own threads), made on first use and bound to that device. Callers set its stream.
cudnnHandle_t cudnn_handle(int device);

}  // namespace rn50::ops::detail
