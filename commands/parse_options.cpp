// commands/parse_options.cpp: parse_options, cxxopts with each mistake named in one line: a misspelt option (with
// the nearest known one), a value an option cannot take, a stray argument.
#include <unistd.h>
#include <cxxopts.hpp>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "commands/command.h"
#include "core/errors.h"
#include "core/files.h"
#include "core/utf8.h"

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

// The text between the first pair of quotation marks (ASCII or UTF-8) in a cxxopts message.
std::string quoted_value(const std::string& message) {
  for (const std::string& open : {std::string("\u2018"), std::string("'")}) {
    const std::string close = open == "'" ? "'" : "\u2019";
    const size_t begin = message.find(open);
    if (begin == std::string::npos) continue;
    const size_t end = message.rfind(close);
    if (end != std::string::npos && end > begin) return message.substr(begin + open.size(), end - begin - open.size());
  }
  return "";
}

// Whether `text` is `value` or a comma-separated list holding it (a list option's one bad element).
bool holds(const std::string& text, const std::string& value) {
  return text == value || ("," + text + ",").find("," + value + ",") != std::string::npos;
}

// The option that `value` was given to on the command line: "--name value", "--name=value" or "-n value".
std::string option_of_value(const std::string& value, int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const size_t eq = arg.find('=');
    if (arg.rfind("--", 0) == 0 && eq != std::string::npos && holds(arg.substr(eq + 1), value)) {
      return arg.substr(0, eq);
    }
    if (holds(arg, value) && i > 1 && argv[i - 1][0] == '-' &&
        std::string(argv[i - 1]).find('=') == std::string::npos) {
      return argv[i - 1];
    }
  }
  return "";
}

}  // namespace

cxxopts::ParseResult parse_options(cxxopts::Options& options, int argc, char** argv, const std::string& hint) {
  cxxopts::ParseResult parsed;
  try {
    parsed = options.parse(argc, argv);
  } catch (const cxxopts::exceptions::incorrect_argument_type& e) {
    // cxxopts names the value, not the option: find the option it was given to.
    const std::string value = quoted_value(e.what()), option = option_of_value(value, argc, argv);
    throw ConfigError((option.empty() ? std::string("an option") : option) + ": '" + value +
                      "' is not a value it takes (out of range or of the wrong kind); " + options.program() +
                      " --help lists them");
  } catch (const cxxopts::exceptions::no_such_option& e) {
    const std::string name = quoted_value(e.what());  // "Option 'batchsize' does not exist"
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
  // A word the command takes no place for (a second value after an option, a stray path) would otherwise be dropped
  // and the command run with settings that were not meant.
  if (!parsed.unmatched().empty()) {
    throw ConfigError("unexpected argument '" + parsed.unmatched().front() + "'" +
                      (hint.empty() ? "" : " (" + hint + ")") + "; " + options.program() +
                      " --help lists what it takes");
  }
  return parsed;
}

bool is_cuda_device_name(const std::string& name) {
  return name == "cuda" || (name.rfind("cuda:", 0) == 0 && name.size() > 5 && name.size() <= 8 &&
                            name.find_first_not_of("0123456789", 5) == std::string::npos);
}

void check_input_folder(const std::string& option, const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_directory(path, ec)) {
    throw ConfigError(option + " " + path + " is not a folder" + (ec ? ": " + ec.message() : ""));
  }
}

void check_output_file(const std::string& option, const std::string& path, const std::vector<std::string>& inputs) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (path.empty()) throw ConfigError(option + " is empty: name the file to write");
  const std::string shown = utf8::printable(path);
  if (fs::is_directory(path, ec)) throw ConfigError(option + " " + shown + " is a folder: name a file");
  // The write renames a new file over the path: a device, FIFO or link there would be replaced, not written to.
  const fs::file_status status = fs::symlink_status(path, ec);
  if (!ec && fs::exists(status) && !fs::is_regular_file(status)) {
    throw ConfigError(option + " " + shown + " is " +
                      (fs::is_symlink(status)
                           ? "a symbolic link: name the file it leads to"
                           : "not a regular file (a device or FIFO), which the write would replace"));
  }
  // Its folder before any work (the work once ran for minutes and then failed on the temporary).
  const fs::path folder = fs::path(path).has_parent_path() ? fs::path(path).parent_path() : fs::path(".");
  if (!fs::is_directory(folder, ec)) {
    throw ConfigError(option + " " + shown + ": the folder " + utf8::printable(folder.string()) + " does not exist");
  }
  if (::access(folder.c_str(), W_OK) != 0) {
    throw ConfigError(option + " " + shown + ": the folder " + utf8::printable(folder.string()) + " is not writable (" +
                      files::errno_text(errno) + ")");
  }
  // The file is staged beside it as PATH.tmp: an input of that name would be removed by the write.
  const std::string staging = files::temporary_path(path);
  for (const auto& input : inputs) {
    if (files::same_file(staging, input)) {
      throw ConfigError(option + " " + shown + " is staged as " + utf8::printable(staging) + ", which is the input " +
                        utf8::printable(input) + ": write to another file");
    }
  }
}

}  // namespace rn50::commands
