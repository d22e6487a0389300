// commands/parse_options.cpp: parse_options, cxxopts with a suggestion for a misspelt option.
#include <cxxopts.hpp>

#include <algorithm>
#include <cctype>
#include <string>
#include <vector>

#include "commands/command.h"
#include "core/errors.h"

namespace rn50::commands {
namespace {

// Levenshtein distance: insertions, deletions and substitutions.
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

// The option name in "Option 'batchsize' does not exist" (cxxopts quotes with ASCII or UTF-8 quotation marks).
std::string quoted_name(const std::string& message) {
  const std::string head = "Option ", tail = " does not exist";
  const size_t begin = message.find(head), end = message.rfind(tail);
  if (begin == std::string::npos || end == std::string::npos || end < begin + head.size()) return "";
  std::string name = message.substr(begin + head.size(), end - begin - head.size());
  auto plain = [](unsigned char c) { return std::isalnum(c) || c == '-' || c == '_'; };
  while (!name.empty() && !plain(static_cast<unsigned char>(name.front()))) name.erase(name.begin());
  while (!name.empty() && !plain(static_cast<unsigned char>(name.back()))) name.pop_back();
  return name;
}

}  // namespace

cxxopts::ParseResult parse_options(cxxopts::Options& options, int argc, char** argv) {
  try {
    return options.parse(argc, argv);
  } catch (const cxxopts::exceptions::no_such_option& e) {
    const std::string name = quoted_name(e.what());
    std::string best;
    size_t best_distance = std::string::npos;
    for (const auto& group : options.groups()) {
      for (const auto& option : options.group_help(group).options) {
        for (const auto& long_name : option.l) {
          // '-' and '_' alike: a YAML key typed as an option is a near miss too.
          std::string typed = name;
          std::replace(typed.begin(), typed.end(), '_', '-');
          const size_t d = edit_distance(typed, long_name);
          if (d < best_distance) best_distance = d, best = long_name;
        }
      }
    }
    // As it was typed: a short option (-b) is one letter, too short to guess a long one from.
    bool typed_long = false;
    for (int i = 1; i < argc; ++i) {
      const std::string arg = argv[i];
      if (arg == "--" + name || arg.rfind("--" + name + "=", 0) == 0) typed_long = true;
    }
    const bool close = typed_long && !best.empty() && best_distance <= std::max<size_t>(2, name.size() / 3);
    throw ConfigError("unknown option '" + std::string(typed_long ? "--" : "-") + name + "'" +
                      (close ? " (did you mean --" + best + "?)" : "") + "; " + options.program() +
                      " --help lists them");
  }
}

}  // namespace rn50::commands
