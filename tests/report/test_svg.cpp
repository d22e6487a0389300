// tests/report/test_svg.cpp: the pictures' pieces: axis ticks, escaping, lines broken where a value is unavailable,
// and bars that say "unavailable" rather than drawing zero.
#include "report/svg.h"

#include <gtest/gtest.h>

#include <string>

namespace rn50::report {
namespace {

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(Svg, TicksAreRoundNumbersCoveringTheRange) {
  EXPECT_EQ(axis_ticks(0, 100), (std::vector<double>{0, 20, 40, 60, 80, 100}));
  EXPECT_EQ(axis_ticks(0, 6150, 6), (std::vector<double>{0, 2000, 4000, 6000}));
  const std::vector<double> narrow = axis_ticks(1.2, 1.9, 6);
  EXPECT_NEAR(narrow.front(), 1.2, 1e-12);
  EXPECT_NEAR(narrow.back(), 1.8, 1e-12);
}

// Values a metrics file may hold but no run writes: the ends of the range, not a tick count past a long long
// (fuzz_report found the cast of inf, undefined behaviour).
TEST(Svg, TicksOfValuesFarFromTheirRangeAreItsEnds) {
  EXPECT_EQ(axis_ticks(-1e308, 1e308), (std::vector<double>{-1e308, 1e308}));
  EXPECT_EQ(axis_ticks(1e20, 1e20 + 1e5), (std::vector<double>{1e20, 1e20 + 1e5}));
  EXPECT_EQ(axis_ticks(1e17, 1e17 + 64), (std::vector<double>{1e17, 1e17 + 64}));
  EXPECT_EQ(axis_ticks(1e6, 1e6 + 4, 3).size(), 3u);  // still k * step where k is exact
}

// A flat series of numbers too large for a +-0.5 widening to change (1e29) once drew at NaN coordinates.
TEST(Svg, AFlatSeriesOfAnySizeDrawsAtFiniteCoordinates) {
  for (const double v : {0.0, 3.0, 1e29, -1e29, 1e300}) {
    LineChart chart{"t", "step", "x", {{"s", {{1e29, v}, {1e29, v}}}}};
    const std::string svg = render_line_chart(chart, "nothing");
    EXPECT_EQ(svg.find("nan"), std::string::npos) << v << "\n" << svg;
    EXPECT_EQ(svg.find("inf"), std::string::npos) << v << "\n" << svg;
    EXPECT_EQ(count(svg, "<path"), 1u) << v;
  }
}

TEST(Svg, TextIsEscaped) {
  EXPECT_EQ(escape_xml("a<b & \"c\"\x01"), "a&lt;b &amp; &quot;c&quot;?");
  EXPECT_EQ(escape_xml("\xff\xfe caf\xc3\xa9"),
            "\xef\xbf\xbd\xef\xbf\xbd caf\xc3\xa9");  // U+FFFD for what is not UTF-8
  // U+FFFE and U+FFFF are UTF-8 but no XML character (expat refused compare's pictures at them).
  EXPECT_EQ(escape_xml("a\xef\xbf\xbe\xef\xbf\xbfz\xef\xbf\xbc"), "a\xef\xbf\xbd\xef\xbf\xbdz\xef\xbf\xbc");
}

TEST(Svg, AnUnavailableValueBreaksTheLineInsteadOfDrawingZero) {
  LineChart chart{"t", "step", "%", {{"s", {{1, 10.0}, {2, std::nullopt}, {3, 30.0}, {4, 40.0}}}}};
  const std::string svg = render_line_chart(chart, "nothing");
  EXPECT_EQ(count(svg, "<path"), 1u);
  EXPECT_EQ(count(svg, " M"), 1u);  // two pieces: one move at the start of the path, one after the gap
  EXPECT_NE(svg.find("d=\"M"), std::string::npos);
  LineChart empty{"t", "step", "%", {{"s", {{1, std::nullopt}}}}};
  const std::string none = render_line_chart(empty, "unavailable on a CPU run");
  EXPECT_NE(none.find("unavailable on a CPU run"), std::string::npos);
  EXPECT_EQ(count(none, "<path"), 0u);
}

TEST(Svg, BarsOfUnavailableFiguresSaySo) {
  BarChart chart{"u", "", "%", {"GPU", "tensor"}, {{"row", {99.0, std::nullopt}, ""}}, 100.0};
  const std::string svg = render_bar_chart(chart);
  EXPECT_NE(svg.find("unavailable (tensor)"), std::string::npos);
  EXPECT_EQ(count(svg, "<title>row, GPU: 99%</title>"), 1u);
  BarChart cpu{"u", "", "%", {"GPU", "tensor"}, {{"cpu", {std::nullopt, std::nullopt}, ""}}, 100.0};
  const std::string none = render_bar_chart(cpu);
  EXPECT_EQ(count(none, ">unavailable</text>"), 1u);  // one word for a row with nothing, not one per figure
  EXPECT_EQ(count(none, "<title>"), 0u);              // no bar drawn
}

}  // namespace
}  // namespace rn50::report
