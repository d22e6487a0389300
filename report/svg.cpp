// report/svg.cpp: SVG line and bar charts.
#include "report/svg.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/log.h"
#include "core/utf8.h"

namespace rn50::report {
namespace {

std::string header(int width, int height) {
  return strprintf(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
      "font-family=\"sans-serif\" font-size=\"11\">\n<rect width=\"%d\" height=\"%d\" fill=\"white\"/>\n",
      width, height, width, height, width, height);
}

// A tick's label: few digits, no trailing zeros ("0.001", "2500", "1e+04").
std::string tick_label(double x) {
  if (x == 0) return "0";
  const double a = std::fabs(x);
  if (a >= 1e5 || a < 1e-3) return strprintf("%.0e", x);
  std::string s = strprintf(a >= 100 ? "%.0f" : a >= 1 ? "%.2f" : "%.4f", x);
  if (s.find('.') != std::string::npos) {
    s.erase(s.find_last_not_of('0') + 1);
    if (s.back() == '.') s.pop_back();
  }
  return s;
}

}  // namespace

std::string escape_xml(const std::string& raw) {
  // Names from the file system may be any bytes; the page is UTF-8, so what is not shows as U+FFFD.
  std::string text = utf8::replace_invalid(raw);
  // U+FFFE and U+FFFF are well-formed UTF-8 but no XML character: a parser refuses the page at them.
  for (size_t at = text.find("\xEF\xBF"); at != std::string::npos; at = text.find("\xEF\xBF", at + 3)) {
    if (at + 2 < text.size() && (text[at + 2] == '\xBE' || text[at + 2] == '\xBF')) text[at + 2] = '\xBD';
  }
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        // Control characters are not allowed in XML 1.0; a file's stray byte must not break the page.
        if (static_cast<unsigned char>(c) < 0x20 && c != '\n' && c != '\t') {
          out += '?';
        } else {
          out += c;
        }
    }
  }
  return out;
}

const std::vector<std::string>& palette() {
  static const std::vector<std::string> colours = {"#1b9e77", "#d95f02", "#7570b3", "#e7298a",
                                                   "#66a61e", "#e6ab02", "#a6761d", "#666666"};
  return colours;
}

std::vector<double> axis_ticks(double low, double high, int at_most) {
  if (!(high > low)) high = low + 1;
  const double raw = (high - low) / std::max(1, at_most - 1);
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  double step = magnitude;
  for (const double m : {1.0, 2.0, 5.0, 10.0}) {
    step = m * magnitude;
    if (step >= raw) break;
  }
  // Ticks are k * step for whole k: far from zero for their range (or past a double's range) k would not be exact,
  // or not a long long at all, so such values (a file's, not a run's) get their two ends.
  const double first = std::ceil(low / step - 1e-9);
  if (!std::isfinite(step) || !(std::fabs(first) < 1e15) || !(std::fabs(high / step) < 1e15)) return {low, high};
  std::vector<double> ticks;
  // k * step rather than a running sum, which drifts (0.2 + 0.2 + ... is not 1.2).
  for (auto k = static_cast<long long>(first); k * step <= high + step * 1e-9; ++k) {
    ticks.push_back(static_cast<double>(k) * step);
  }
  return ticks;
}

