#include "rtb/bench/configlog.h"

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
#include <map>

#include "rtb/base/error.h"
#include "rtb/base/io.h"
#include "rtb/base/text.h"
#include "rtb/bench/diff_render.h"
#include "rtb/k8s/diff.h"
#include "rtb/k8s/flags.h"
#include "rtb/k8s/yaml.h"

namespace rtb::bench {
namespace {

constexpr std::string_view kMarker = "Config param ";
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

// Parses the Python/YAML-flow literals MaxText prints and flags are written in: lists, tuples,
// dicts, quoted strings and bare words. Recursion is bounded by kMaxDepth.
class ValueParser {
 public:
  explicit ValueParser(std::string_view text) : text_(text) {}

  std::optional<std::string> parse_all() {
    auto value = parse_value(0, false);
    skip_blanks();
    if (!value || pos_ != text_.size()) return std::nullopt;
    return value;
  }

 private:
  static constexpr int kMaxDepth = 64;

  void skip_blanks() {
    while (pos_ < text_.size() && is_blank(text_[pos_])) ++pos_;
  }

  std::optional<std::string> parse_value(int depth, bool dict_key) {
    if (depth > kMaxDepth) return std::nullopt;
    skip_blanks();
    if (pos_ >= text_.size()) return std::nullopt;
    char c = text_[pos_];
    if (c == '[' || c == '(') return parse_sequence(depth, c == '[' ? ']' : ')');
    if (c == '{') return parse_dict(depth);
    if (c == '\'' || c == '"') return parse_quoted();
    std::size_t start = pos_;
    while (pos_ < text_.size()) {
      char d = text_[pos_];
      if (d == ',' || d == ']' || d == ')' || d == '}' || d == '[' || d == '(' || d == '{' ||
          (dict_key && d == ':')) {
        break;
      }
      ++pos_;
    }
    std::string_view word = trim(text_.substr(start, pos_ - start));
    if (word.empty()) return std::nullopt;
    return canonical_bare(word);
  }

  std::optional<std::string> parse_quoted() {
    char quote = text_[pos_++];
    std::string out = "s:";
    while (pos_ < text_.size() && text_[pos_] != quote) {
      char c = text_[pos_++];
      if (c == '\\' && pos_ < text_.size()) {
        char e = text_[pos_++];
        switch (e) {
          case 'n':
            out += '\n';
            break;
          case 't':
            out += '\t';
            break;
          case 'r':
            out += '\r';
            break;
          case '\\':
          case '\'':
          case '"':
            out += e;
            break;
          default:
            out += '\\';
            out += e;
        }
      } else {
        out += c;
      }
    }
    if (pos_ >= text_.size()) return std::nullopt;
    ++pos_;
    return out;
  }

