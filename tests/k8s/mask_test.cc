#include "rtb/k8s/mask.h"

#include <gtest/gtest.h>

#include <string>

#include "rtb/k8s/dryrun.h"
#include "rtb/k8s/yaml.h"

namespace rtb::k8s {
namespace {

SecretMasker test_masker() {
  SecretMasker::Key key{};
  key[0] = 7;
  return SecretMasker::with_key(key);
}

constexpr const char* kPod = R"(spec:
  containers:
  - name: main
    args: ["--hf_token", "abc123", "--steps", "5", "--wandb_api_key=k3y"]
    command:
    - bash
    - -c
    - |
      export GITHUB_TOKEN=gh-secret-1
      python3 run.py --max_seq_token_per_tpu=65536
    env:
    - name: AWS_SECRET_ACCESS_KEY
      value: wJalrXUtnFEMI
    - name: TOKENIZER_PATH
      value: /tok/qwen
    - name: reasoning_start_token
      value: <think>
    - name: HF_TOKEN
      valueFrom:
        secretKeyRef: {name: hf, key: token}
  imagePullSecrets:
  - name: regcred
config:
  db_password: hunter2
  max_tokens: 8192
)";

TEST(MaskTest, EveryCredentialOfADocumentIsMaskedAndNothingElse) {
  SecretMasker masker = test_masker();
  YAML::Node root = YAML::Load(kPod);
  YAML::Node masked = masked_copy(root, masker);
  std::string text = yaml::emit(masked);
  for (const char* secret : {"abc123", "k3y", "gh-secret-1", "wJalrXUtnFEMI", "hunter2"}) {
    EXPECT_EQ(text.find(secret), std::string::npos) << secret << "\n" << text;
  }
  for (const char* clear : {"--max_seq_token_per_tpu=65536", "/tok/qwen", "<think>", "regcred",
                            "8192", "--steps", "secretKeyRef", "key: token"}) {
    EXPECT_NE(text.find(clear), std::string::npos) << clear << "\n" << text;
  }
  const YAML::Node container = masked["spec"]["containers"][0];
  EXPECT_EQ(container["args"][1].Scalar(), masker.fingerprint("abc123"));
  EXPECT_EQ(container["env"][0]["value"].Scalar(), masker.fingerprint("wJalrXUtnFEMI"));
  EXPECT_EQ(masked["config"]["db_password"].Scalar(), masker.fingerprint("hunter2"));
  // The input is untouched, and showing masks nothing.
  EXPECT_EQ(root["config"]["db_password"].Scalar(), "hunter2");
  EXPECT_EQ(yaml::emit(masked_copy(root, SecretMasker::showing())), yaml::emit(root));
}

TEST(MaskTest, EqualSecretsStayEqualAndDifferentOnesDiffer) {
  SecretMasker masker = test_masker();
  YAML::Node a = masked_copy(YAML::Load("env: [{name: HF_TOKEN, value: one}]"), masker);
  YAML::Node b = masked_copy(YAML::Load("env: [{name: HF_TOKEN, value: one}]"), masker);
  YAML::Node c = masked_copy(YAML::Load("env: [{name: HF_TOKEN, value: two}]"), masker);
  EXPECT_EQ(yaml::emit(a), yaml::emit(b));
  EXPECT_NE(yaml::emit(a), yaml::emit(c));
}

TEST(MaskTest, MaskedDocumentsKeepTheirInputLines) {
  SecretMasker masker = test_masker();
  DryRun dryrun = parse_dryrun(std::string("kubectl delete jobset x\n---\n") + kPod, "in.txt");
  ASSERT_EQ(dryrun.documents.size(), 1u);
  dryrun.diagnostics.push_back({Severity::kNote, "in.txt:9", "HF_TOKEN=abc123 repeated"});
  const Document& document = dryrun.documents.front();
  YAML::Node env = document.root["spec"]["containers"][0]["env"][0]["value"];
  std::size_t line = document.line_of(env);
  mask_documents(dryrun, masker);
  YAML::Node masked = document.root["spec"]["containers"][0]["env"][0]["value"];
  EXPECT_EQ(masked.Scalar(), masker.fingerprint("wJalrXUtnFEMI"));
  EXPECT_EQ(document.line_of(masked), line);
  EXPECT_EQ(line, 15u);  // kPod's line 13, after the echo and the separator
  EXPECT_EQ(text_of(dryrun.diagnostics.back()),
            "in.txt:9: HF_TOKEN=" + masker.fingerprint("abc123") + " repeated");
}

}  // namespace
}  // namespace rtb::k8s
