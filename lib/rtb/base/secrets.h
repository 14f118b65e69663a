// Credentials never reach a report: the one masking rule every text, JSON and log writer calls.
//
// What is a credential comes from one table (data/secrets.tsv, embedded; the bench driver reads the
// same file): a setting whose name ends in a credential word and whose value looks like one, or a
// word shaped like a known token (hf_..., ghp_..., AKIA...), or a PEM private key, or the password
// of a URL's user:password@. A masked value prints as `***#` and eight hex digits of an HMAC-SHA256
// of the value under a key drawn once per run: one output still tells whether two secrets differ,
// and a kept log cannot be checked against a guessed password.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace rtb {

// One row of the table.
struct SecretRule {
  enum class Kind { kNameSuffix, kValuePrefix, kBlock };
  Kind kind;
  std::string pattern;
  std::size_t min_length = 0;  // kValuePrefix: characters after the prefix
  std::string alphabet;        // kValuePrefix: alnum | alnum_ | alnum_- | upper_digit
  std::string meaning;
};

// The embedded table, parsed once per call (it is small); a malformed row throws rtb::Error.
std::vector<SecretRule> secret_rules();
// `text` as a table (for tests and for a table read from elsewhere).
std::vector<SecretRule> parse_secret_rules(std::string_view text, std::string_view file);

// The rule in a few lines for a tool's --help, its lists read from `rules` (the one table), with
// where it is documented.
std::string describe_secret_rules(const std::vector<SecretRule>& rules);

// `name` (an environment variable, a flag with or without its dashes, a config key, camelCase or
// not) names a credential setting by the table's name suffixes.
bool is_credential_name(std::string_view name, const std::vector<SecretRule>& rules);
// `value` could be a credential: not empty, not a number or boolean, not a path, not a URL without
// a password, not a placeholder (<think>, ${VAR}, $VAR, {{x}}).
bool looks_like_credential(std::string_view value);

class SecretMasker {
 public:
  using Key = std::array<std::uint8_t, 32>;

  // Masks with a key drawn from the system's random source (once per run: every tool makes one).
  static SecretMasker with_fresh_key();
  // Masks with `key` (tests: fingerprints then repeat).
  static SecretMasker with_key(const Key& key);
  // Shows every value in clear (--show-secrets).
  static SecretMasker showing();

  bool masks() const { return masking_; }
  // is_credential_name() under this masker's table.
  bool names_credential(std::string_view name) const { return is_credential_name(name, rules_); }

  // `***#` and 8 hex digits of HMAC-SHA256(key, value); `value` itself when showing.
  std::string fingerprint(std::string_view value) const;
  // The value of setting `name` as it may be printed: masked whole when the name is a credential
  // name and the value looks like one, else with any credential inside it masked (scrub).
  std::string value(std::string_view name, std::string_view value) const;
  // `text` with every credential found in it masked: token-shaped words, PEM private key blocks,
  // URL passwords, and the values of credential-named settings written NAME=VALUE, --name=value,
  // --name value, "name": "value" or name: value (quoted or not).
  std::string scrub(std::string_view text) const;
  // Each word of an argv scrubbed, with `--name value` pairs seen across words.
  std::vector<std::string> scrub_words(const std::vector<std::string>& words) const;

 private:
  SecretMasker(bool masking, const Key& key);

  bool masking_;
  Key key_;
  std::vector<SecretRule> rules_;
};

}  // namespace rtb
