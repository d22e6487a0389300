// core/log.h: logging (spdlog behind functions): only the primary process logs at info level, to console and file.
#pragma once

// spdlog stays out of this header: pip LibTorch ships its own fmt, which would shadow the one spdlog
// was built with in every file that also includes LibTorch.

#include <string>
#include <utility>
#include <vector>

namespace rn50 {

// Console logging for every process; with a non-empty `file`, the primary process also writes there.
// Other ranks log warnings and errors only, prefixed with their rank.
void init_logging(const std::string& file, int rank);

// The line into the run's log file only (nothing when there is none): main's error boundary prints its fatal
// error to the console itself.
void log_to_file(const std::string& message);

void log_info(const std::string& message);
void log_warn(const std::string& message);
void log_error(const std::string& message);

// printf-style formatting into a std::string (the compiler checks the arguments).
std::string strprintf(const char* format, ...) __attribute__((format(printf, 1, 2)));

// An images/s rate without a decimal, but two figures below 10 (a CPU trains ResNet-50 at a few images a second):
// "7915", "4.3", "0.73".
std::string format_rate(double images_per_s);

// The live status line at the foot of the terminal (the epoch's progress): drawn on standard output only where it is
// a terminal, cleared before each console log line and drawn again after it; "" removes it. Elsewhere (a file, a
// pipe, CI) nothing is written, and the log lines stay as they are.
void set_status_line(const std::string& text);
// The same from forms of the line, longest first: the first that fits the terminal's width is drawn (a narrow terminal
// gets a short form whole rather than a long one cut), the last cut at a word where none fits.
void set_status_line(const std::vector<std::string>& forms);
// Whether standard output is a terminal, i.e. whether set_status_line shows anything.
bool stdout_is_terminal();

// Logs rows as an aligned two-column table under a title.
void log_table(const std::string& title, const std::vector<std::pair<std::string, std::string>>& rows);

}  // namespace rn50
