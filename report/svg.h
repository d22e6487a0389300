// report/svg.h: the reports' pictures as self-contained SVG text: line charts over epochs or steps, and horizontal
// bar charts of one or more figures per row (no script, no external font or stylesheet; torch-free).
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace rn50::report {

// Text safe inside XML and HTML elements and attributes, and UTF-8 (a byte that is not shows as U+FFFD).
std::string escape_xml(const std::string& text);

// Colours of the series, in order (colour-blind safe: ColorBrewer's Dark2).
const std::vector<std::string>& palette();

struct Series {
  std::string name;
  std::vector<std::pair<double, std::optional<double>>> points;  // (x, y); a nullopt y breaks the line
  bool markers = false;                                          // a dot on every point (few points: epochs)
  bool dashed = false;
};

struct LineChart {
  std::string title, x_label, y_label;
  std::vector<Series> series;
  // Fixed bounds (0..100 for percentages); otherwise from the data.
  std::optional<double> y_min = std::nullopt, y_max = std::nullopt;
  bool log_y = false;      // the learning rate spans decades
  bool integer_x = false;  // epochs: no tick between two of them
};

// An empty chart (no series with a value) draws its title and `empty_note` instead of axes, in a low box.
std::string render_line_chart(const LineChart& chart, const std::string& empty_note, int width = 540, int height = 250);

struct BarRow {
  std::string label;
  std::vector<std::optional<double>> values;  // one per series; nullopt: "unavailable"
  std::string note;                           // after the bars ("1.00x", "12.3 h")
};

struct BarChart {
  std::string title, subtitle, unit;
  std::vector<std::string> series;  // legend; one name: no legend
  std::vector<BarRow> rows;
  std::optional<double> x_max = std::nullopt;  // 100 for percentages
};

std::string render_bar_chart(const BarChart& chart, int width = 960);

// "Nice" axis ticks (1, 2, 5 times a power of ten) covering [low, high].
std::vector<double> axis_ticks(double low, double high, int at_most = 6);

}  // namespace rn50::report
