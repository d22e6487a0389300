// tests/core/test_config_doc.cpp: docs/configuration.md's key table against the key table in core/config.cpp.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/config.h"

namespace rn50 {
namespace {

struct DocRow {
  std::string key;
  std::string default_value;
};

std::vector<std::string> split(const std::string& text, const std::string& separator) {
  std::vector<std::string> parts;
  size_t begin = 0;
  for (size_t at; (at = text.find(separator, begin)) != std::string::npos; begin = at + separator.size())
    parts.push_back(text.substr(begin, at - begin));
  parts.push_back(text.substr(begin));
  return parts;
}

// The rows of the "## Every key" table: "| `key` | default | meaning |", or several keys and their defaults in one
// row: "| `a`, `b` | 1, 2 | ... |".
std::vector<DocRow> documented_keys(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in) << "cannot read " << path;
  std::vector<DocRow> rows;
  std::string line;
  bool in_section = false;
  while (std::getline(in, line)) {
    if (line.rfind("## ", 0) == 0) in_section = line == "## Every key";
    if (!in_section || line.rfind("| `", 0) != 0) continue;
    const size_t key_end = line.find("` |", 3);
    const size_t default_end = line.find(" |", key_end + 3);
    if (key_end == std::string::npos || default_end == std::string::npos) continue;
    std::string value = line.substr(key_end + 3, default_end - key_end - 3);
    value.erase(0, value.find_first_not_of(' '));
    const auto names = split(line.substr(3, key_end - 3), "`, `");
    const auto values = names.size() > 1 ? split(value, ", ") : std::vector<std::string>{value};
    for (size_t i = 0; i < names.size(); ++i) rows.push_back({names[i], i < values.size() ? values[i] : "?"});
  }
  return rows;
}

// The same value: the same text, or numbers equal as doubles (1e-8 and 1e-08); a note in brackets after the documented
// value ("67108864 (64 MiB)") is not part of it.
bool same_value(std::string documented, const std::string& printed) {
  const size_t note = documented.find(" (");
  if (note != std::string::npos && documented.back() == ')') documented.erase(note);
  if (documented == printed) return true;
  try {
    size_t used_a = 0, used_b = 0;
    const double a = std::stod(documented, &used_a), b = std::stod(printed, &used_b);
    return used_a == documented.size() && used_b == printed.size() && a == b;
  } catch (const std::exception&) {
    return false;
  }
}

TEST(ConfigDoc, EveryKeyIsDocumentedInTheTablesOrderWithItsDefault) {
  const auto rows = documented_keys(std::string(RN50_DOCS) + "/configuration.md");
  const auto& keys = config_keys();
  const Config defaults;
  std::ostringstream doc_order, table_order;
  for (const auto& row : rows) doc_order << row.key << " ";
  for (const auto& key : keys) table_order << key.name << " ";
  ASSERT_EQ(doc_order.str(), table_order.str()) << "docs/configuration.md's rows against `rn50 train --help`'s order";
  for (size_t i = 0; i < keys.size(); ++i) {
    const std::string printed = keys[i].print(defaults);
    EXPECT_TRUE(same_value(rows[i].default_value, printed))
        << keys[i].name << ": documented default '" << rows[i].default_value << "', the key table's '" << printed
        << "'";
  }
}

}  // namespace
}  // namespace rn50
