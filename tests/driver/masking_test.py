"""Tests of the driver's credential masking (masking.py): the table, the rule on the cases the
C++ library is tested on too (testdata/secrets/cases.jsonl), and every line writer masking."""

import contextlib
import io
import json
import os
import subprocess
import unittest

from driver_loader import driver_path, load_driver, PYTHON, REPO

bd = load_driver()

CASES = os.path.join(REPO, "testdata", "secrets", "cases.jsonl")
TEST_KEY = bytes([7] + [0] * 31)
# Token-shaped values assembled at run time, so that no scanner flags this file as leaking.
HF_TOKEN = "hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"


class TableTest(unittest.TestCase):

  def test_the_table_parses_with_every_kind(self):
    kinds = [rule.kind for rule in bd.secret_rules()]
    self.assertGreaterEqual(kinds.count("name-suffix"), 11)
    self.assertGreaterEqual(kinds.count("value-prefix"), 10)
    self.assertEqual(kinds.count("block"), 1)

  def test_a_malformed_row_names_its_line(self):
    header = "kind\tpattern\tmin\talphabet\tmeaning\n"
    with self.assertRaisesRegex(ValueError, r"t.tsv:2: value-prefix needs"):
      bd.parse_rules(header + "value-prefix\thf_\tx\talnum\tm\n", "t.tsv")
    with self.assertRaisesRegex(ValueError, "header"):
      bd.parse_rules("name-suffix\t_TOKEN\t-\t-\tm\n", "t.tsv")


class RuleTest(unittest.TestCase):

  def test_the_shared_cases(self):
    masker = bd.SecretMasker(TEST_KEY)
    with open(CASES, encoding="utf-8") as handle:
      cases = [json.loads(line) for line in handle if line.strip()]
    self.assertGreaterEqual(len(cases), 20)
    for case in cases:
      with self.subTest(text=case["text"]):
        self.assertEqual(masker.scrub(case["text"]), case["masked"])
        self.assertEqual(bd.SecretMasker(None).scrub(case["text"]), case["text"])

  def test_names_and_values(self):
    for name in ("HF_TOKEN", "--hf-token", "db.password", "clientSecret", "token", "WANDB_APIKEY"):
      self.assertTrue(bd.is_credential_name(name), name)
    for name in ("--max_seq_token_per_tpu", "num_moe_token_chunks", "token_embedder", "max_tokens",
                 "TOKENIZER_PATH", "google_auth_provider", "imagePullSecrets", ""):
      self.assertFalse(bd.is_credential_name(name), name)
    for value in ("", "4096", "2.5e-3", "True", "/etc/k", "gs://b/c", "<think>", "${X}", "***#1"):
      self.assertFalse(bd.looks_like_credential(value), value)
    for value in ("abc", "https://u:p@h/"):
      self.assertTrue(bd.looks_like_credential(value), value)

  def test_fingerprints_are_keyed(self):
    one, other = bd.SecretMasker(TEST_KEY), bd.SecretMasker(bytes(32))
    self.assertEqual(one.fingerprint("s"), one.fingerprint("s"))
    self.assertNotEqual(one.fingerprint("s"), one.fingerprint("t"))
    self.assertNotEqual(one.fingerprint("s"), other.fingerprint("s"))
    self.assertRegex(one.fingerprint("s"), r"^\*\*\*#[0-9a-f]{8}$")


class WritersTest(unittest.TestCase):

  def test_say_and_emit_mask(self):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
      bd.say(f"TRAINER_ARGV: --hf_token={HF_TOKEN} --steps 5")
      bd.emit('BENCH_SUMMARY {"knobs":{"x":"WANDB_API_KEY=k3y"}}')
    self.assertNotIn(HF_TOKEN, out.getvalue())
    self.assertNotIn("k3y", out.getvalue())
    self.assertIn("--steps 5", out.getvalue())

  def test_errors_and_print_settings_of_the_shipped_file_mask(self):
    env = dict(os.environ, TRAINER_ARGV=f"--hf_token {HF_TOKEN}", ORCH_ARGV="--x 1", STEPS="0")
    bad = subprocess.run([PYTHON, driver_path()], env=env, capture_output=True, text=True)
    self.assertEqual(bad.returncode, 2, bad.stderr)
    env["STEPS"] = "1"
    shown = subprocess.run([PYTHON, driver_path(), "--print-settings"], env=env,
                           capture_output=True, text=True)
    self.assertEqual(shown.returncode, 0, shown.stderr)
    self.assertIn('"--hf_token","***#', shown.stdout)
    for result in (bad, shown):
      self.assertNotIn(HF_TOKEN, result.stdout + result.stderr)


if __name__ == "__main__":
  unittest.main()
