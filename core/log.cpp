// core/log.cpp: spdlog sinks for the console and the run's log file.
#include "core/log.h"

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdarg>

namespace rn50 {

void init_logging(const std::string& file, int rank) {
  std::vector<spdlog::sink_ptr> sinks;
  sinks.push_back(std::make_shared<spdlog::sinks::stderr_color_sink_mt>());
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
