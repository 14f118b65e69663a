#include "rtb/base/secrets.h"

#include <nettle/hmac.h>
#include <sys/random.h>

#include <algorithm>
#include <cctype>
#include <cerrno>

#include "rtb/base/error.h"
#include "rtb/base/text.h"

namespace rtb {
namespace embedded {
std::string_view secrets_table();
}  // namespace embedded

namespace {

constexpr std::string_view kTableName = "data/secrets.tsv";
constexpr std::string_view kMaskPrefix = "***#";
constexpr std::string_view kBlockBegin = "-----BEGIN ";
constexpr std::string_view kBlockEnd = "-----END ";

bool is_alnum(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; }
bool is_word_char(char c) { return is_alnum(c) || c == '_'; }
bool is_token_char(char c) { return is_word_char(c) || c == '-' || c == '.'; }
bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

bool in_alphabet(char c, std::string_view alphabet) {
  if (alphabet == "upper_digit")
    return std::isupper(static_cast<unsigned char>(c)) ||
           std::isdigit(static_cast<unsigned char>(c));
  if (alphabet == "alnum") return is_alnum(c);
  if (alphabet == "alnum_") return is_word_char(c);
  return is_word_char(c) || c == '-';  // alnum_-
}

bool is_number(std::string_view text) {
  std::size_t i = 0;
  if (i < text.size() && (text[i] == '-' || text[i] == '+')) ++i;
  bool digits = false;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) ++i, digits = true;
  if (i < text.size() && text[i] == '.') {
    ++i;
    while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) ++i, digits = true;
  }
  if (digits && i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    ++i;
    if (i < text.size() && (text[i] == '-' || text[i] == '+')) ++i;
    if (i == text.size() || !std::isdigit(static_cast<unsigned char>(text[i]))) return false;
    while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) ++i;
  }
  return digits && i == text.size();
}

// A placeholder or a special token, never a credential: <think>, </s>, [PAD], {x}, ${VAR}, $VAR,
// $(cmd), {{ template }}.
bool is_placeholder(std::string_view text) {
  if (text.size() >= 2) {
    char first = text.front(), last = text.back();
    if ((first == '<' && last == '>') || (first == '[' && last == ']') ||
        (first == '{' && last == '}'))
      return true;
  }
  if (text.starts_with("${") || text.starts_with("$(")) return true;
  if (text.size() >= 2 && text[0] == '$' &&
      std::all_of(text.begin() + 1, text.end(), [](char c) { return is_word_char(c); }))
    return true;
  return false;
}

// The length of a quote at `at`: 1 for ' or ", 2 for one escaped inside a JSON string (\");
// 0 when there is none.
std::size_t quote_at(std::string_view text, std::size_t at) {
  if (at < text.size() && (text[at] == '"' || text[at] == '\'')) return 1;
  if (at + 1 < text.size() && text[at] == '\\' && (text[at + 1] == '"' || text[at + 1] == '\''))
    return 2;
  return 0;
}

// [begin, end) of the password in a URL's user:password@ authority starting at `scheme_end` (the
// index just past "://"); {0, 0} when the authority has none.
std::pair<std::size_t, std::size_t> url_password(std::string_view text, std::size_t scheme_end) {
  std::size_t end = scheme_end;
  while (end < text.size() && !is_space(text[end]) && text[end] != '/' && text[end] != '?' &&
         text[end] != '#' && text[end] != '"' && text[end] != '\'' && text[end] != '>')
    ++end;
  std::string_view authority = text.substr(scheme_end, end - scheme_end);
  std::size_t at = authority.rfind('@');
  if (at == std::string_view::npos) return {0, 0};
  std::size_t colon = authority.find(':');
  if (colon == std::string_view::npos || colon > at || colon + 1 == at) return {0, 0};
  return {scheme_end + colon + 1, scheme_end + at};
}

std::string normalized_name(std::string_view name) {
  while (!name.empty() && (name.front() == '-' || name.front() == '"' || name.front() == '\''))
    name.remove_prefix(1);
  while (!name.empty() && (name.back() == '"' || name.back() == '\'')) name.remove_suffix(1);
  std::string out;
  for (std::size_t i = 0; i < name.size(); ++i) {
    char c = name[i];
    bool hump = i > 0 && std::isupper(static_cast<unsigned char>(c)) &&
                (std::islower(static_cast<unsigned char>(name[i - 1])) ||
                 std::isdigit(static_cast<unsigned char>(name[i - 1])));
    if (hump) out += '_';
    out += (c == '-' || c == '.') ? '_'
                                  : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  }
  return out;
}

}  // namespace

