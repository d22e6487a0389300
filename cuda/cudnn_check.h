// cuda/cudnn_check.h: RN50_CUDNN_CHECK, cuDNN's member of the check family in core/check.h (reason:
// cudnnGetErrorString). Only targets that found cudnn.h include it (ops/ in CUDA builds).
#pragma once

#include <cudnn.h>

#include "core/check.h"

#define RN50_CUDNN_CHECK(expr) RN50_CHECK_STATUS(cudnnStatus_t, CUDNN_STATUS_SUCCESS, cudnnGetErrorString, expr, #expr)
