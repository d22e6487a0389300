// ops/conv_prologue.h: PrologueRun, where a fused convolution's scale-bias-ReLU prologue runs (torch-free: the models'
// options name it).
#pragma once

namespace rn50::ops {

// kFused: inside the convolution (cuDNN's fused engine); kSeparate: a pass of its own (ops::bn_apply) writes the
// activation and the plain convolution reads it; kTimed: whichever of the two was faster for the pattern and shape,
// timed once on first use (before a CUDA graph captures it) and kept for the thread.
enum class PrologueRun { kTimed, kFused, kSeparate };

// "timed", "fused", "separate".
const char* to_string(PrologueRun run);

}  // namespace rn50::ops
