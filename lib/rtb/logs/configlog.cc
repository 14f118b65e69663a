#include "rtb/logs/configlog.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <string.h>  // memmem, memrchr (GNU)
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "rtb/base/error.h"
#include "rtb/base/io.h"
#include "rtb/base/literal.h"
#include "rtb/base/text.h"

namespace rtb::logs {
namespace {

constexpr std::string_view kMarker = kConfigParamMarker;
constexpr std::size_t kBlockSize = 4u << 20;
// A partial line longer than this keeps only what may still matter (see append_carry).
constexpr std::size_t kMaxCarry = 1u << 20;

bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

bool has_text(const char* begin, const char* end) {
  for (const char* p = begin; p < end; ++p) {
    if (!is_blank(*p)) return true;
  }
  return false;
}

// [A-Za-z0-9_.-], as a table: this runs on every character of every key.
constexpr std::array<bool, 256> kKeyChars = [] {
  std::array<bool, 256> table{};
  for (int c = 0; c < 256; ++c) {
    table[c] = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               c == '_' || c == '.' || c == '-';
  }
  return table;
}();

bool is_key_char(char c) { return kKeyChars[static_cast<unsigned char>(c)]; }

// Counts '\n' with memchr, which glibc vectorises: several GB/s on log lines of normal length.
std::size_t count_newlines(const char* begin, const char* end) {
  std::size_t n = 0;
  for (const char* p = begin; p < end; ++n, ++p) {
    p = static_cast<const char*>(memchr(p, '\n', static_cast<std::size_t>(end - p)));
    if (p == nullptr) break;
  }
  return n;
}

// --- canonical values ----------------------------------------------------------------------------

std::string canonical_number(std::string_view text) {
  std::string_view digits = text;
  if (!digits.empty() && (digits.front() == '+' || digits.front() == '-')) digits.remove_prefix(1);
  bool integer = !digits.empty() && std::all_of(digits.begin(), digits.end(),
                                                [](char c) { return c >= '0' && c <= '9'; });
  if (integer && digits.size() > 18) {
    // Exact, beyond what a double tells apart.
    std::size_t nonzero = digits.find_first_not_of('0');
    std::string out = text.front() == '-' ? "-" : "";
    return out + std::string(digits.substr(nonzero == std::string_view::npos ? digits.size() - 1
                                                                             : nonzero));
  }
  std::string_view parse = text.front() == '+' ? text.substr(1) : text;
  double value = 0;
  std::from_chars(parse.data(), parse.data() + parse.size(), value);
  if (std::isfinite(value) && value == std::floor(value) && std::fabs(value) < 1e18) {
    return std::to_string(static_cast<long long>(value));
  }
  return fmt::format("{}", value);
}

bool is_number(std::string_view text) {
  std::string_view parse = text;
  if (!parse.empty() && parse.front() == '+') parse.remove_prefix(1);
  if (parse.empty() || parse.front() == '+') return false;
  double value = 0;
  auto [end, ec] = std::from_chars(parse.data(), parse.data() + parse.size(), value);
  return ec == std::errc() && end == parse.data() + parse.size();
}

// `Name.MEMBER`: an enum member as Python prints it; its meaning is the member's name.
std::optional<std::string> enum_member(std::string_view text) {
  std::size_t dot = text.find('.');
  if (dot == std::string_view::npos || dot == 0 || dot + 1 == text.size()) return std::nullopt;
  std::string_view type = text.substr(0, dot), member = text.substr(dot + 1);
  if (!(type.front() >= 'A' && type.front() <= 'Z')) return std::nullopt;
  for (char c : type) {
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')))
      return std::nullopt;
  }
  std::string lower;
  for (char c : member) {
    if (!((c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_')) return std::nullopt;
    lower += static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  }
  return lower;
}

std::string canonical_bare(std::string_view text) {
  if (text == "True" || text == "true" || text == "TRUE") return "b:true";
  if (text == "False" || text == "false" || text == "FALSE") return "b:false";
  if (text == "None" || text == "null" || text == "Null" || text == "NULL" || text == "~")
    return "null";
  if (is_number(text)) return "n:" + canonical_number(text);
  if (auto member = enum_member(text)) return "s:" + *member;
  return "s:" + std::string(text);
}

// The canonical form of a literal read with bare words (the Python and YAML-flow literals
// MaxText prints and flags are written in): words mean what canonical_bare() says, dicts compare
// in any key order. Recursion is bounded by the parser's nesting limit.
std::string canonical_literal(const Literal& value) {
  switch (value.kind) {
    case Literal::Kind::kString:
      return "s:" + value.text;
    case Literal::Kind::kList:
    case Literal::Kind::kTuple: {
      std::string out = "[";
      for (std::size_t i = 0; i < value.items.size(); ++i) {
        if (i > 0) out += ',';
        out += canonical_literal(value.items[i]);
      }
      return out + "]";
    }
    case Literal::Kind::kDict: {
      std::vector<std::pair<std::string, std::string>> entries;
      for (const auto& [key, item] : value.entries)
        entries.emplace_back(canonical_literal(key), canonical_literal(item));
      std::stable_sort(entries.begin(), entries.end(),
                       [](const auto& x, const auto& y) { return x.first < y.first; });
      std::string out = "{";
      for (std::size_t i = 0; i < entries.size(); ++i) {
        if (i > 0) out += ',';
        out += entries[i].first + ":" + entries[i].second;
      }
      return out + "}";
    }
    default:  // with bare words, every other scalar is a word
      return canonical_bare(value.text);
  }
}

int open_input(const std::string& path) {
  if (path == "-") return STDIN_FILENO;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail_at(path, 0, "cannot open: {}", std::strerror(errno));
  return fd;
}

// Reads up to `want` bytes (fewer only at the end of the input). Throws on read errors.
std::size_t read_some(int fd, char* buffer, std::size_t want, const std::string& name) {
  std::size_t got = 0;
  while (got < want) {
    ssize_t n = ::read(fd, buffer + got, want - got);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail_at(name, 0, "cannot read: {}", std::strerror(errno));
    }
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  return got;
}

class Input {
 public:
  explicit Input(const std::string& path) : path_(path), fd_(open_input(path)) {}
  ~Input() {
    if (fd_ != STDIN_FILENO && fd_ >= 0) ::close(fd_);
  }
  Input(const Input&) = delete;
  Input& operator=(const Input&) = delete;
  std::size_t read(char* buffer, std::size_t want) {
    return read_some(fd_, buffer, want, display_name(path_));
  }

 private:
  std::string path_;
  int fd_;
};

}  // namespace

// --- lines and dumps ---------------------------------------------------------------------------

std::optional<std::pair<std::string_view, std::string_view>> parse_config_param_line(
    std::string_view line) {
  std::size_t at = line.find(kMarker);
  if (at == std::string_view::npos) return std::nullopt;
  std::string_view rest = line.substr(at + kMarker.size());
  if (!rest.empty() && rest.back() == '\r') rest.remove_suffix(1);
  std::size_t colon = rest.find(": ");
  std::string_view key, value;
  if (colon != std::string_view::npos) {
    key = rest.substr(0, colon);
    value = rest.substr(colon + 2);
  } else if (!rest.empty() && rest.back() == ':') {
    key = rest.substr(0, rest.size() - 1);  // an empty value whose trailing blank was stripped
  } else {
    return std::nullopt;
  }
  if (key.empty() || !std::all_of(key.begin(), key.end(), is_key_char)) return std::nullopt;
  return std::make_pair(key, value);
}

ConfigLogScanner::ConfigLogScanner(ConfigLogOptions options) : options_(options) {}

void ConfigLogScanner::note_other(const char* begin, const char* end) {
  if (other_text_ && other_after_last_) return;  // nothing left to learn
  if (has_text(begin, end)) other_text_ = other_after_last_ = true;
}

void ConfigLogScanner::process_line(std::string_view line, std::size_t number) {
  if (auto param = parse_config_param_line(line)) {
    add_param(param->first, param->second, number);
  } else {
    note_other(line.data(), line.data() + line.size());
  }
}

void ConfigLogScanner::process_lines(const char* p, const char* end) {
  // Only lines holding the marker are looked at; the rest is counted and skipped.
  while (p < end) {
    const char* hit = static_cast<const char*>(
        memmem(p, static_cast<std::size_t>(end - p), kMarker.data(), kMarker.size()));
    if (!hit) {
      note_other(p, end);
      lines_ += count_newlines(p, end);
      return;
    }
    const char* before =
        static_cast<const char*>(memrchr(p, '\n', static_cast<std::size_t>(hit - p)));
    const char* line_start = before ? before + 1 : p;
    note_other(p, line_start);
    lines_ += count_newlines(p, line_start);
    const char* line_end =
        static_cast<const char*>(memchr(hit, '\n', static_cast<std::size_t>(end - hit)));
    // `end` follows a '\n', so the line ends before it.
    process_line(std::string_view(line_start, static_cast<std::size_t>(line_end - line_start)),
                 lines_ + 1);
    ++lines_;
    p = line_end + 1;
  }
}

void ConfigLogScanner::feed(std::string_view block) {
  const char* p = block.data();
  const char* end = p + block.size();
  if (!carry_.empty()) {
    const char* newline = static_cast<const char*>(memchr(p, '\n', block.size()));
    if (!newline) {
      carry_.append(p, end);
      p = end;
    } else {
      carry_.append(p, newline);
      if (carry_text_ && !parse_config_param_line(carry_)) other_text_ = other_after_last_ = true;
      process_line(carry_, lines_ + 1);
      ++lines_;
      carry_.clear();
      carry_text_ = false;
      p = newline + 1;
    }
  }
  if (p < end) {
    const char* last =
        static_cast<const char*>(memrchr(p, '\n', static_cast<std::size_t>(end - p)));
    if (last) {
      process_lines(p, last + 1);
      p = last + 1;
    }
    carry_.append(p, end);
  }
  if (carry_.size() > kMaxCarry) {
    // A very long line: keep it from its marker on (the prefix says nothing), or, without one
    // yet, only the bytes that may begin a marker.
    std::size_t at = carry_.find(kMarker);
    std::size_t drop = at != std::string::npos ? at : carry_.size() - (kMarker.size() - 1);
    if (drop > 0) {
      carry_text_ = carry_text_ || has_text(carry_.data(), carry_.data() + drop);
      carry_.erase(0, drop);
    }
  }
}

void ConfigLogScanner::add_param(std::string_view key, std::string_view value, std::size_t number) {
  if (!open_ || !(key > std::string_view(last_key_))) {
    if (open_) close_dump(false, false);
    ConfigDumpInfo info;
    info.number = dumps_.size() + 1;
    info.first_line = number;
    info.first_key = std::string(key);
    dumps_.push_back(std::move(info));
    open_ = true;
    current_count_ = 0;
  }
  ConfigDumpInfo& info = dumps_.back();
  last_key_.assign(key);
  info.last_line = number;
  ++info.params;
  bool keep = options_.dump ? info.number == *options_.dump : !options_.list_only;
  if (keep) {
    // Settings are overwritten in place, so that a log of many dumps reuses their buffers.
    if (current_count_ == current_.size()) current_.emplace_back();
    ConfigSetting& setting = current_[current_count_++];
    setting.key.assign(key);
    setting.value.assign(value);
    setting.line = number;
    // A NUL cannot come from Python's str(); such a log is damaged (reported by finish()).
    if (nul_line_ == 0 && value.find('\0') != std::string_view::npos) {
      nul_line_ = number;
      nul_key_.assign(key);
    }
  }
  other_after_last_ = false;
}

void ConfigLogScanner::close_dump(bool at_end, bool cut_line) {
  ConfigDumpInfo& info = dumps_.back();
  info.last_key = last_key_;
  open_ = false;
  if (at_end && cut_line) {
    info.incomplete_reason = "the log's last line is cut";
  } else if (at_end && other_text_ && !other_after_last_) {
    info.incomplete_reason = fmt::format("the log ends right after its line {} ({}): it was cut",
                                         info.last_line, info.last_key);
  }
  bool within_bounds =
      !have_bounds_ || (info.last_key >= max_last_key_ && info.first_key <= min_first_key_);
  if (info.incomplete_reason.empty()) {
    if (!have_bounds_ || info.last_key > max_last_key_) max_last_key_ = info.last_key;
    if (!have_bounds_ || info.first_key < min_first_key_) min_first_key_ = info.first_key;
    have_bounds_ = true;
  }
  // With list_only, current_count_ is 0: only the number is kept, for the listing.
  bool wanted = options_.dump ? info.number == *options_.dump
                              : within_bounds && info.incomplete_reason.empty();
  if (wanted) {
    std::swap(kept_, current_);
    kept_count_ = current_count_;
    kept_number_ = info.number;
  }
  current_count_ = 0;
}

ConfigLog ConfigLogScanner::finish(std::string source) {
  bool cut_line = false;
  if (!carry_.empty()) {
    // The last line has no newline: a config line there was cut, whether or not what is left
    // of it still parses.
    if (carry_.find(kMarker) != std::string::npos) {
      if (auto param = parse_config_param_line(carry_))
        add_param(param->first, param->second, lines_ + 1);
      cut_line = open_;
    } else {
      if (carry_text_) other_text_ = other_after_last_ = true;
      process_line(carry_, lines_ + 1);
    }
    ++lines_;
    carry_.clear();
  }
  if (open_) close_dump(true, cut_line);
  if (nul_line_ != 0) {
    fail_at(source, static_cast<std::int64_t>(nul_line_),
            "the value of {} holds a NUL byte: the log is damaged", nul_key_);
  }
  ConfigLog log;
  log.source = std::move(source);
  log.lines = lines_;
  // Completeness against the bounds of the whole log.
  const ConfigDumpInfo* latest_end = nullptr;
  const ConfigDumpInfo* earliest_start = nullptr;
  for (const ConfigDumpInfo& info : dumps_) {
    if (!info.incomplete_reason.empty()) continue;
    if (!latest_end || info.last_key > latest_end->last_key) latest_end = &info;
    if (!earliest_start || info.first_key < earliest_start->first_key) earliest_start = &info;
  }
  for (ConfigDumpInfo& info : dumps_) {
    if (!info.incomplete_reason.empty()) continue;
    if (info.last_key < latest_end->last_key) {
      info.incomplete_reason = fmt::format("it stops at {} while dump {} goes on to {}",
                                           info.last_key, latest_end->number, latest_end->last_key);
    } else if (info.first_key > earliest_start->first_key) {
      info.incomplete_reason =
          fmt::format("it starts at {} while dump {} starts at {}", info.first_key,
                      earliest_start->number, earliest_start->first_key);
    } else {
      info.complete = true;
    }
  }
  log.dumps = std::move(dumps_);
  if (kept_number_ != 0 && (options_.dump || log.dumps[kept_number_ - 1].complete)) {
    log.selected = kept_number_;
    kept_.resize(kept_count_);
    log.params = std::move(kept_);
  }
  return log;
}

void require_selected_dump(const ConfigLog& log, const ConfigLogOptions& options) {
  if (log.dumps.empty()) {
    fail_at(log.source, 0,
            "no `Config param` line: not a MaxText log, or one whose config was not logged");
  }
  auto describe = [&](const ConfigDumpInfo& info) {
    return fmt::format("config dump {} (lines {}-{}, {} keys) is truncated: {}", info.number,
                       info.first_line, info.last_line, info.params, info.incomplete_reason);
  };
  if (options.dump) {
    if (*options.dump < 1 || *options.dump > log.dumps.size()) {
      fail_at(log.source, 0, "--dump {}: the log has {} config dump{} (see --list-dumps)",
              *options.dump, log.dumps.size(), log.dumps.size() == 1 ? "" : "s");
    }
    const ConfigDumpInfo& info = log.dumps[*options.dump - 1];
    if (!info.complete)
      fail_at(log.source, static_cast<std::int64_t>(info.first_line), "{}", describe(info));
    return;
  }
  if (log.selected == 0) {
    const ConfigDumpInfo& info = log.dumps.back();
    fail_at(log.source, static_cast<std::int64_t>(info.first_line), "no complete config dump: {}",
            describe(info));
  }
}

ConfigLog read_config_log(const std::string& path, const ConfigLogOptions& options) {
  Input input(path);
  ConfigLogScanner scanner(options);
  std::vector<char> buffer(kBlockSize);
  for (;;) {
    std::size_t n = input.read(buffer.data(), buffer.size());
    if (n == 0) break;
    scanner.feed(std::string_view(buffer.data(), n));
  }
  ConfigLog log = scanner.finish(display_name(path));
  if (!options.list_only) require_selected_dump(log, options);
  return log;
}

ConfigLogOrText read_config_log_or_text(const std::string& path, const ConfigLogOptions& options,
                                        const std::function<bool(std::string_view)>& is_text) {
  Input input(path);
  std::string name = display_name(path);
  std::vector<char> buffer(kBlockSize);
  std::size_t head = input.read(buffer.data(), kTextHeadBytes);
  ConfigLogOrText out;
  if (is_text(std::string_view(buffer.data(), head))) {
    std::string text(buffer.data(), head);
    for (;;) {
      std::size_t n = input.read(buffer.data(), buffer.size());
      if (n == 0) break;
      text.append(buffer.data(), n);
    }
    out.text = std::move(text);
    return out;
  }
  ConfigLogScanner scanner(options);
  if (head > 0) scanner.feed(std::string_view(buffer.data(), head));
  for (;;) {
    std::size_t n = input.read(buffer.data(), buffer.size());
    if (n == 0) break;
    scanner.feed(std::string_view(buffer.data(), n));
  }
  out.log = scanner.finish(name);
  if (!options.list_only) require_selected_dump(out.log, options);
  return out;
}

// --- comparing -----------------------------------------------------------------------------------

std::string canonical_config_value(std::string_view value) {
  std::string_view text = trim(value);
  if (text.empty()) return "s:";
  char first = text.front();
  if (first == '[' || first == '(' || first == '{' || first == '\'' || first == '"') {
    try {
      return canonical_literal(parse_literal(text, {.bare_words = true}));
    } catch (const Error&) {
    }
    // Not a literal after all: compare the text without its blanks outside quotes.
    std::string out = "t:";
    for (char c : text) {
      if (!is_blank(c)) out += c;
    }
    return out;
  }
  return canonical_bare(text);
}

std::string canonical_config_literal(const Literal& value) { return canonical_literal(value); }

void mask_settings(std::vector<ConfigSetting>& settings, const SecretMasker& masker) {
  if (!masker.masks()) return;
  for (ConfigSetting& setting : settings) {
    setting.value = masker.value(setting.key, setting.value);
    setting.origin = masker.scrub(setting.origin);
  }
}

}  // namespace rtb::logs
