// core/log.cpp: spdlog sinks for the console and the run's log file.
#include "core/log.h"

#include <spdlog/sinks/base_sink.h>
#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <memory>
#include <mutex>

namespace rn50 {
namespace {

// The console sink (stderr) that keeps the status line: the logger owns it, so the line needs no state of its own.
class ConsoleWithStatusLine final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  ConsoleWithStatusLine() : inner_(std::make_shared<spdlog::sinks::stderr_color_sink_st>()) {}

  void set_status(const std::vector<std::string>& forms) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!stdout_is_terminal()) return;
    const int width = terminal_width();
    // A line drawn on a wider terminal wraps when it narrows: clear every row it takes now, not only the last.
    std::string clear = "\r\033[K";
    if (width > 0) {
      for (size_t rows = (status_.size() + static_cast<size_t>(width) - 1) / static_cast<size_t>(width); rows > 1;
           --rows) {
        clear += "\033[A\r\033[K";
      }
    }
    status_ = fit(forms, width);
    std::fputs((clear + status_).c_str(), stdout);
    std::fflush(stdout);
  }

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    if (!status_.empty()) {
      std::fputs("\r\033[K", stdout);
      std::fflush(stdout);
    }
    inner_->log(msg);
    if (!status_.empty()) {
      std::fputs(status_.c_str(), stdout);
      std::fflush(stdout);
    }
  }
  void flush_() override { inner_->flush(); }
  void set_pattern_(const std::string& pattern) override { inner_->set_pattern(pattern); }
  void set_formatter_(std::unique_ptr<spdlog::formatter> formatter) override {
    inner_->set_formatter(std::move(formatter));
  }

 private:
  static int terminal_width() {
    winsize size{};
    if (::ioctl(STDOUT_FILENO, TIOCGWINSZ, &size) != 0 || size.ws_col < 2) return 0;
    return size.ws_col;
  }

  // A line wider than the terminal wraps, and "\r" would then clear only its last row: the longest form that fits,
  // else the shortest cut at its last space that fits.
  static std::string fit(const std::vector<std::string>& forms, int width) {
    if (forms.empty()) return "";
    if (width <= 0) return forms.front();
    for (const auto& f : forms) {
      if (f.size() < static_cast<size_t>(width)) return f;
    }
    const std::string& shortest = forms.back();
    const size_t cut = shortest.rfind(' ', static_cast<size_t>(width) - 1);
    return shortest.substr(0, cut == std::string::npos || cut == 0 ? static_cast<size_t>(width) - 1 : cut);
  }

  std::shared_ptr<spdlog::sinks::stderr_color_sink_st> inner_;
  std::string status_;
};

}  // namespace

bool stdout_is_terminal() { return ::isatty(STDOUT_FILENO) == 1; }

void set_status_line(const std::vector<std::string>& forms) {
  for (const auto& sink : spdlog::default_logger()->sinks()) {
    if (auto* console = dynamic_cast<ConsoleWithStatusLine*>(sink.get())) console->set_status(forms);
  }
}

void set_status_line(const std::string& text) {
  set_status_line(text.empty() ? std::vector<std::string>{} : std::vector<std::string>{text});
}

std::string format_rate(double images_per_s) { return strprintf(images_per_s < 9.95 ? "%.2g" : "%.0f", images_per_s); }

void init_logging(const std::string& file, int rank) {
  std::vector<spdlog::sink_ptr> sinks;
  sinks.push_back(std::make_shared<ConsoleWithStatusLine>());
  spdlog::drop("rn50-file");
  if (!file.empty() && rank == 0) {
    sinks.push_back(std::make_shared<spdlog::sinks::basic_file_sink_mt>(file, /*truncate=*/false));
    auto file_only = std::make_shared<spdlog::logger>("rn50-file", sinks.back());
    file_only->set_pattern("[%Y-%m-%d %H:%M:%S.%e] [%^%l%$] %v");
    file_only->flush_on(spdlog::level::err);
    spdlog::register_logger(file_only);
  }
  auto logger = std::make_shared<spdlog::logger>("rn50", sinks.begin(), sinks.end());
  logger->set_pattern(rank == 0 ? "[%Y-%m-%d %H:%M:%S.%e] [%^%l%$] %v"
                                : "[%Y-%m-%d %H:%M:%S.%e] [rank " + std::to_string(rank) + "] [%^%l%$] %v");
  logger->set_level(rank == 0 ? spdlog::level::info : spdlog::level::warn);
  logger->flush_on(spdlog::level::info);
  spdlog::set_default_logger(logger);
}

void log_to_file(const std::string& message) {
  if (const auto file = spdlog::get("rn50-file")) file->error("{}", message);
}

void log_info(const std::string& message) { spdlog::info("{}", message); }
void log_warn(const std::string& message) { spdlog::warn("{}", message); }
void log_error(const std::string& message) { spdlog::error("{}", message); }

std::string strprintf(const char* format, ...) {
  va_list args;
  va_start(args, format);
  va_list copy;
  va_copy(copy, args);
  const int size = std::vsnprintf(nullptr, 0, format, copy);
  va_end(copy);
  std::string out(size > 0 ? static_cast<size_t>(size) : 0, '\0');
  if (size > 0) std::vsnprintf(out.data(), out.size() + 1, format, args);
  va_end(args);
  return out;
}

void log_table(const std::string& title, const std::vector<std::pair<std::string, std::string>>& rows) {
  size_t width = 0;
  for (const auto& row : rows) width = std::max(width, row.first.size());
  spdlog::info("{}", title);
  for (const auto& [key, value] : rows) spdlog::info("  {:<{}}  {}", key, width, value);
}

}  // namespace rn50
