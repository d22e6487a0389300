// nvml_timing.c: how long each NVML read of rn50's utilisation sampler takes on this machine (mean and max of 20).
// Build there: gcc -O2 nvml_timing.c -I/usr/local/cuda/targets/x86_64-linux/include -lnvidia-ml
#include <nvml.h>
#include <stdio.h>
#include <time.h>

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

#define TIME(name, call)                                                              \
  do {                                                                                \
    double sum = 0, max = 0;                                                          \
    nvmlReturn_t rc = NVML_SUCCESS;                                                   \
    for (int i = 0; i < 20; ++i) {                                                    \
      const double t0 = now_ms();                                                     \
      rc = (call);                                                                    \
      const double ms = now_ms() - t0;                                                \
      sum += ms;                                                                      \
      if (ms > max) max = ms;                                                         \
    }                                                                                 \
    printf("%-28s mean %7.3f ms  max %7.3f ms  (%s)\n", name, sum / 20, max, nvmlErrorString(rc)); \
  } while (0)

int main(void) {
  if (nvmlInit_v2() != NVML_SUCCESS) { fprintf(stderr, "nvmlInit failed\n"); return 1; }
  nvmlDevice_t dev;
  if (nvmlDeviceGetHandleByIndex_v2(0, &dev) != NVML_SUCCESS) { fprintf(stderr, "no device 0\n"); return 1; }
  nvmlUtilization_t util;
  unsigned int value;
  nvmlMemory_t memory;
  TIME("utilisation rates", nvmlDeviceGetUtilizationRates(dev, &util));
  TIME("SM clock", nvmlDeviceGetClockInfo(dev, NVML_CLOCK_SM, &value));
  TIME("power", nvmlDeviceGetPowerUsage(dev, &value));
  TIME("memory", nvmlDeviceGetMemoryInfo(dev, &memory));
  TIME("PCIe rx", nvmlDeviceGetPcieThroughput(dev, NVML_PCIE_UTIL_RX_BYTES, &value));
  TIME("PCIe tx", nvmlDeviceGetPcieThroughput(dev, NVML_PCIE_UTIL_TX_BYTES, &value));
  nvmlShutdown();
  return 0;
}