std::vector<SecretRule> parse_secret_rules(std::string_view text, std::string_view file) {
  std::vector<SecretRule> rules;
  std::int64_t line_number = 0;
  bool header = false;
  for (std::string_view line : split_lines(text)) {
    ++line_number;
    if (line.empty() || line.front() == '#') continue;
    std::vector<std::string_view> cells;
    std::size_t start = 0;
    for (std::size_t tab; (tab = line.find('\t', start)) != std::string_view::npos; start = tab + 1)
      cells.push_back(line.substr(start, tab - start));
    cells.push_back(line.substr(start));
    auto fail = [&](std::string_view what) {
      throw Error(std::string(file), line_number, std::string(what));
    };
    if (cells.size() != 5)
      fail("expected 5 tab-separated columns (kind pattern min alphabet meaning)");
    if (!header) {
      if (cells[0] != "kind") fail("the first row must be the header");
      header = true;
      continue;
    }
    SecretRule rule;
    rule.pattern = std::string(cells[1]);
    rule.meaning = std::string(cells[4]);
    if (rule.pattern.empty()) fail("empty pattern");
    if (cells[0] == "name-suffix") {
      rule.kind = SecretRule::Kind::kNameSuffix;
    } else if (cells[0] == "block") {
      rule.kind = SecretRule::Kind::kBlock;
    } else if (cells[0] == "value-prefix") {
      rule.kind = SecretRule::Kind::kValuePrefix;
      if (cells[2].empty() || cells[2].find_first_not_of("0123456789") != std::string_view::npos)
        fail("value-prefix needs a minimum length");
      rule.min_length = std::stoul(std::string(cells[2]));
      if (cells[3] != "alnum" && cells[3] != "alnum_" && cells[3] != "alnum_-" &&
          cells[3] != "upper_digit")
        fail("alphabet must be one of alnum|alnum_|alnum_-|upper_digit");
      rule.alphabet = std::string(cells[3]);
    } else {
      fail("kind must be one of name-suffix|value-prefix|block");
    }
    rules.push_back(std::move(rule));
  }
  if (!header) throw Error(std::string(file), 0, "no header row");
  return rules;
}

std::vector<SecretRule> secret_rules() {
  return parse_secret_rules(embedded::secrets_table(), kTableName);
}

std::string describe_secret_rules(const std::vector<SecretRule>& rules) {
  std::string suffixes, prefixes;
  for (const SecretRule& rule : rules) {
    if (rule.kind == SecretRule::Kind::kNameSuffix) {
      suffixes += (suffixes.empty() ? "..." : " ...") + rule.pattern;
    } else if (rule.kind == SecretRule::Kind::kValuePrefix) {
      prefixes += (prefixes.empty() ? "" : " ") + rule.pattern + "...";
    }
  }
  return "Secrets: reports, explanations, diffs, logs and error messages print a credential as "
         "***# and a fingerprint (HMAC under a key drawn once per run: equal secrets, equal "
         "fingerprints). A credential is the value of a setting whose name ends in " +
         suffixes +
         " (any case, - or _) unless it is empty, a number, a path, a URL without a password or "
         "a placeholder; a word shaped like " +
         prefixes +
         "; a PEM private key; a URL's password. --show-secrets prints them in clear; files "
         "written to be run (a rendered JobSet, an AOT script) keep them. See docs/secrets.md.";
}

bool is_credential_name(std::string_view name, const std::vector<SecretRule>& rules) {
  std::string normal = normalized_name(name);
  if (normal.empty()) return false;
  for (const SecretRule& rule : rules) {
    if (rule.kind != SecretRule::Kind::kNameSuffix) continue;
    std::string_view pattern = rule.pattern;
    if (std::string_view(normal).ends_with(pattern)) return true;
    if (pattern.front() == '_' && normal == pattern.substr(1)) return true;
  }
  return false;
}

