// core/log.h: logging set-up (spdlog): only the primary process logs at info level, to console and file.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace rn50 {

// Console logging for every process; with a non-empty `file`, the primary process also writes there.
// Other ranks log warnings and errors only, prefixed with their rank.
void init_logging(const std::string& file, int rank);

// Logs rows as an aligned two-column table under a title.
void log_table(const std::string& title, const std::vector<std::pair<std::string, std::string>>& rows);

}  // namespace rn50
