// tests/input/gpu_decode/test_gpu_decode_counts.cpp: GpuDecodeCounts::add, which DecoderGroup uses to report several
// decoders as one: every field summed, the slowest call the larger.
#include <gtest/gtest.h>

#include "input/gpu_decode/gpu_decoder.h"

namespace rn50::input {
namespace {

GpuDecodeCounts counts(int base) {  // every field a different value
  GpuDecodeCounts c;
  c.hardware = base + 1;
  c.hybrid = base + 2;
  c.cpu_fallback = base + 3;
  c.loader_cpu = base + 4;
  c.bad = base + 5;
  c.host_s = base + 6;
  c.wait_s = base + 7;
  c.batch_wait_s = base + 8;
  c.pace_wait_s = base + 9;
  c.route_s = base + 10;
  c.hardware_call_s = base + 11;
  c.slowest_hardware_call_s = base + 12;
  c.device_batches = base + 13;
  c.decode_latency_s = base + 14;
  c.input_stall_s = base + 15;
  c.crop_s = base + 16;
  c.new_buffers = base + 17;
  return c;
}

TEST(GpuDecodeCounts, AddSumsEveryFieldAndKeepsTheSlowestCall) {
  for (const bool larger_first : {false, true}) {
    GpuDecodeCounts a = counts(larger_first ? 100 : 0);
    a.add(counts(larger_first ? 0 : 100));
    EXPECT_EQ(a.hardware, 102);
    EXPECT_EQ(a.hybrid, 104);
    EXPECT_EQ(a.cpu_fallback, 106);
    EXPECT_EQ(a.loader_cpu, 108);
    EXPECT_EQ(a.bad, 110);
    EXPECT_EQ(a.host_s, 112);
    EXPECT_EQ(a.wait_s, 114);
    EXPECT_EQ(a.batch_wait_s, 116);
    EXPECT_EQ(a.pace_wait_s, 118);
    EXPECT_EQ(a.route_s, 120);
    EXPECT_EQ(a.hardware_call_s, 122);
    EXPECT_EQ(a.slowest_hardware_call_s, 112);  // the larger of 12 and 112, not their sum
    EXPECT_EQ(a.device_batches, 126);
    EXPECT_EQ(a.decode_latency_s, 128);
    EXPECT_EQ(a.input_stall_s, 130);
    EXPECT_EQ(a.crop_s, 132);
    EXPECT_EQ(a.new_buffers, 134);
  }
}

}  // namespace
}  // namespace rn50::input
