// doctor/rows.h: rows of checks with verdicts, printed as an aligned table or as JSON (torch-free).
#pragma once

#include <string>
#include <vector>

#include "core/log.h"

namespace rn50::doctor {

struct ReportRow {
  std::string section, check, value, verdict, note;  // verdict: ok | warn | bad | info
};

std::string format_report(const std::vector<ReportRow>& rows, bool json);

using rn50::format_rate;  // core/log.h

}  // namespace rn50::doctor
