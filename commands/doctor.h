// commands/doctor.h: `rn50 doctor`: measures this instance and says why it would train slowly, before a long run.
#pragma once

#include <string>

namespace rn50::commands {

struct DoctorOptions {
  std::string data_root;       // optional: measure reading this dataset (first read and cached)
  std::string device = "auto";
  bool json = false;
  bool quick = false;          // shorter measurements (tests, CPU machines)
  double price_per_hour = 0;   // optional: cost of an ImageNet epoch at the measured rate
};

// Prints the table (or JSON) and returns the exit code: 0 when it ran, whatever the verdicts.
int run_doctor(const DoctorOptions& options);

}  // namespace rn50::commands
