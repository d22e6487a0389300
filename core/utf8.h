// core/utf8.h: the UTF-8 validity of byte strings. Names from the file system (class folders, paths) are bytes, any
// but '/' and NUL: text for people shows a byte that is not UTF-8 as U+FFFD, and JSON that must give the bytes back
// escapes it (safetensors::encode_string_list).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace rn50::utf8 {

// The length (1 to 4) of the well-formed UTF-8 sequence that starts at text[at], or 0 when none starts there (a
// continuation byte, an overlong form, a surrogate, a code point above U+10FFFF, a sequence cut short).
size_t sequence_length(std::string_view text, size_t at);

bool is_valid(std::string_view text);

// Appends the code point `cp` (at most U+10FFFF, no surrogate: the caller checks) as UTF-8.
void append(std::string& out, unsigned cp);

// `text` with each byte that starts no well-formed sequence replaced by U+FFFD, as a decoder that replaces does.
std::string replace_invalid(std::string_view text);

// `text` for one line of a log or an error message: a control character escaped (\n, \r, \t, \xNN), so that a
// name cannot end the line or forge the next, and a byte that starts no well-formed sequence as \xNN; when it is
// longer than max_bytes (0: any length), its first max_bytes with "... (N bytes)".
std::string printable(std::string_view text, size_t max_bytes = 0);

}  // namespace rn50::utf8