std::string render_line_chart(const LineChart& chart, const std::string& empty_note, int width, int height) {
  const double left = 64, right = 16, top = 40, bottom = 44;
  double x_lo = std::numeric_limits<double>::infinity(), x_hi = -x_lo, y_lo = x_lo, y_hi = -x_lo;
  for (const auto& s : chart.series) {
    for (const auto& [x, y] : s.points) {
      if (!y || !std::isfinite(*y) || !std::isfinite(x) || (chart.log_y && *y <= 0)) continue;
      const double v = chart.log_y ? std::log10(*y) : *y;
      x_lo = std::min(x_lo, x), x_hi = std::max(x_hi, x), y_lo = std::min(y_lo, v), y_hi = std::max(y_hi, v);
    }
  }
  if (!std::isfinite(x_lo)) {
    return header(width, 48) + "<text x=\"10\" y=\"18\" font-size=\"14\">" + escape_xml(chart.title) +
           "</text>\n<text x=\"10\" y=\"38\" fill=\"#555\">" + escape_xml(empty_note) + "</text>\n</svg>\n";
  }
  std::string out = header(width, height);
  out += "<text x=\"10\" y=\"18\" font-size=\"14\">" + escape_xml(chart.title) + "</text>\n";
  if (chart.y_min && !chart.log_y) y_lo = std::min(y_lo, *chart.y_min);
  if (chart.y_max && !chart.log_y) y_hi = std::max(y_hi, *chart.y_max);
  if (!chart.y_min && !chart.log_y && y_lo > 0 && y_lo < 0.5 * y_hi) y_lo = 0;  // a zero baseline when near
  // A flat series gets a range around it, wide enough to change numbers of its size (adding 0.5 to 1e29 does not).
  auto widening = [](double v) { return 0.5 * std::max(1.0, std::abs(v) * 1e-6); };
  if (y_hi - y_lo < 1e-12 * std::max(1.0, std::abs(y_hi))) {
    if (chart.y_min && !chart.log_y) {
      y_hi = y_lo + 2 * widening(y_lo);  // a flat line at the floor (no bad samples) stays on it
    } else {
      const double w = widening(y_lo);
      y_lo -= w, y_hi += w;
    }
  }
  if (x_hi - x_lo < 1e-12 * std::max(1.0, std::abs(x_hi))) {
    const double w = widening(x_lo);
    x_lo -= w, x_hi += w;
  }
  const std::vector<double> y_ticks = chart.log_y ? std::vector<double>{} : axis_ticks(y_lo, y_hi);
  std::vector<double> x_ticks = axis_ticks(x_lo, x_hi, 8);
  if (chart.integer_x) {
    x_ticks.erase(std::remove_if(x_ticks.begin(), x_ticks.end(), [](double t) { return t != std::floor(t); }),
                  x_ticks.end());
  }
  if (!y_ticks.empty()) y_lo = std::min(y_lo, y_ticks.front()), y_hi = std::max(y_hi, y_ticks.back());
  const double plot_w = width - left - right, plot_h = height - top - bottom;
  auto px = [&](double x) { return left + (x - x_lo) / (x_hi - x_lo) * plot_w; };
  auto py = [&](double v) { return top + plot_h - (v - y_lo) / (y_hi - y_lo) * plot_h; };
  out += strprintf("<rect x=\"%.0f\" y=\"%.0f\" width=\"%.0f\" height=\"%.0f\" fill=\"none\" stroke=\"#bbb\"/>\n", left,
                   top, plot_w, plot_h);
  std::vector<std::pair<double, std::string>> y_labels;
  if (chart.log_y) {
    for (double d = std::floor(y_lo); d <= std::ceil(y_hi); d += 1) {
      if (d >= y_lo - 1e-9 && d <= y_hi + 1e-9) y_labels.emplace_back(d, tick_label(std::pow(10.0, d)));
    }
    if (y_labels.empty())
      y_labels = {{y_lo, tick_label(std::pow(10.0, y_lo))}, {y_hi, tick_label(std::pow(10.0, y_hi))}};
  } else {
    for (const double t : y_ticks) y_labels.emplace_back(t, tick_label(t));
  }
  for (const auto& [v, label] : y_labels) {
    out += strprintf("<line x1=\"%.0f\" y1=\"%.1f\" x2=\"%.0f\" y2=\"%.1f\" stroke=\"#eee\"/>", left, py(v),
                     left + plot_w, py(v));
    out += strprintf("<text x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n", left - 4, py(v) + 4,
                     escape_xml(label).c_str());
  }
  for (const double t : x_ticks) {
    if (t < x_lo - 1e-9 || t > x_hi + 1e-9) continue;
    out += strprintf("<text x=\"%.1f\" y=\"%.0f\" text-anchor=\"middle\">%s</text>\n", px(t), top + plot_h + 14,
                     tick_label(t).c_str());
  }
  out += strprintf("<text x=\"%.0f\" y=\"%d\" text-anchor=\"middle\" fill=\"#555\">%s</text>\n", left + plot_w / 2,
                   height - 8, escape_xml(chart.x_label).c_str());
  out += strprintf(
      "<text x=\"14\" y=\"%.0f\" text-anchor=\"middle\" fill=\"#555\" transform=\"rotate(-90 14 %.0f)\">"
      "%s</text>\n",
      top + plot_h / 2, top + plot_h / 2, escape_xml(chart.y_label).c_str());
  double legend_x = left;
  for (size_t i = 0; i < chart.series.size(); ++i) {
    const Series& s = chart.series[i];
    const std::string& colour = palette()[i % palette().size()];
    out += strprintf(
        "<rect x=\"%.0f\" y=\"26\" width=\"10\" height=\"3\" fill=\"%s\"/><text x=\"%.0f\" y=\"31\">%s"
        "</text>\n",
        legend_x, colour.c_str(), legend_x + 14, escape_xml(s.name).c_str());
    legend_x += 24 + 6.5 * static_cast<double>(s.name.size());
    std::string path;
    bool pen_down = false;
    for (const auto& [x, y] : s.points) {
      if (!y || !std::isfinite(*y) || (chart.log_y && *y <= 0)) {
        pen_down = false;
        continue;
      }
      const double v = chart.log_y ? std::log10(*y) : *y;
      path += strprintf("%s%.1f %.1f ", pen_down ? "L" : "M", px(x), py(v));
      pen_down = true;
      if (s.markers) {
        out += strprintf("<circle cx=\"%.1f\" cy=\"%.1f\" r=\"2.5\" fill=\"%s\"><title>%s: %s at %s</title></circle>\n",
                         px(x), py(v), colour.c_str(), escape_xml(s.name).c_str(), tick_label(*y).c_str(),
                         tick_label(x).c_str());
      }
    }
    if (!path.empty()) {
      path.pop_back();
      out += "<path d=\"" + path + "\" fill=\"none\" stroke=\"" + colour + "\" stroke-width=\"1.5\"" +
             (s.dashed ? " stroke-dasharray=\"5 3\"" : "") + "/>\n";
    }
  }
  return out + "</svg>\n";
}

