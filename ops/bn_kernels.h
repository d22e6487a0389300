// ops/bn_kernels.h: BnKernels, which kernels run a fused BatchNorm (torch-free: the models' options name it).
#pragma once

namespace rn50::ops {

// cuDNN's fused BatchNorm+add+activation (cudnnBatchNormalizationForwardTrainingEx / BackwardEx,
// CUDNN_BATCHNORM_SPATIAL_PERSISTENT, ops BN / BN_ACTIVATION / BN_ADD_ACTIVATION), rn50's own kernels, kAuto: in
// training cuDNN's for BatchNorm+ReLU where cuDNN takes the case, rn50's own otherwise; kAten: ATen's separate
// batch_norm, add_ and relu_ (what the model ran before; the reference of the tests). Evaluation (training false) runs
// rn50's kernels for all but kAten: cuDNN has no fused inference op with add and activation.
enum class BnKernels { kAuto, kCudnn, kOwn, kAten };

// "auto", "cudnn", "rn50", "aten".
const char* to_string(BnKernels kernels);

}  // namespace rn50::ops
