// tests/ops/test_fused_bottleneck.cpp: the fused bottleneck's refusals that hold on any machine: grouped and dilated
// 3x3 convolutions (ResNeXt), before the input's own reasons.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <string>

#include "ops/fused_bottleneck.h"

namespace rn50::ops {
namespace {

TEST(FusedBottleneck, RefusesGroupedAndDilatedConvolutionsForEveryInput) {
  const at::Tensor x = at::zeros({2, 64, 8, 8});
  BottleneckParams p;
  EXPECT_EQ(bottleneck_geometry_unsupported_reason(p), "");
  EXPECT_EQ(bottleneck_unsupported_reason(x, p), bottleneck_input_unsupported_reason(x));  // the CPU's reason
  p.groups = 32;
  const std::string grouped = bottleneck_unsupported_reason(x, p);
  EXPECT_NE(grouped.find("grouped 3x3 convolution (groups 32)"), std::string::npos) << grouped;
  EXPECT_EQ(grouped, bottleneck_geometry_unsupported_reason(p));
  p.groups = 1;
  p.dilation = 2;
  const std::string dilated = bottleneck_unsupported_reason(x, p);
  EXPECT_NE(dilated.find("dilated 3x3 convolution (dilation 2)"), std::string::npos) << dilated;
  EXPECT_THROW(bottleneck_forward(x, p), std::invalid_argument);
}

}  // namespace
}  // namespace rn50::ops
