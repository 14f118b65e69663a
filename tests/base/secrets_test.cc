#include "rtb/base/secrets.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "rtb/base/error.h"
#include "rtb/base/io.h"
#include "rtb/base/literal.h"
#include "rtb/base/text.h"
#include "test_util.h"

namespace rtb {
namespace {

// Token-shaped values assembled at run time, so that no scanner flags this file as leaking.
std::string hf_token() { return "hf_" + std::string("AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"); }
std::string github_token() { return "ghp_" + std::string(36, 'x'); }
std::string aws_key_id() { return "AKIA" + std::string("IOSFODNN7EXAMPL1"); }

SecretMasker test_masker() {
  SecretMasker::Key key{};
  key[0] = 7;
  return SecretMasker::with_key(key);
}

TEST(SecretsTest, TableParsesAndEveryKindIsPresent) {
  std::vector<SecretRule> rules = secret_rules();
  int names = 0, prefixes = 0, blocks = 0;
  for (const SecretRule& rule : rules) {
    names += rule.kind == SecretRule::Kind::kNameSuffix;
    prefixes += rule.kind == SecretRule::Kind::kValuePrefix;
    blocks += rule.kind == SecretRule::Kind::kBlock;
  }
  EXPECT_GE(names, 11);
  EXPECT_GE(prefixes, 10);
  EXPECT_EQ(blocks, 1);
}

TEST(SecretsTest, HelpTextListsTheTable) {
  std::string help = describe_secret_rules(secret_rules());
  for (const char* item : {"..._TOKEN", "...PASSWORD", "..._API_KEY", "hf_...", "AKIA...",
                           "github_pat_...", "--show-secrets", "docs/secrets.md"})
    EXPECT_NE(help.find(item), std::string::npos) << item;
  // Read from the table given, not written out: a row added to the table shows.
  std::vector<SecretRule> rules = secret_rules();
  rules.push_back({SecretRule::Kind::kNameSuffix, "_PIN", 0, "", "pins"});
  EXPECT_NE(describe_secret_rules(rules).find("..._PIN"), std::string::npos);
}

TEST(SecretsTest, MalformedTableNamesFileAndLine) {
  try {
    parse_secret_rules("kind\tpattern\tmin\talphabet\tmeaning\nvalue-prefix\thf_\tx\talnum\tm\n",
                       "t.tsv");
    FAIL() << "accepted a bad minimum";
  } catch (const Error& error) {
    EXPECT_EQ(error.file(), "t.tsv");
    EXPECT_EQ(error.line(), 2);
  }
  EXPECT_THROW(parse_secret_rules("name-suffix\t_TOKEN\t-\t-\tm\n", "t.tsv"), Error);
  EXPECT_THROW(
      parse_secret_rules("kind\tpattern\tmin\talphabet\tmeaning\nbogus\tx\t-\t-\tm\n", "t"), Error);
}

TEST(SecretsTest, CredentialNamesByTheirEnding) {
  std::vector<SecretRule> rules = secret_rules();
  for (const char* name :
       {"HF_TOKEN", "GITHUB_TOKEN", "WANDB_API_KEY", "AWS_SECRET_ACCESS_KEY", "PGPASSWORD",
        "--hf_token", "--hf-token", "db.password", "clientSecret", "GCP_CREDENTIALS", "token",
        "MY_AUTH_TOKEN", "SESSION_KEY", "WANDB_APIKEY", "ssh_private_key", "mysql_passwd"})
    EXPECT_TRUE(is_credential_name(name, rules)) << name;
  // This project's own configs: names that are not secrets.
  for (const char* name :
       {"--max_seq_token_per_tpu", "num_moe_token_chunks", "token_embedder", "max_tokens",
        "TOKENIZER_PATH", "google_auth_provider", "imagePullSecrets", "secret_sauce", ""})
    EXPECT_FALSE(is_credential_name(name, rules)) << name;
}

TEST(SecretsTest, ValuesThatCannotBeCredentials) {
  for (const char* value : {"",
                            "4096",
                            "-1",
                            "2.5e-3",
                            "true",
                            "False",
                            "none",
                            "/etc/key.json",
                            "./k",
                            "~/x",
                            "gs://bucket/creds.json",
                            "https://huggingface.co/x",
                            "<think>",
                            "</answer>",
                            "[PAD]",
                            "${HF_TOKEN}",
                            "$HF_TOKEN",
                            "$(cat /run/token)",
                            "{{ token }}",
                            "***#0123abcd"})
    EXPECT_FALSE(looks_like_credential(value)) << value;
  for (const char* value : {"abc123", "s3cr3t!", "https://u:p4ss@host/x", "x"})
    EXPECT_TRUE(looks_like_credential(value)) << value;
}

TEST(SecretsTest, FingerprintIsKeyedAndStable) {
  SecretMasker masker = test_masker();
  std::string a = masker.fingerprint("one secret");
  EXPECT_EQ(a.size(), 12u);
  EXPECT_EQ(a.substr(0, 4), "***#");
  EXPECT_EQ(a, masker.fingerprint("one secret"));
  EXPECT_NE(a, masker.fingerprint("another secret"));
  SecretMasker::Key other{};
  EXPECT_NE(a, SecretMasker::with_key(other).fingerprint("one secret"));
  EXPECT_NE(SecretMasker::with_fresh_key().fingerprint("x"),
            SecretMasker::with_fresh_key().fingerprint("x"));
  EXPECT_EQ(SecretMasker::showing().fingerprint("one secret"), "one secret");
}

// The fingerprint is HMAC-SHA256 (RFC 2104) under the masker's key: the first four bytes of the
// digest in hex. Expected values from Python's hmac module, an implementation independent of ours.
TEST(SecretsTest, FingerprintIsHmacSha256) {
  EXPECT_EQ(test_masker().fingerprint("one secret"), "***#5a0b8d78");
  SecretMasker::Key counting{};
  for (std::size_t i = 0; i < counting.size(); ++i) counting[i] = static_cast<std::uint8_t>(i);
  SecretMasker masker = SecretMasker::with_key(counting);
  EXPECT_EQ(masker.fingerprint(""), "***#d38b4209");
  EXPECT_EQ(masker.fingerprint(std::string(1000, 'x')), "***#2ab4ed39");
}

TEST(SecretsTest, ScrubMasksEveryWrittenForm) {
  SecretMasker masker = test_masker();
  struct Case {
    std::string text;
    std::string secret;
  };
  std::vector<Case> cases = {
      {"export HF_TOKEN=abc123 && python3 run.py", "abc123"},
      {"WANDB_API_KEY='k e y' python3", "k e y"},
      {"python3 -m x --hf_token=qwerty99 --steps 5", "qwerty99"},
      {"python3 -m x --hf-token qwerty99 --steps 5", "qwerty99"},
      {R"({"env": {"GITHUB_TOKEN": "tok-123"}})", "tok-123"},
      {R"(["--wandb_api_key=zzz111", "--x"])", "zzz111"},
      {"password: hunter2\nother: 1", "hunter2"},
      {"- name: AWS_SECRET_ACCESS_KEY\n  value: wJalrXUtnFEMI\n", "wJalrXUtnFEMI"},
      {R"([{"name":"DB_PASSWORD","value":"pw-9"}])", "pw-9"},
      {"pip install --index-url https://user:s3cret@pypi.example/simple x", "s3cret"},
      {"token in prose: " + hf_token() + ".", hf_token()},
      {"GH=" + github_token(), github_token()},
      {"id " + aws_key_id(), aws_key_id()},
      {"key: |\n  -----BEGIN RSA PRIVATE KEY-----\n  MIIEow\n  -----END RSA PRIVATE KEY-----\nx: 1",
       "MIIEow"},
      {"-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1r (cut)", "b3BlbnNzaC1r"},
  };
  for (const Case& item : cases) {
    std::string scrubbed = masker.scrub(item.text);
    EXPECT_EQ(scrubbed.find(item.secret), std::string::npos) << item.text << " -> " << scrubbed;
    EXPECT_NE(scrubbed.find("***#"), std::string::npos) << item.text;
    EXPECT_EQ(SecretMasker::showing().scrub(item.text), item.text);
  }
  EXPECT_EQ(masker.scrub("export HF_TOKEN=abc123 && x"),
            "export HF_TOKEN=" + masker.fingerprint("abc123") + " && x");
  EXPECT_EQ(masker.scrub(R"("HF_TOKEN": "abc")"),
            R"("HF_TOKEN": ")" + masker.fingerprint("abc") + R"(")");
}

TEST(SecretsTest, ScrubKeepsWhatIsNotASecret) {
  SecretMasker masker = test_masker();
  for (const char* text :
       {"--max_seq_token_per_tpu=65536 --num_moe_token_chunks 4",
        "reasoning_start_token: '<think>'\nsolution_end_token='</answer>'", "max_tokens: 8192",
        "TOKENIZER_PATH=/tok/qwen google_auth_provider=gke token_embedder: dense",
        "imagePullSecrets:\n- name: regcred\n", "HF_TOKEN=${HF_TOKEN} GITHUB_TOKEN=$GH",
        "GOOGLE_APPLICATION_CREDENTIALS=/secrets/sa.json", "hf_transfer sk-learn ghp_short",
        "https://huggingface.co/Qwen/x", "time 12:30:01 error: none", "--use_auth_token true",
        "- name: HF_TOKEN\n  valueFrom:\n    secretKeyRef:\n      name: hf\n"})
    EXPECT_EQ(masker.scrub(text), text) << text;
}

TEST(SecretsTest, ValueByNameAndWords) {
  SecretMasker masker = test_masker();
  EXPECT_EQ(masker.value("HF_TOKEN", "abc"), masker.fingerprint("abc"));
  EXPECT_EQ(masker.value("reasoning_start_token", "<think>"), "<think>");
  EXPECT_EQ(masker.value("ARGS", "--hf_token=abc"), "--hf_token=" + masker.fingerprint("abc"));
  EXPECT_EQ(SecretMasker::showing().value("HF_TOKEN", "abc"), "abc");
  std::vector<std::string> words = {"run",     "--hf_token", "abc",
                                    "--steps", "5",          "--x=" + hf_token()};
  std::vector<std::string> scrubbed = masker.scrub_words(words);
  EXPECT_EQ(scrubbed,
            (std::vector<std::string>{"run", "--hf_token", masker.fingerprint("abc"), "--steps",
                                      "5", "--x=" + masker.fingerprint(hf_token())}));
  EXPECT_EQ(SecretMasker::showing().scrub_words(words), words);
}

TEST(SecretsTest, ScrubIsIdempotent) {
  SecretMasker masker = test_masker();
  std::string once = masker.scrub("HF_TOKEN=abc123 " + hf_token() + " https://u:pw@h/");
  EXPECT_EQ(masker.scrub(once), once);
}

// testdata/secrets/cases.jsonl: what the bench driver's masking (Python) makes of each text under
// the same key; the library must agree character for character, so the rule has one meaning.
TEST(SecretsTest, AgreesWithTheDriversMaskingOnTheSharedCases) {
  SecretMasker masker = test_masker();
  std::string text = read_file(test::testdata("secrets/cases.jsonl"));
  int cases = 0;
  for (std::string_view line : split_lines(text)) {
    if (line.empty()) continue;
    Literal item = parse_json(line);
    const Literal* input = item.find("text");
    const Literal* masked = item.find("masked");
    ASSERT_TRUE(input != nullptr && masked != nullptr) << line;
    EXPECT_EQ(masker.scrub(input->text), masked->text) << input->text;
    ++cases;
  }
  EXPECT_GE(cases, 20);
}

}  // namespace
}  // namespace rtb
