"""CLI tests of aot-summarize: the table and --json for engine-compile, train_compile and live-run
logs (hand-written from MaxText's formats and real excerpts), out-of-memory logs, an A/B of two
logs, and bad input, with their exit codes."""

import json
import os
import re
import tempfile
import unittest

from cli_common import (BIN, TESTDATA, assert_bad_input, assert_help_and_version, expect_exit,
                        run_tool)

TOOL = os.path.join(BIN, "aot-summarize")


def data(name):
    return os.path.join(TESTDATA, name)


def run(args, stdin=None):
    return run_tool(TOOL, args, stdin=stdin)


def rows(table):
    """label -> cells (split on two or more blanks), for the table's rows."""
    out = {}
    section = ""
    for line in table.splitlines():
        cells = re.split(r" {2,}", line.strip())
        if not line.startswith(" ") and len(cells) == 1:
            section = cells[0]
            continue
        label = (section + "/" + cells[0]) if line.startswith("  ") else cells[0]
        out[label] = cells[1:]
    return out


class AotSummarizeTest(unittest.TestCase):

    def assert_rows(self, out, expected):
        """The summary table in `out` has these rows (label -> cells), among others."""
        r = rows(out)
        self.assertEqual({label: r.get(label) for label in expected}, expected)

    def table(self, code, args, expected):
        """Runs the tool on `args`, which must exit with `code`, and asserts that its table has the
        rows `expected` (as assert_rows); returns (stdout, stderr)."""
        out, err = expect_exit(self, code, TOOL, args)
        self.assert_rows(out, expected)
        return out, err

    def json_of(self, code, args):
        """The --json document of the tool on `args`, which must exit with `code`."""
        out, _ = expect_exit(self, code, TOOL, [*args, "--json"])
        return json.loads(out)

    def test_engine_compile_log(self):
        out, err = expect_exit(self, 0, TOOL, [data("memlog_engine_compile_a.log")])
        self.assertEqual(err, "")
        self.assert_rows(
            out, {
                "kind": ["engine compile"],
                "HBM per device GiB": ["94.74 (compile_topology tpu7x-256)"],
                "fwd_bwd/argument": ["25.00"],
                "fwd_bwd/temp": ["55.00"],
                "fwd_bwd/generated code": ["0.05"],
                "fwd_bwd/host temp": ["2.00"],
                "fwd_bwd/resident": ["84.00"],
                "fwd_bwd/+state": ["8.75"],
                "fwd_bwd/need": ["92.75"],
                "fwd_bwd/headroom": ["1.99"],
                "fwd_bwd/fits": ["yes"],
                "fwd_bwd/flops": ["2.125e+16"],
                "fwd_bwd/bytes accessed": ["4.4e+12"],
                "fwd_bwd_accum/alias": ["4.00"],
                "update/resident": ["42.00"],
                "MaxText device peak GiB": ["92.75"],
                "out of memory": ["-"],
                "verdict": ["fits"],
            })

    def test_json_schema(self):
        doc = self.json_of(0, [data("memlog_engine_compile_a.log")])
        self.assertEqual(doc["schema"], "rtb.aot-summarize/1")
        self.assertEqual((doc["exit_code"], doc["error"], doc["fits"]), (0, None, True))
        log = doc["logs"][0]
        self.assertEqual(log["kind"], "engine_compile")
        self.assertEqual(log["hbm_gib_per_device"], 94.74)
        self.assertEqual(log["compile_topology"], "tpu7x-256")
        self.assertEqual([p["name"] for p in log["programs"]],
                         ["fwd_bwd", "fwd_bwd_accum", "update"])
        fwd = log["programs"][0]
        self.assertEqual(fwd["source"], "memory_analysis")
        self.assertEqual(fwd["line"], 11)
        self.assertEqual(fwd["bytes"]["temp"], 55 * 2**30)
        self.assertEqual(fwd["bytes"]["host_temp"], 2 * 2**30)
        self.assertEqual(fwd["bytes"]["resident"], 84 * 2**30)
        self.assertEqual(fwd["bytes"]["need"], int(92.75 * 2**30))
        self.assertAlmostEqual(fwd["headroom_gib"], 1.99, places=4)
        self.assertTrue(fwd["fits"])
        self.assertEqual(fwd["cost"]["flops"], 2.125e16)
        self.assertEqual(fwd["cost"]["transcendentals"], 1.3e10)
        self.assertEqual(log["oom"], [])
        self.assertEqual(log["problems"], [])
        self.assertEqual(doc["deltas"], [])

    def test_ab_of_two_logs(self):
        a, b = data("memlog_engine_compile_a.log"), data("memlog_engine_compile_b.log")
        out, err = expect_exit(self, 1, TOOL, ["--chip", "tpu7x", a, b])
        header = re.split(r" {2,}", out.splitlines()[0])
        self.assertEqual(header, ["log", a, b, "delta " + b])
        self.assert_rows(
            out, {
                "fwd_bwd/temp": ["55.00", "58.50", "+3.50"],
                "fwd_bwd/headroom": ["1.99", "-1.51", "-3.50"],
                "fwd_bwd/fits": ["yes", "NO"],
                "fwd_bwd_accum/temp": ["56.00", "56.00", "+0.00"],
                "HBM per device GiB": ["94.74 (chip tpu7x)", "94.74 (chip tpu7x)"],
                "verdict": ["fits", "DOES NOT FIT (fwd_bwd)"],
            })
        out, err = expect_exit(self, 1, TOOL, ["--json", a, b])
        doc = json.loads(out)
        self.assertFalse(doc["fits"])
        self.assertEqual([l["fits"] for l in doc["logs"]], [True, False])
        delta = doc["deltas"][0]
        self.assertEqual((delta["log"], delta["against"]), (b, a))
        fwd = delta["programs"][0]
        self.assertEqual(fwd["name"], "fwd_bwd")
        self.assertEqual(fwd["bytes"]["temp"], int(3.5 * 2**30))
        self.assertAlmostEqual(fwd["headroom_gib"], -3.5, places=4)
        self.assertEqual(fwd["flops"], 0)

    def test_older_engine_compile_and_train_compile(self):
        out, err = expect_exit(self, 0, TOOL, [data("memlog_engine_compile_5field.log")])
        r = rows(out)
        self.assertEqual(r["HBM per device GiB"], ["95.00 (compile_topology v5p-64)"])
        self.assertEqual(r["accumulate/resident"], ["2.00"])
        self.assertNotIn("fwd_bwd/host temp", r, "the 5-field form has no host fields")
        self.assertNotIn("fwd_bwd/+state", r)
        log = self.json_of(0, [data("memlog_train_compile.log")])["logs"][0]
        self.assertEqual(log["kind"], "train_compile")
        self.assertEqual([p["name"] for p in log["programs"]], ["train_step"])
        self.assertEqual(log["hbm_gib_per_device"], 32)
        out, err = expect_exit(self, 1, TOOL,
                               [data("memlog_train_compile.log"), "--hbm-gib", "15.5"])
        self.assertEqual(rows(out)["train_step/fits"], ["NO"])

    def test_live_run_logs(self):
        real = data("memlog_maxtext_docs_excerpts_5f0dabb4.log")
        rc, out, err = run([real])
        self.assertEqual(rc, 2)
        self.assertIn("give --hbm-gib or --chip", err)
        self.table(1, [real, "--chip", "v5p"], {
            "kind": ["live run"],
            "train_step/resident": ["100.40"],
            "train_step/headroom": ["-5.40"],
        })
        out, err = expect_exit(
            self, 0, TOOL,
            [real, "--hbm-gib", "101",
             data("memlog_maxtext_docs_excerpts_5505348a.log")])
        self.table(
            0, [data("memlog_live_tpu_usage.log")], {
                "tpu_programs/resident": ["71.94"],
                "tpu_programs/programs (largest shown)": ["3"],
                "HBM per device GiB": ["94.74 (log)"],
            })

    def test_out_of_memory_logs(self):
        self.table(
            1, [data("memlog_oom_engine_hlo_temporaries.log")], {
                "out of memory": ["line 6: hbm 100.13 GiB needed, 94.74 available"],
                "verdict": ["DOES NOT FIT (out of memory reported)"],
            })
        oom = self.json_of(1, [data("memlog_oom_train_compile_used_of.log")])["logs"][0]["oom"][0]
        self.assertEqual(oom["memory_space"], "hbm")
        self.assertEqual(oom["required_bytes"], round(21.95 * 2**30))
        self.assertEqual(oom["available_bytes"], round(15.48 * 2**30))
        self.assertIn("Used 21.95G of 15.48G hbm", oom["text"])
        out, err = expect_exit(self, 1, TOOL, [data("memlog_oom_runtime_allocate.log")])
        self.assertEqual(
            rows(out)["tpu_programs/fits"], ["yes"], "the program fit; the allocation did not")
        self.assertEqual(
            rows(out)["out of memory"], ["line 2: allocating 64.00 GiB failed, 10.51 GiB free"])
        # An OOM log with a malformed line is still reported as does-not-fit, with a warning.
        rc, out, err = run([data("memlog_oom_with_truncated_dict.log")])
        self.assertEqual(rc, 1)
        self.assertIn("memlog_oom_with_truncated_dict.log:2: Cost analysis:", err)

    def test_notes_and_problems_are_diagnostics(self):
        # A problem: a warning on stderr, once, and a diagnostic beside `problems`.
        oom = data("memlog_oom_with_truncated_dict.log")
        rc, out, err = run([oom, "--json"])
        self.assertEqual(rc, 1, err)
        log = json.loads(out)["logs"][0]
        self.assertEqual(len(log["problems"]), 1, log["problems"])
        self.assertEqual(log["diagnostics"], [{
            "severity": "warning", "where": oom + ":2",
            "message": log["problems"][0][len(oom + ":2: "):]
        }])
        self.assertEqual(err, "aot-summarize: warning: " + log["problems"][0] + "\n")
        self.assertEqual(run([oom, "-q"])[2], "")
        # A note: at its line, logged only with -v; it makes no verdict fail.
        staged = data("memlog_engine_compile_a.log")
        out, err = expect_exit(self, 0, TOOL, [staged, "--json"])
        log = json.loads(out)["logs"][0]
        self.assertEqual(log["diagnostics"],
                         [{"severity": "note", "where": staged + ":28", "message": note}
                          for note in log["notes"]])
        out, err = expect_exit(self, 0, TOOL, [staged, "-v"])
        self.assertIn("aot-summarize: info: " + staged + ":28: WEIGHT-SYNC STAGING", err)

    # --- issue 16, on real MaxText Gemma-4 logs and on fixtures of the documented shapes ----------
    def test_measured_usage_outranks_the_estimate(self):
        log = data("memlog_maxtext_gemma4_baseline_L4440-4729_measured_fits_estimate_not.log")
        out, _ = self.table(
            0, [log], {
                "HBM per device GiB": ["94.74 (log)"],
                "tpu_programs/resident": ["75.87"],
                "tpu_programs/fits": ["yes"],
                "train_step/resident": ["105.50"],
                "train_step/fits": ["NO (estimate; the measured usage decides)"],
                "verdict": ["fits (measured usage; the estimate says it does not)"],
            })
        self.assertIn(
            "estimate for train_step (line 51) is 105.50 GiB, more than the 94.74 GiB HBM "
            "per device, but libtpu measured 75.87 GiB for the largest program it loaded "
            "(line 6), which fits", out)
        doc = self.json_of(0, [log])
        self.assertTrue(doc["fits"])
        entry = doc["logs"][0]
        self.assertTrue(entry["fits"])
        d = entry["estimate_disagreement"]
        self.assertEqual((d["decided_by"], d["estimate_program"], d["measured_program"]),
                         ("measured", "train_step", "tpu_programs"))
        self.assertEqual((d["estimate_line"], d["measured_line"]), (51, 6))
        self.assertEqual(d["estimated_need_bytes"], round(105.5 * 2**30))
        self.assertEqual(d["measured_need_bytes"], round(75.87 * 2**30))
        self.assertEqual((d["estimate_fits"], d["measured_fits"]), (False, True))
        self.assertEqual([(p["name"], p["fits"], p["decides"]) for p in entry["programs"]],
                         [("tpu_programs", True, True), ("train_step", False, False)])
        # A log without a measurement keeps no disagreement.
        rc, out, err = run([data("memlog_engine_compile_a.log"), "--json"])
        self.assertIsNone(json.loads(out)["logs"][0]["estimate_disagreement"])

    def test_runtime_failures_keep_units_and_free_is_not_capacity(self):
        self.table(
            1, [data("memlog_oom_runtime_allocate_mib.log")], {
                "out of memory": ["line 4: hbm: allocating 125.25 MiB failed, 44.87 MiB free"],
                "HBM per device GiB": ["-"],
            })
        entry = self.json_of(1, [data("memlog_oom_runtime_allocate_mib.log")])["logs"][0]
        self.assertIsNone(entry["hbm_gib_per_device"])
        oom = entry["oom"][0]
        self.assertEqual(oom["kind"], "allocate")
        self.assertEqual(oom["required_bytes"], round(125.25 * 2**20))
        self.assertEqual(oom["free_bytes"], round(44.87 * 2**20))
        self.assertIsNone(oom["available_bytes"])
        out, err = expect_exit(self, 1, TOOL, [data("memlog_oom_runtime_allocate_wrapped.log")])
        self.assertEqual(
            rows(out)["out of memory"],
            ["line 1: hbm: allocating 125.25 MiB failed, 44.87 MiB free"])
        out, err = expect_exit(self, 1, TOOL,
                               [data("memlog_maxtext_gemma4_compile_oom_vmem_L1776-1790.log")])
        self.assertEqual(
            rows(out)["out of memory"], ["line 7: vmem 66.93 MiB needed, 63.94 available"])
        self.table(
            1,
            [data("memlog_maxtext_gemma4_compile_oom_E1000.log")],
            {
                "out of memory": ["line 53: hbm 94.77 GiB needed, 94.74 available [2 lines]"],
                "HBM per device GiB": ["94.74 (log)"],  # Used X of Y: Y is the capacity
            })

    def test_reserve_failures_coloured_and_wrapped(self):
        out, err = expect_exit(self, 1, TOOL,
                               [data("memlog_oom_runtime_reserve_ansi_traceback.log")])
        self.assertNotIn("\x1b", out)
        self.assertEqual(
            rows(out)["out of memory"], [
                "line 5: reserving 14.96 GiB for a program failed, 1.33 GiB free, 0 B reserved, "
                "1.33 GiB reservable"
            ])
        entry = self.json_of(1, [data("memlog_oom_runtime_reserve_e0101_wrapped.log")])["logs"][0]
        self.assertEqual(entry["oom_lines"], 1)
        oom = entry["oom"][0]
        self.assertEqual((oom["line"], oom["kind"]), (2, "reserve"))
        self.assertEqual(oom["required_bytes"], round(29.49 * 2**30))
        self.assertEqual(oom["free_bytes"], round(147.64 * 2**20))
        self.assertEqual(oom["reserved_bytes"], 0)
        self.assertEqual(oom["reservable_bytes"], round(147.64 * 2**20))
        self.assertTrue(
            oom["text"].startswith("E0101: RuntimeProgramAllocationFailure: Error loading program"))

    def test_stdin_and_output_file(self):
        with open(data("memlog_engine_compile_a.log"), encoding="utf-8") as f:
            text = f.read()
        from_stdin, err = expect_exit(self, 0, TOOL, ["-"], stdin=text)
        self.assertIn("<stdin>", from_stdin.splitlines()[0])
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "summary.txt")
            rc, stdout, err = run([data("memlog_engine_compile_a.log"), "-o", out])
            self.assertEqual((rc, stdout), (0, ""), err)
            with open(out, encoding="utf-8") as f:
                self.assertRegex(f.read(), r"\nverdict +fits\n")

    # --- bad input -------------------------------------------------------------------------------
    def assert_fails(self, args, expected):
        assert_bad_input(self, "aot-summarize", run(args), expected)

    def test_bad_inputs(self):
        self.assert_fails([data("memlog_bad_empty.log")],
                          "memlog_bad_empty.log: holds no memory analysis")
        self.assert_fails(
            [data("memlog_bad_truncated_dict.log")],
            "memlog_bad_truncated_dict.log:2: Cost analysis: column 49: unterminated string")
        self.assert_fails(
            [data("memlog_bad_malformed_stats.log")],
            "memlog_bad_malformed_stats.log:3: Memory analysis: argument_size_in_bytes='2GB'")
        self.assert_fails(
            [data("memlog_bad_header_without_stats.log")],
            "memlog_bad_header_without_stats.log:5: kernel 'fwd_bwd_accum' has no Memory analysis")
        self.assert_fails([data("memlog_bad_no_analysis.log")], "holds no memory analysis")
        self.assert_fails([data("memlog_engine_compile_a.log"),
                           data("missing.log")], "missing.log: cannot open")
        self.assert_fails([data("memlog_engine_compile_a.log"), "--chip", "tpu9"],
                          "unknown TPU type 'tpu9'")
        self.assert_fails([data("memlog_engine_compile_a.log"), "--chip", "v5p", "--hbm-gib", "95"],
                          "excludes")
        self.assert_fails([data("memlog_engine_compile_a.log"), "--hbm-gib", "-1"], "--hbm-gib")
        self.assert_fails([], "LOG")
        rc, out, err = run([data("memlog_bad_empty.log"), "--json"])
        self.assertEqual(rc, 2)
        self.assertIn("holds no memory analysis", json.loads(out)["error"])

    def test_help_and_version(self):
        assert_help_and_version(self, "aot-summarize")


if __name__ == "__main__":
    unittest.main()