std::string render_bar_chart(const BarChart& chart, int width) {
  const double left = 300, right = 240, bar_h = 14, gap = 8;
  const size_t per_row = std::max<size_t>(1, chart.series.size());
  const double row_h = bar_h * static_cast<double>(per_row) + gap;
  const double top = chart.series.size() > 1 ? 66 : 50;
  const int height = static_cast<int>(top + row_h * static_cast<double>(chart.rows.size()) + 10);
  double top_value = chart.x_max.value_or(0);
  for (const auto& r : chart.rows) {
    for (const auto& v : r.values) {
      if (v && std::isfinite(*v)) top_value = std::max(top_value, *v);
    }
  }
  if (top_value <= 0) top_value = 1;
  const double scale = (width - left - right) / top_value;
  std::string out = header(width, height);
  out += "<text x=\"10\" y=\"18\" font-size=\"14\">" + escape_xml(chart.title) + "</text>\n";
  out += "<text x=\"10\" y=\"34\" fill=\"#555\">" + escape_xml(chart.subtitle) + "</text>\n";
  if (chart.series.size() > 1) {
    double x = left;
    for (size_t i = 0; i < chart.series.size(); ++i) {
      out += strprintf(
          "<rect x=\"%.0f\" y=\"42\" width=\"10\" height=\"10\" fill=\"%s\"/><text x=\"%.0f\" y=\"51\">"
          "%s</text>\n",
          x, palette()[i % palette().size()].c_str(), x + 14, escape_xml(chart.series[i]).c_str());
      x += 24 + 6.5 * static_cast<double>(chart.series[i].size());
    }
  }
  double y = top;
  for (const auto& r : chart.rows) {
    out += strprintf("<text x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n", left - 6,
                     y + row_h / 2 - gap / 2 + 4, escape_xml(r.label).c_str());
    double widest = 0;
    const bool none = std::none_of(r.values.begin(), r.values.end(), [](const auto& v) { return v.has_value(); });
    if (none) {
      out += strprintf("<text x=\"%.0f\" y=\"%.1f\" fill=\"#888\">unavailable</text>\n", left + 4,
                       y + row_h / 2 - gap / 2 + 4);
      widest = 80;
    }
    for (size_t i = 0; i < r.values.size() && !none; ++i) {
      const double by = y + bar_h * static_cast<double>(i);
      const std::string name = i < chart.series.size() ? chart.series[i] : "";
      if (!r.values[i] || !std::isfinite(*r.values[i])) {
        out += strprintf("<text x=\"%.0f\" y=\"%.1f\" fill=\"#888\">unavailable%s</text>\n", left + 4, by + 11,
                         name.empty() ? "" : (" (" + escape_xml(name) + ")").c_str());
        widest = std::max(widest, 110.0);
        continue;
      }
      const double w = std::max(0.0, *r.values[i]) * scale;
      widest = std::max(widest, w);
      out += strprintf(
          "<rect x=\"%.0f\" y=\"%.1f\" width=\"%.1f\" height=\"%.0f\" fill=\"%s\"><title>%s%s: %s%s"
          "</title></rect>\n",
          left, by, w, bar_h - 2, palette()[i % palette().size()].c_str(), escape_xml(r.label).c_str(),
          name.empty() ? "" : (", " + escape_xml(name)).c_str(), tick_label(*r.values[i]).c_str(),
          escape_xml(chart.unit).c_str());
      if (per_row > 1) {
        out += strprintf("<text x=\"%.1f\" y=\"%.1f\" font-size=\"10\">%.1f</text>\n", left + w + 4, by + 10,
                         *r.values[i]);
      }
    }
    if (!r.note.empty()) {
      out += strprintf("<text x=\"%.1f\" y=\"%.1f\">%s</text>\n", left + widest + (per_row > 1 ? 48 : 6),
                       y + row_h / 2 - gap / 2 + 4, escape_xml(r.note).c_str());
    }
    y += row_h;
  }
  return out + "</svg>\n";
}

}  // namespace rn50::report
