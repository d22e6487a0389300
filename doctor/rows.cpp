// doctor/rows.cpp: table and JSON forms of a report.
#include "doctor/rows.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "core/log.h"

namespace rn50::doctor {

std::string format_report(const std::vector<ReportRow>& rows, bool json) {
  if (json) {
    nlohmann::json j = nlohmann::json::array();
    for (const auto& r : rows) {
      j.push_back(
          {{"section", r.section}, {"check", r.check}, {"value", r.value}, {"verdict", r.verdict}, {"note", r.note}});
    }
    return j.dump(2) + "\n";
  }
  size_t widths[3] = {7, 5, 5};
  for (const auto& r : rows) {
    widths[0] = std::max(widths[0], r.section.size());
    widths[1] = std::max(widths[1], r.check.size());
    widths[2] = std::max(widths[2], r.value.size());
  }
  auto pad = [](const std::string& s, size_t w) { return s + std::string(w > s.size() ? w - s.size() : 0, ' '); };
  std::string out =
      pad("section", widths[0]) + "  " + pad("check", widths[1]) + "  " + pad("value", widths[2]) + "  verdict  note\n";
  for (const auto& r : rows) {
    out += pad(r.section, widths[0]) + "  " + pad(r.check, widths[1]) + "  " + pad(r.value, widths[2]) + "  " +
           pad(r.verdict, 7) + "  " + r.note + "\n";
  }
  return out;
}

}  // namespace rn50::doctor