  std::optional<std::string> parse_sequence(int depth, char close) {
    ++pos_;
    std::vector<std::string> items;
    for (;;) {
      skip_blanks();
      if (pos_ < text_.size() && text_[pos_] == close) break;
      auto item = parse_value(depth + 1, false);
      if (!item) return std::nullopt;
      items.push_back(std::move(*item));
      skip_blanks();
      if (pos_ < text_.size() && text_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (pos_ < text_.size() && text_[pos_] == close) break;
      return std::nullopt;
    }
    ++pos_;
    std::string out = "[";
    for (std::size_t i = 0; i < items.size(); ++i) out += (i ? "," : "") + items[i];
    return out + "]";
  }

  std::optional<std::string> parse_dict(int depth) {
    ++pos_;
    std::vector<std::pair<std::string, std::string>> entries;
    for (;;) {
      skip_blanks();
      if (pos_ < text_.size() && text_[pos_] == '}') break;
      auto key = parse_value(depth + 1, true);
      skip_blanks();
      if (!key || pos_ >= text_.size() || text_[pos_] != ':') return std::nullopt;
      ++pos_;
      auto value = parse_value(depth + 1, false);
      if (!value) return std::nullopt;
      entries.emplace_back(std::move(*key), std::move(*value));
      skip_blanks();
      if (pos_ < text_.size() && text_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (pos_ < text_.size() && text_[pos_] == '}') break;
      return std::nullopt;
    }
    ++pos_;
    std::stable_sort(entries.begin(), entries.end(),
                     [](const auto& x, const auto& y) { return x.first < y.first; });
    std::string out = "{";
    for (std::size_t i = 0; i < entries.size(); ++i)
      out += (i ? "," : "") + entries[i].first + ":" + entries[i].second;
    return out + "}";
  }

  std::string_view text_;
  std::size_t pos_ = 0;
};

// --- renders ----------------------------------------------------------------------------------

std::optional<long long> as_integer(const std::string& text) {
  long long value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

// Flags whose MaxText key Tunix sets only when the value is positive (0 means "not set").
bool only_when_positive(std::string_view flag) {
  return flag == "maxtext_padded_moe_mlp_dim" || flag == "rollout_mesh_tp" ||
         flag == "base_num_kv_heads" || flag == "profiler_steps";
}

// Flags whose MaxText key Tunix sets only when the profiler runs (--profiler_steps > 0).
bool profiler_flag(std::string_view flag) {
  return flag == "profiler_steps" || flag == "skip_first_n_profiler_steps" ||
         flag == "profiler_period";
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

// A render, not a log: Kubernetes YAML at column 0 and no config line in the first bytes.
bool looks_like_render(std::string_view head) {
  if (head.find(kMarker) != std::string_view::npos) return false;
  for (std::string_view start : {"kind:", "apiVersion:"}) {
    if (head.rfind(start, 0) == 0) return true;
    if (head.find("\n" + std::string(start)) != std::string_view::npos) return true;
  }
  return false;
}

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

// --- renders -----------------------------------------------------------------------------------

std::optional<std::string> maxtext_key_of_flag(std::string_view key) {
  static const std::map<std::string_view, std::string_view> kKeys = {
      {"maxtext_model_name", "model_name"},
      {"maxtext_ckpt_path", "load_parameters_path"},
      {"maxtext_load_parameters_path", "load_parameters_path"},
      {"maxtext_output_directory", "base_output_directory"},
      {"maxtext_padded_moe_mlp_dim", "padded_base_moe_mlp_dim"},
      {"worker_id", "run_name"},
      {"mesh_fsdp", "ici_fsdp_parallelism"},
      {"mesh_tp", "ici_tensor_parallelism"},
      {"mesh_expert", "ici_expert_parallelism"},
      {"mesh_context", "ici_context_parallelism"},
      {"learning_rate", "learning_rate"},
      {"optimizer_learning_rate", "learning_rate"},
      {"rollout_mesh_tp", "rollout_tensor_parallelism"},
      {"base_num_kv_heads", "base_num_kv_heads"},
      {"prefuse_moe_weights", "prefuse_moe_weights"},
      {"use_weight_converter", "use_weight_converter"},
      {"profiler_steps", "profiler_steps"},
      {"skip_first_n_profiler_steps", "skip_first_n_steps_for_profiler"},
      {"profiler_period", "profile_periodically_period"},
  };
  auto it = kKeys.find(key);
  if (it != kKeys.end()) return std::string(it->second);
  constexpr std::string_view kPrefix = "maxtext_";
  if (key.size() > kPrefix.size() && key.compare(0, kPrefix.size(), kPrefix) == 0)
    return std::string(key.substr(kPrefix.size()));
  return std::nullopt;
}

std::vector<ConfigSetting> config_from_render(const k8s::DryRun& dryrun,
                                              const k8s::RoleMains& mains) {
  std::vector<DiffDocument> docs = diff_documents(dryrun, mains);
  const DiffDocument* trainer = nullptr;
  std::size_t jobsets = 0;
  for (const DiffDocument& doc : docs) {
    if (doc.kind != "JobSet") continue;
    ++jobsets;
    if (doc.role == k8s::Role::kTrainer) {
      if (trainer) {
        fail_at(dryrun.source, static_cast<std::int64_t>(doc.doc->first_line),
                "more than one trainer JobSet ({} and {})", trainer->name, doc.name);
      }
      trainer = &doc;
    }
  }
  if (!trainer && jobsets == 1) {
    for (const DiffDocument& doc : docs) {
      if (doc.kind == "JobSet") trainer = &doc;
    }
  }
  if (!trainer) {
    fail_at(dryrun.source, 0, "no trainer JobSet (--process_main={})", mains.trainer);
  }
  // Parse the client on the document itself first: its errors carry input lines.
  k8s::ClientCommand client = k8s::JobSetView(*trainer->doc).client(dryrun.source);
  std::size_t line = client.startup_line;
  YAML::Node expanded = k8s::expand_for_diff(trainer->doc->root);
  YAML::Node startup;
  for (std::string_view list : {"initContainers", "containers"}) {
    YAML::Node jobs = k8s::yaml::lookup(k8s::yaml::lookup(expanded, "spec"), "replicatedJobs");
    for (const auto& job : jobs) {
      YAML::Node containers = k8s::yaml::lookup(
          k8s::yaml::descend(job, {"template", "spec", "template", "spec"}), list);
      if (!containers.IsSequence()) continue;
      for (const auto& container : containers) {
        if (k8s::yaml::scalar_at(container, "name") == client.container.name())
          startup.reset(k8s::yaml::lookup(container, "startup"));
      }
    }
  }
  if (!startup.IsDefined() || !startup.IsMap()) {
    fail_at(dryrun.source, static_cast<std::int64_t>(line),
            "the trainer's startup command cannot be read");
  }
  std::map<std::string, ConfigSetting> settings;
  // The argv: what Tunix maps to MaxText keys.
  std::map<std::string, std::string> argv;  // flag key -> value, the last occurrence winning
  std::map<std::string, std::string> argv_items;
  YAML::Node argv_node = k8s::yaml::lookup(startup, "argv");
  if (argv_node.IsMap()) {
    for (const auto& kv : argv_node) {
      const std::string& item = kv.second.Scalar();
      std::string_view key = flag_key(item, k8s::FlagStyle::kDashDash);
      if (key.empty()) continue;
      auto value = flag_value(item, k8s::FlagStyle::kDashDash);
      argv[std::string(key)] =
          value ? std::string(*value)
                : (is_negated(item, k8s::FlagStyle::kDashDash) ? "false" : "true");
      argv_items[std::string(key)] = item;
    }
  }
  bool profiling =
      argv.count("profiler_steps") && as_integer(argv["profiler_steps"]).value_or(0) > 0;
  for (const auto& [flag, value] : argv) {
    auto key = maxtext_key_of_flag(flag);
    if (!key) continue;
    if (only_when_positive(flag) && as_integer(value).value_or(0) <= 0) continue;
    if (profiler_flag(flag) && !profiling) continue;
    if ((flag == "maxtext_ckpt_path" || flag == "maxtext_load_parameters_path") && value.empty())
      continue;
    settings[*key] = {*key, value, line, argv_items[flag]};
  }
  // max_target_length: the rows the trainer is fed, at least prompt + response.
  if (argv.count("max_prompt_length") && argv.count("max_response_length")) {
    auto prompt = as_integer(argv["max_prompt_length"]);
    auto response = as_integer(argv["max_response_length"]);
    if (prompt && response) {
      long long length = *prompt + *response;
      std::string origin =
          argv_items["max_prompt_length"] + " " + argv_items["max_response_length"];
      if (argv.count("max_seq_token_per_tpu")) {
        auto packed = as_integer(argv["max_seq_token_per_tpu"]);
        if (packed && *packed > length) {
          length = *packed;
          origin = argv_items["max_seq_token_per_tpu"];
        }
      }
      settings["max_target_length"] = {"max_target_length", std::to_string(length), line, origin};
    }
  }
  // MAXTEXT_EXTRA_FLAGS, appended last by Tunix: it overrides.
  YAML::Node extra = k8s::yaml::descend(startup, {"env", "MAXTEXT_EXTRA_FLAGS"});
  if (extra.IsMap()) {
    for (const auto& kv : extra) {
      const std::string& item = kv.second.Scalar();
      std::string_view key = flag_key(item, k8s::FlagStyle::kKeyValue);
      auto value = flag_value(item, k8s::FlagStyle::kKeyValue);
      if (key.empty() || !value) continue;
      settings[std::string(key)] = {std::string(key), std::string(*value), line,
                                    "MAXTEXT_EXTRA_FLAGS " + item};
    }
  }
  std::vector<ConfigSetting> out;
  for (auto& [key, setting] : settings) out.push_back(std::move(setting));
  return out;
}

ConfigSide read_config_side(const std::string& path, const ConfigLogOptions& options,
                            const k8s::RoleMains& mains) {
  Input input(path);
  std::string name = display_name(path);
  std::vector<char> buffer(kBlockSize);
  std::size_t head = input.read(buffer.data(), 1u << 20);
  ConfigSide side;
  side.source = name;
  if (looks_like_render(std::string_view(buffer.data(), head))) {
    std::string text(buffer.data(), head);
    for (;;) {
      std::size_t n = input.read(buffer.data(), buffer.size());
      if (n == 0) break;
      text.append(buffer.data(), n);
    }
    side.kind = ConfigSide::Kind::kRender;
    side.settings = config_from_render(k8s::parse_dryrun(text, name), mains);
    return side;
  }
  ConfigLogScanner scanner(options);
  if (head > 0) scanner.feed(std::string_view(buffer.data(), head));
  for (;;) {
    std::size_t n = input.read(buffer.data(), buffer.size());
    if (n == 0) break;
    scanner.feed(std::string_view(buffer.data(), n));
  }
  ConfigLog log = scanner.finish(name);
  if (!options.list_only) require_selected_dump(log, options);
  side.kind = ConfigSide::Kind::kLog;
  side.settings = std::move(log.params);
  side.dump = log.selected;
  side.dumps = std::move(log.dumps);
  return side;
}

// --- comparing -----------------------------------------------------------------------------------

std::string canonical_config_value(std::string_view value) {
  std::string_view text = trim(value);
  if (text.empty()) return "s:";
  char first = text.front();
  if (first == '[' || first == '(' || first == '{' || first == '\'' || first == '"') {
    if (auto parsed = ValueParser(text).parse_all()) return *parsed;
    // Not a literal after all: compare the text without its blanks outside quotes.
    std::string out = "t:";
    for (char c : text) {
      if (!is_blank(c)) out += c;
    }
    return out;
  }
  return canonical_bare(text);
}

std::string_view config_kind_name(ConfigDifference::Kind kind) {
  switch (kind) {
    case ConfigDifference::Kind::kAdded:
      return "added";
    case ConfigDifference::Kind::kRemoved:
      return "removed";
    case ConfigDifference::Kind::kChanged:
      return "changed";
  }
  return "changed";
}

std::vector<ConfigDifference> diff_configs(const ConfigSide& a, const ConfigSide& b,
                                           const std::function<bool(std::string_view)>& keep_key) {
  // The last setting of a key wins (a log never repeats one within a dump).
  std::map<std::string, const ConfigSetting*> left, right;
  for (const ConfigSetting& s : a.settings) left[s.key] = &s;
  for (const ConfigSetting& s : b.settings) right[s.key] = &s;
  bool a_render = a.kind == ConfigSide::Kind::kRender;
  bool b_render = b.kind == ConfigSide::Kind::kRender;
  // Against a log, a render's few keys are the question; every other key is not.
  bool only_a = a_render && !b_render, only_b = b_render && !a_render;
  std::vector<std::string> keys;
  for (const auto& [key, _] : left) {
    if (!only_b || right.count(key)) keys.push_back(key);
  }
  for (const auto& [key, _] : right) {
    if (!left.count(key) && !only_a) keys.push_back(key);
  }
  std::sort(keys.begin(), keys.end());
  std::vector<ConfigDifference> out;
  for (const std::string& key : keys) {
    if (keep_key && !keep_key(key)) continue;
    auto x = left.find(key);
    auto y = right.find(key);
    if (x == left.end()) {
      out.push_back({ConfigDifference::Kind::kAdded, key, std::nullopt, *y->second});
    } else if (y == right.end()) {
      out.push_back({ConfigDifference::Kind::kRemoved, key, *x->second, std::nullopt});
    } else if (canonical_config_value(x->second->value) !=
               canonical_config_value(y->second->value)) {
      out.push_back({ConfigDifference::Kind::kChanged, key, *x->second, *y->second});
    }
  }
  return out;
}

}  // namespace rtb::bench
