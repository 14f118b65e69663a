// The one error type of the library. Library code throws rtb::Error and never prints or exits;
// tools catch it at their boundary (tools/common/tool.h) and print it in one shape.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

namespace rtb {

class Error : public std::runtime_error {
 public:
  // `file` may be empty (the error is about no particular input); `line` 0 means "no line".
  Error(std::string file, std::int64_t line, std::string message);
  explicit Error(std::string message) : Error({}, 0, std::move(message)) {}

  const std::string& file() const { return file_; }
  std::int64_t line() const { return line_; }
  const std::string& message() const { return message_; }

  // The same error, attributed to `file` (and `line` when the error has none yet). Used where a
  // lower layer knows the line but not which file it was reading.
  Error in_file(const std::string& file, std::int64_t line = 0) const;

 private:
  std::string file_;
  std::int64_t line_;
  std::string message_;
};

// Throws rtb::Error with a message formatted by fmt.
template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) {
  throw Error(fmt::format(format, std::forward<Args>(args)...));
}

template <typename... Args>
[[noreturn]] void fail_at(const std::string& file, std::int64_t line,
                          fmt::format_string<Args...> format, Args&&... args) {
  throw Error(file, line, fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace rtb
