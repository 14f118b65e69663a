"""CLI tests of diff-configs: runs the built tool on real MaxText logs (testdata/configlog_*, see
testdata/SOURCES.md), on rewritten copies of them, and on renders (the DRY_RUN fixture and bench
renders of it made by the built render-bench), and checks stdout, stderr and exit codes."""

import json
import os
import re
import unittest

import json_schema
from json_schema import validate

from cli_common import LAUNCH_DRYRUN as FIXTURE
from cli_common import (BIN, TESTDATA, TempDirTestCase, assert_bad_input, assert_help_and_version,
                        expect_exit, run_tool)

TOOL = os.path.join(BIN, "diff-configs")
RENDER = os.path.join(BIN, "render-bench")


def data(name):
    return os.path.join(TESTDATA, name)


DPO = data("configlog_maxtext_dpo_qwen3-0.6b_tpu-v5p-8_train.log")
GRPO = data("configlog_maxtext_grpo_llama3.1-8b_config_dump.log")
GPT3 = data("configlog_maxtext_gpu_a3-h100x8_gpt3-22b_train.log")
PREPGO = data("configlog_maxtext_gpu_a3-h100x8_llama2-7b_prepgo_train.log")
PGO = data("configlog_maxtext_gpu_a3-h100x8_llama2-7b_pgo_train.log")
RESTART = data("configlog_restart.log")
TRUNCATED = data("configlog_truncated.log")
NO_CONFIG = data("configlog_no_config_pr1904_e2e_train.log")
TRAINER_NODE = data("configlog_trainer_node.log")
RULES_64 = data("configlog_maxtext_grpo_demo_0ac2a42e_cell27_64rules.log")
RULES_63 = data("configlog_maxtext_grpo_demo_1a9d434c_cell27_63rules.log")
QLORA = data("configlog_maxtext_qlora_demo_8e117fdc_cell18_63rules.log")
QLORA_BRIDGED = data("configlog_maxtext_qlora_demo_bridged_8e117fdc_cell18_64rules.log")

# The --json documents (docs/diff-configs.md, "JSON output"): their JSON Schemas in schemas/.
CONFIG_SCHEMA = json_schema.load("rtb.diff-configs.1.json")
DUMPS_SCHEMA = json_schema.load("rtb.diff-configs.dumps.1.json")


def run(args, stdin=None, tool=TOOL, env=None):
    return run_tool(tool, args, stdin=stdin, env=env, unset=["NO_COLOR"])


