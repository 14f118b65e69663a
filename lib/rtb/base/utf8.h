// UTF-8 validation (RFC 3629): YAML documents must be valid UTF-8 and JSON output must be, while
// our inputs (logs, dumps, cluster output) may hold any bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace rtb::utf8 {

// Length of the well-formed UTF-8 sequence that starts at text[i] (1 for ASCII; no overlong
// forms, no surrogates, nothing above U+10FFFF), or 0 when none starts there.
std::size_t sequence_length(std::string_view text, std::size_t i);

// Appends code point `code` (at most U+10FFFF) encoded as UTF-8.
void append(std::string& out, std::uint32_t code);

// Offset of the first byte of `text` that is not part of a well-formed sequence, or npos.
std::size_t find_invalid(std::string_view text);

}  // namespace rtb::utf8
