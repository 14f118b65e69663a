#include "rtb/base/error.h"

namespace rtb {
namespace {

std::string describe(const std::string& file, std::int64_t line, const std::string& message) {
  if (file.empty()) return message;
  if (line <= 0) return fmt::format("{}: {}", file, message);
  return fmt::format("{}:{}: {}", file, line, message);
}

}  // namespace

Error::Error(std::string file, std::int64_t line, std::string message)
    : std::runtime_error(describe(file, line, message)),
      file_(std::move(file)),
      line_(line),
      message_(std::move(message)) {}

Error Error::in_file(const std::string& file, std::int64_t line) const {
  if (!file_.empty()) return *this;
  return Error(file, line_ > 0 ? line_ : line, message_);
}

}  // namespace rtb
