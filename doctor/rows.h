// doctor/rows.h: rows of checks with verdicts, printed as an aligned table or as JSON (torch-free).
#pragma once

#include <string>
#include <vector>

namespace rn50::doctor {

struct ReportRow {
  std::string section, check, value, verdict, note;  // verdict: ok | warn | bad | info
};

std::string format_report(const std::vector<ReportRow>& rows, bool json);

// An images/s rate without a decimal, but two figures below 10 (a CPU trains ResNet-50 at a few images a second).
std::string format_rate(double images_per_s);

}  // namespace rn50::doctor