bool looks_like_credential(std::string_view value) {
  if (value.empty() || value.starts_with(kMaskPrefix)) return false;
  if (is_number(value) || is_placeholder(value)) return false;
  std::string word = lower_ascii(value);
  for (std::string_view plain : {"true", "false", "yes", "no", "on", "off", "none", "null"})
    if (word == plain) return false;
  if (value.starts_with('/') || value.starts_with("./") || value.starts_with("../") ||
      value.starts_with("~/"))
    return false;
  if (std::size_t scheme = value.find("://"); scheme != std::string_view::npos)
    return url_password(value, scheme + 3).second != 0;
  return true;
}

SecretMasker::SecretMasker(bool masking, const Key& key)
    : masking_(masking), key_(key), rules_(secret_rules()) {}

SecretMasker SecretMasker::with_fresh_key() {
  // The kernel's generator, not a crypto library's (OpenSSL's RAND_bytes set up a DRBG: every run
  // paid about 8 M instructions, 6% of a render, for 32 bytes).
  Key key{};
  std::size_t filled = 0;
  while (filled < key.size()) {
    ssize_t got = ::getrandom(key.data() + filled, key.size() - filled, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0)
      throw Error("cannot draw a key for masking secrets from the system's random source");
    filled += static_cast<std::size_t>(got);
  }
  return SecretMasker(true, key);
}

SecretMasker SecretMasker::with_key(const Key& key) { return SecretMasker(true, key); }

SecretMasker SecretMasker::showing() { return SecretMasker(false, Key{}); }

std::string SecretMasker::fingerprint(std::string_view value) const {
  if (!masking_) return std::string(value);
  hmac_sha256_ctx context;
  hmac_sha256_set_key(&context, key_.size(), key_.data());
  hmac_sha256_update(&context, value.size(), reinterpret_cast<const std::uint8_t*>(value.data()));
  std::uint8_t digest[SHA256_DIGEST_SIZE];
  hmac_sha256_digest(&context, sizeof digest, digest);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(kMaskPrefix);
  for (std::size_t i = 0; i < 4; ++i) {
    out += kHex[digest[i] >> 4];
    out += kHex[digest[i] & 0xf];
  }
  return out;
}

std::string SecretMasker::value(std::string_view name, std::string_view value) const {
  if (!masking_) return std::string(value);
  if (is_credential_name(name, rules_) && looks_like_credential(value)) return fingerprint(value);
  return scrub(value);
}