class DiffConfigsTest(TempDirTestCase):

    def diff(self, *args, rc=None, stdin=None, env=None):
        return expect_exit(self, rc, TOOL, args, stdin=stdin, env=env, unset=["NO_COLOR"])

    def reprinted(self, name, source=DPO, change=None):
        """The log with the Python-logging prefix and every value printed another way MaxText or a
        YAML reader might print it; `change` = (key, value) changes one value for real."""
        out = []
        with open(source, encoding="utf-8") as f:
            for line in f:
                m = re.match(r"^.*?Config param ([\w.]+): (.*)$", line.rstrip("\n"))
                if not m:
                    out.append(line.rstrip("\n"))
                    continue
                key, value = m.groups()
                if change and key == change[0]:
                    value = change[1]
                elif value in ("True", "False"):
                    value = value.lower()
                elif re.fullmatch(r"-?\d+", value):
                    value += ".0"
                elif value.startswith("[") or value.startswith("("):
                    value = value.replace(", ", ",")
                out.append(f"INFO:maxtext.configs.pyconfig:Config param {key}: {value}")
        return self.write(name, "\n".join(out) + "\n")

    # --- logs ----------------------------------------------------------------------------------
    def test_identical_logs_exit_0_and_print_nothing(self):
        for path in (DPO, GRPO, GPT3, RESTART):
            out, err = self.diff(path, path, rc=0)
            self.assertEqual((out, err), ("", ""))
        with open(GPT3, encoding="utf-8") as f:
            out, _ = self.diff("-", GPT3, rc=0, stdin=f.read())
        self.assertEqual(out, "")

    def test_two_real_runs(self):
        out, err = self.diff(GPT3, PREPGO, rc=1)
        self.assertEqual(err, "")
        lines = out.splitlines()
        self.assertEqual(len(lines), 35, out)  # 34 keys, mlp_activations in two items
        for expected in ("~ decoder_block: gpt3 -> llama2",
                         "~ mlp_activations[0]: 'gelu' -> 'silu'", "+ mlp_activations[1]: 'linear'",
                         "~ per_device_batch_size: 1.0 -> 12.0",
                         "~ load_parameters_path:  -> gs://maxtext-llama/test/yooh-2024-0123-1440/"
                         "decode-ckpt-maxtext/0/default"):
            self.assertIn(expected, lines)
        self.assertEqual(lines, sorted(lines, key=lambda l: l[2:].split(":")[0].split("[")[0]),
                         "key order")
        out, _ = self.diff(DPO, GRPO, rc=1)
        self.assertTrue(any(l.startswith("+ ") for l in out.splitlines()))
        self.assertTrue(any(l.startswith("- ") for l in out.splitlines()))
        self.assertIn("~ adam_b2: 0.95 -> 0.99", out)

    def test_values_compare_by_meaning_and_report_the_original_text(self):
        same = self.reprinted("reprinted.log")
        self.diff(DPO, same, rc=0)
        changed = self.reprinted("changed.log",
                                 change=("dcn_parallelism", "[1,-1,1,1,1,1,1,1,1,1,1,2]"))
        out, _ = self.diff(DPO, changed, rc=1)
        self.assertEqual(out, "~ dcn_parallelism[11]: 1 -> 2\n")
        changed = self.reprinted("changed.log",
                                 change=("ici_parallelism", "[1,1,1,-1,1,8,1,1,1,1,1,1]"))
        out, _ = self.diff(DPO, changed, rc=1)
        self.assertEqual(out, "~ ici_parallelism[5]: 1 -> 8\n")
        # A container against a scalar: the whole values.
        changed = self.reprinted("changed.log", change=("ici_parallelism", "auto"))
        out, _ = self.diff(DPO, changed, rc=1)
        self.assertEqual(out, "~ ici_parallelism: [1, 1, 1, -1, 1, 1, 1, 1, 1, 1, 1, 1] -> auto\n")

    def test_one_rule_of_logical_axis_rules(self):
        # Real notebook outputs whose 3,500-character logical_axis_rules differ by one rule.
        out, err = self.diff(RULES_64, RULES_63, rc=1)
        self.assertEqual(err, "")
        lines = out.splitlines()
        self.assertIn("- logical_axis_rules[embed_tensor_transpose]: ('tensor_transpose',)", lines)
        self.assertEqual([l for l in lines if "logical_axis_rules" in l],
                         ["- logical_axis_rules[embed_tensor_transpose]: ('tensor_transpose',)"])
        self.assertIn("~ weight_dtype: bfloat16 -> float32", lines)
        self.assertIn("- shardy: True", lines)
        self.assertEqual(len(lines), 18, out)
        self.assertLess(max(len(l) for l in lines), 100)
        out, _ = self.diff(QLORA, QLORA_BRIDGED, "--keys", "^(logical_axis_rules|mlp_activations)$",
                           rc=1)
        self.assertEqual(
            out, "+ logical_axis_rules[embed_tensor_transpose]: ('tensor_transpose',)\n"
            "~ mlp_activations[0]: 'gelu' -> 'silu'\n")
        # --json keeps both whole values and adds the items.
        out, _ = self.diff("--json", RULES_64, RULES_63, rc=1)
        doc = json.loads(out)
        validate(CONFIG_SCHEMA, doc)
        rules = [d for d in doc["differences"] if d["key"] == "logical_axis_rules"][0]
        self.assertGreater(len(rules["old"]), 3000)
        self.assertEqual(
            len(rules["new"]),
            len(rules["old"]) - len(", ('embed_tensor_transpose', ('tensor_transpose',))"))
        removed = {
            "key": "embed_tensor_transpose", "kind": "removed", "moved": False,
            "old": "('tensor_transpose',)", "old_index": 39, "new": None, "new_index": None
        }
        self.assertEqual(rules["elements"], {"pairing": "name", "differences": [removed]})
        self.assertTrue(all(d["elements"] is None for d in doc["differences"] if d is not rules))
        self.assertEqual(doc["summary"]["total"], 18)

    def test_keys_filter(self):
        out, _ = self.diff(GPT3, PREPGO, "--keys", "^(base_|num_)", rc=1)
        self.assertEqual(len(out.splitlines()), 8, out)
        self.assertTrue(all(re.match(r"^~ (base_|num_)", l) for l in out.splitlines()))
        self.diff(GPT3, PREPGO, "--keys", "^adam_", rc=0)
        _, err = self.diff(GPT3, PREPGO, "--keys", "(", rc=2)
        self.assertIn("--keys (", err)

    def test_several_dumps(self):
        out, _ = self.diff("--list-dumps", RESTART, rc=0)
        self.assertEqual(out.splitlines(), [
            f"{RESTART}: dump 1: lines 36-156, 121 keys (adam_b1 .. weight_dtype), complete",
            f"{RESTART}: dump 2: lines 277-336, 60 keys (adam_b1 .. ici_autoregressive_parallelism), "
            "truncated: it stops at ici_autoregressive_parallelism while dump 1 goes on to weight_dtype",
            f"{RESTART}: dump 3: lines 372-492, 121 keys (adam_b1 .. weight_dtype), complete [default]",
        ])
        # The default is the last complete dump: the PGO run, the same as its own log.
        self.diff(RESTART, PGO, rc=0)
        out, _ = self.diff(RESTART, RESTART, "--dump-a", "1", "--dump-b", "3", rc=1)
        self.assertEqual([l.split(":")[0] for l in out.splitlines()],
                         ["~ checkpoint_dir", "~ metrics_dir", "~ run_name", "~ tensorboard_dir"])
        self.diff(RESTART, PREPGO, "--dump-a", "1", rc=0)
        _, err = self.diff(RESTART, PGO, "--dump", "2", rc=2)
        self.assertEqual(
            err, f"diff-configs: {RESTART}:277: config dump 2 (lines 277-336, 60 keys) is "
            "truncated: it stops at ici_autoregressive_parallelism while dump 1 goes on "
            "to weight_dtype\n")
        _, err = self.diff(RESTART, PGO, "--dump", "9", rc=2)
        self.assertIn("--dump 9: the log has 3 config dumps", err)
        out, _ = self.diff("--list-dumps", "--json", RESTART, FIXTURE, rc=0)
        doc = json.loads(out)
        validate(DUMPS_SCHEMA, doc)
        self.assertEqual(doc["inputs"][0]["default"], 3)
        self.assertEqual([d["complete"] for d in doc["inputs"][0]["dumps"]], [True, False, True])
        self.assertEqual(doc["inputs"][1]["kind"], "render")

    # --- renders as a side --------------------------------------------------------------------
    def test_did_my_flag_reach_the_resolved_config(self):
        out, err = self.diff(FIXTURE, TRAINER_NODE, rc=1)
        self.assertEqual(err, "")
        self.assertEqual(out, "- fp8_moe_fake_quant: true\n~ sa_block_q: 1024 -> 512\n")
        out, _ = self.diff(TRAINER_NODE, FIXTURE, rc=1)
        self.assertEqual(out, "+ fp8_moe_fake_quant: true\n~ sa_block_q: 512 -> 1024\n")
        bench = os.path.join(self.tmp.name, "bench.yaml")
        rc, _, err = run([
            FIXTURE, "--name", "abtest-bench", "--maxtext-flag", "sa_block_q=512", "--maxtext-flag",
            "ragged_buffer_factor=2.75", "-o", bench
        ], tool=RENDER)
        self.assertEqual(rc, 0, err)
        out, _ = self.diff(bench, TRAINER_NODE, rc=1)
        self.assertEqual(out.splitlines(), [
            "- fp8_moe_fake_quant: true", "~ ragged_buffer_factor: 2.75 -> 2.0",
            "~ run_name: abtest-bench -> abtest-train"
        ])
        self.diff(bench, TRAINER_NODE, "--keys", "^sa_block", rc=0)
        # Two renders: every key either sets; the bench's --weights random (the default) dropped
        # the e2e's checkpoint.
        out, _ = self.diff(FIXTURE, bench, rc=1)
        self.assertEqual(out.splitlines(), [
            "- load_parameters_path: gs://example-bucket/ckpt/model/0/items",
            "~ ragged_buffer_factor: 2.0 -> 2.75", "~ run_name: abtest-train -> abtest-bench",
            "~ sa_block_q: 1024 -> 512"
        ])

    def test_json_schema(self):
        for args, rc in (([GPT3, PREPGO], 1), ([DPO, DPO], 0), ([FIXTURE, TRAINER_NODE], 1),
                         ([RESTART, PGO, "--keys", "run_"], 0)):
            out, _ = self.diff("--json", *args, rc=rc)
            doc = json.loads(out)
            validate(CONFIG_SCHEMA, doc)
            self.assertEqual(doc["summary"]["total"], len(doc["differences"]))
            self.assertEqual(doc["result"], "different" if rc else "same")
        out, _ = self.diff("--json", FIXTURE, TRAINER_NODE, rc=1)
        doc = json.loads(out)
        self.assertEqual((doc["a"]["kind"], doc["b"]["kind"], doc["b"]["dump"]),
                         ("render", "log", 1))
        changed = [d for d in doc["differences"] if d["key"] == "sa_block_q"][0]
        self.assertEqual((changed["old"], changed["new"]), ("1024", "512"))
        self.assertEqual(changed["old_origin"], "MAXTEXT_EXTRA_FLAGS sa_block_q=1024")
        self.assertEqual(changed["old_line"], 456)
        with open(TRAINER_NODE, encoding="utf-8") as f:
            self.assertIn("Config param sa_block_q: 512",
                          f.read().splitlines()[changed["new_line"] - 1])
        out, _ = self.diff("--json", "--keys", "^z", DPO, GRPO, rc=1)
        self.assertEqual(json.loads(out)["differences"][0]["new"], None)

    def test_colour(self):
        out, _ = self.diff(GPT3, PREPGO, "--keys", "^decoder_block$", rc=1)
        self.assertEqual(out, "~ decoder_block: gpt3 -> llama2\n")
        out, _ = self.diff(GPT3, PREPGO, "--keys", "^decoder_block$", "--color", "always", rc=1)
        self.assertEqual(out, "\033[33m~ decoder_block: gpt3 -> llama2\033[0m\n")

    # --- errors --------------------------------------------------------------------------------
    def assert_error(self, args, expected, stdin=None):
        assert_bad_input(self, "diff-configs", run(args, stdin=stdin), expected)

    def test_bad_inputs(self):
        missing = data("no_such.log")
        self.assert_error([missing, GPT3], f"diff-configs: {missing}: cannot open")
        self.assert_error([GPT3, NO_CONFIG], f"diff-configs: {NO_CONFIG}: no `Config param` line")
        self.assert_error([TRUNCATED, GPT3],
                          f"diff-configs: {TRUNCATED}:17: no complete config dump: "
                          "config dump 1 (lines 17-75, 59 keys) is truncated: the log's "
                          "last line is cut")
        cut = self.write("cut.log", "boot\nConfig param a: 1\nConfig param b: 2\n")
        self.assert_error([cut, GPT3], "ends right after its line 3")
        self.assert_error([data("diff_not_jobset.yaml"), GPT3], "not a JobSet")
        self.assert_error([data("bad/no_trainer.txt"), GPT3], "no trainer JobSet")
        self.assert_error([data("bad/unbalanced_quote.txt"), GPT3], "unbalanced_quote.txt:330:")
        self.assert_error(["-", GPT3], "<stdin>: no `Config param` line", stdin="")
        self.assert_error(["-", "-"], "only one of A and B")
        self.assert_error([GPT3], "two inputs")
        self.assert_error(["--list-dumps", NO_CONFIG], "no `Config param` line")

    def test_help_and_version(self):
        assert_help_and_version(self, "diff-configs", "--list-dumps")


if __name__ == "__main__":
    unittest.main()
