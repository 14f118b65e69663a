// Input and output files. `-` means stdin (inputs) or stdout (outputs).
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

namespace rtb {

// Reads a whole (small) input file, or stdin for "-". Throws Error naming the path.
std::string read_file(const std::string& path);

// The name used for `path` in messages: "<stdin>" for "-", else the path itself.
std::string display_name(const std::string& path);

// Reads a (possibly huge) input line by line with bounded memory, calling `on_line` with each
// line without its '\n' (a trailing '\r' is kept) and its 1-based number. `on_line` returns
// false to stop early. Throws Error on read errors.
void for_each_line(const std::string& path,
                   const std::function<bool(std::string_view line, std::size_t number)>& on_line);

// Writes `content` to `path`:
// - "-" goes to stdout;
// - an existing path that is not a regular file (a pipe, a terminal, /dev/stdout, /dev/null) is
//   written directly, never renamed over;
// - anything else is written to a temporary file in the same directory and renamed over `path`,
//   so an old file is never left half-written and a failed write leaves it untouched.
// Throws Error naming the path on failure.
void write_output(const std::string& path, std::string_view content);

}  // namespace rtb