std::string SecretMasker::scrub(std::string_view text) const {
  if (!masking_) return std::string(text);
  std::string out;
  out.reserve(text.size());
  // A k8s env entry {name: HF_TOKEN, value: ...} (YAML or JSON): its `value` key masks by the name.
  bool pending_env_credential = false;
  std::size_t i = 0;
  while (i < text.size()) {
    std::string_view rest = text.substr(i);
    // A PEM private key block, whole (to the end of the text when its END line is cut off).
    if (rest.starts_with(kBlockBegin)) {
      std::size_t line_end = rest.find('\n');
      std::string_view first_line = rest.substr(0, line_end);
      bool is_block = std::any_of(rules_.begin(), rules_.end(), [&](const SecretRule& rule) {
        return rule.kind == SecretRule::Kind::kBlock &&
               first_line.find(rule.pattern) != std::string_view::npos;
      });
      if (is_block) {
        std::size_t end = rest.find(kBlockEnd);
        if (end != std::string_view::npos) {
          std::size_t close = rest.find("-----", end + kBlockEnd.size());
          end = close == std::string_view::npos ? rest.size() : close + 5;
        } else {
          end = rest.size();
        }
        out += fingerprint(rest.substr(0, end));
        i += end;
        continue;
      }
    }
    if (rest.starts_with("://")) {
      auto [begin, end] = url_password(text, i + 3);
      if (end != 0 && !is_placeholder(text.substr(begin, end - begin))) {
        out.append(text.substr(i, begin - i));
        out += fingerprint(text.substr(begin, end - begin));
        i = end;
        continue;
      }
    }
    bool word_start = i == 0 || !is_token_char(text[i - 1]);
    if (word_start) {
      // A token-shaped word.
      bool masked = false;
      for (const SecretRule& rule : rules_) {
        if (rule.kind != SecretRule::Kind::kValuePrefix || !rest.starts_with(rule.pattern))
          continue;
        std::size_t end = rule.pattern.size();
        while (end < rest.size() && in_alphabet(rest[end], rule.alphabet)) ++end;
        if (end - rule.pattern.size() < rule.min_length) continue;
        if (end < rest.size() && is_word_char(rest[end])) continue;  // part of a longer identifier
        out += fingerprint(rest.substr(0, end));
        i += end;
        masked = true;
        break;
      }
      if (masked) continue;
      // A setting: NAME=VALUE, --name=value, --name value, "name": "value", name: value.
      std::size_t name_end = 0;
      while (name_end < rest.size() && is_token_char(rest[name_end])) ++name_end;
      std::string_view name = rest.substr(0, name_end);
      if (!name.empty() &&
          std::any_of(name.begin(), name.end(), [](char c) { return is_alnum(c); })) {
        std::size_t cursor = name_end + quote_at(rest, name_end);  // a quoted name's close
        std::size_t separator_end = cursor;
        bool assigned = false;
        if (separator_end < rest.size() && rest[separator_end] == '=') {
          ++separator_end;
          assigned = true;
        } else if (separator_end + 1 < rest.size() && rest[separator_end] == ':' &&
                   (rest[separator_end + 1] == ' ' || quote_at(rest, separator_end + 1) != 0)) {
          ++separator_end;
          while (separator_end < rest.size() && rest[separator_end] == ' ') ++separator_end;
          assigned = true;
        } else if (name.starts_with("-") && separator_end < rest.size() &&
                   rest[separator_end] == ' ') {
          ++separator_end;  // --name value
          assigned = true;
        } else if (name.starts_with("-") && cursor > name_end) {
          // "--name", "value": an argv written as a JSON or Python list.
          std::size_t comma = rest.find_first_not_of(' ', cursor);
          if (comma != std::string_view::npos && rest[comma] == ',') {
            std::size_t next = rest.find_first_not_of(' ', comma + 1);
            if (next != std::string_view::npos && quote_at(rest, next) != 0) {
              separator_end = next;
              assigned = true;
            }
          }
        }
        if (assigned) {
          std::size_t value_begin = separator_end, value_end = separator_end;
          if (std::size_t quote = quote_at(rest, value_begin); quote != 0) {
            // Quoted ('v', "v", or \"v\" inside a JSON string): to the same closing quote.
            std::string_view closing = rest.substr(value_begin, quote);
            value_begin += quote;
            value_end = value_begin;
            while (value_end < rest.size() && rest[value_end] != '\n' &&
                   !rest.substr(value_end).starts_with(closing))
              value_end += (quote == 1 && closing == "\"" && rest[value_end] == '\\' &&
                            value_end + 1 < rest.size())
                               ? 2
                               : 1;
            value_end = std::min(value_end, rest.size());
          } else {
            while (value_end < rest.size() && !is_space(rest[value_end]) &&
                   rest[value_end] != ',' && rest[value_end] != ';' && rest[value_end] != '}' &&
                   rest[value_end] != ']' && rest[value_end] != ')' && rest[value_end] != '"' &&
                   rest[value_end] != '\'' && rest[value_end] != '\\')
              ++value_end;
          }
          std::string_view value = rest.substr(value_begin, value_end - value_begin);
          bool credential_key = is_credential_name(name, rules_);
          bool env_value = pending_env_credential && name == "value";
          pending_env_credential = name == "name" && is_credential_name(value, rules_);
          if ((credential_key || env_value) && looks_like_credential(value)) {
            out.append(rest.substr(0, value_begin));
            out += fingerprint(value);
            i += value_end;
            continue;
          }
        }
        // Not a credential: copy the name whole (its insides are not word starts) and go on.
        out.append(name);
        i += name_end;
        continue;
      }
    }
    out += text[i];
    ++i;
  }
  return out;
}

std::vector<std::string> SecretMasker::scrub_words(const std::vector<std::string>& words) const {
  std::vector<std::string> out;
  out.reserve(words.size());
  for (std::size_t i = 0; i < words.size(); ++i) {
    const std::string& word = words[i];
    if (masking_ && word.starts_with("-") && word.find('=') == std::string::npos &&
        i + 1 < words.size() && is_credential_name(word, rules_) &&
        looks_like_credential(words[i + 1])) {
      out.push_back(word);
      out.push_back(fingerprint(words[++i]));
      continue;
    }
    out.push_back(scrub(word));
  }
  return out;
}

}  // namespace rtb
