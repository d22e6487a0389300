// ops/conv_prologue.cpp: PrologueRun's names (torch-free, in every build).
#include "ops/conv_prologue.h"

namespace rn50::ops {

const char* to_string(PrologueRun run) {
  switch (run) {
    case PrologueRun::kTimed:
      return "timed";
    case PrologueRun::kFused:
      return "fused";
    case PrologueRun::kSeparate:
      return "separate";
  }
  return "?";
}

}  // namespace rn50::ops
