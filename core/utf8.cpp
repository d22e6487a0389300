// core/utf8.cpp: UTF-8 well-formedness by the Unicode standard's table of byte sequences (its Table 3-7).
#include "core/utf8.h"

namespace rn50::utf8 {

size_t sequence_length(std::string_view text, size_t at) {
  if (at >= text.size()) return 0;
  auto byte = [&](size_t i) { return at + i < text.size() ? static_cast<unsigned char>(text[at + i]) : 0u; };
  auto in = [](unsigned v, unsigned low, unsigned high) { return v >= low && v <= high; };
  const unsigned b0 = byte(0);
  if (b0 < 0x80) return 1;
  // The second byte's range depends on the first (this excludes overlong forms, surrogates and > U+10FFFF).
  unsigned low = 0x80, high = 0xBF;
  size_t length = 0;
  if (in(b0, 0xC2, 0xDF)) {
    length = 2;
  } else if (in(b0, 0xE0, 0xEF)) {
    length = 3;
    if (b0 == 0xE0) low = 0xA0;
    if (b0 == 0xED) high = 0x9F;
  } else if (in(b0, 0xF0, 0xF4)) {
    length = 4;
    if (b0 == 0xF0) low = 0x90;
    if (b0 == 0xF4) high = 0x8F;
  } else {
    return 0;
  }
  if (!in(byte(1), low, high)) return 0;
  for (size_t i = 2; i < length; ++i) {
    if (!in(byte(i), 0x80, 0xBF)) return 0;
  }
  return length;
}

bool is_valid(std::string_view text) {
  for (size_t at = 0; at < text.size();) {
    const size_t n = sequence_length(text, at);
    if (n == 0) return false;
    at += n;
  }
  return true;
}

std::string replace_invalid(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t at = 0; at < text.size();) {
    const size_t n = sequence_length(text, at);
    if (n == 0) {
      out += "\xEF\xBF\xBD";  // U+FFFD
      ++at;
    } else {
      out.append(text, at, n);
      at += n;
    }
  }
  return out;
}

std::string printable(std::string_view text, size_t max_bytes) {
  const bool cut = max_bytes > 0 && text.size() > max_bytes;
  const std::string_view shown = cut ? text.substr(0, max_bytes) : text;
  std::string out;
  out.reserve(shown.size());
  for (size_t at = 0; at < shown.size();) {
    const size_t n = sequence_length(shown, at);
    const auto c = static_cast<unsigned char>(shown[at]);
    if (n > 1) {
      out.append(shown, at, n);
      at += n;
      continue;
    }
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (n == 0 || c < 0x20 || c == 0x7F) {
      static const char* const kHex = "0123456789abcdef";
      out += {'\\', 'x', kHex[c >> 4], kHex[c & 0xF]};
    } else {
      out += static_cast<char>(c);
    }
    ++at;
  }
  if (cut) out += "... (" + std::to_string(text.size()) + " bytes)";
  return out;
}

void append(std::string& out, unsigned cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

}  // namespace rn50::utf8
