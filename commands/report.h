// commands/report.h: rows of checks with verdicts, printed as an aligned table or as JSON (torch-free).
#pragma once

#include <string>
#include <vector>

namespace rn50::commands {

struct ReportRow {
  std::string section, check, value, verdict, note;  // verdict: ok | warn | bad | info
};

std::string format_report(const std::vector<ReportRow>& rows, bool json);

}  // namespace rn50::commands
