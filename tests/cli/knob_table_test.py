"""render-bench's knob table (lib/rtb/bench/knobs.h) against every list that names the knobs: the
tool's --help, docs/render-bench.md's knob table, and the knobs diff_renders_test.py renders with
--expect-bench. `render-bench --print-knobs` is the table; a knob added there and missing from one
of these lists fails here, naming it.
"""

import json
import os
import re
import unittest

from cli_common import run_tool, tool_path
import diff_renders_test  # a module, so that its TestCase is not collected here again

RENDER = tool_path("render-bench")
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# Declared for every tool that tells the roles apart (tools/common/options.h), not by the knob
# table; the docs table lists them with the knobs.
ROLE_OPTIONS = {"--trainer-main", "--orch-main", "--rollout-main"}
# Knobs that --expect-bench has no case of its own for, and why.
NOT_RENDERED_BY_EXPECT_BENCH = {
    "--name": "every case renders with --name (DiffRendersTest.bench)",
    "--weights": "diff_renders_test's weights tests render --weights both ways",
    "--routing-targets": "a FILE: render_bench_test.py renders it",
    "--driver": "a FILE: driver_artifact_test.py and render_bench_test.py render it",
    "--stage-boundary": "tested with the orchestrator's copies (expect_bench_accepts_new_...)",
    "--routing": "tested with the orchestrator's copies (expect_bench_accepts_new_...)",
    "--logps-pass": "tested with the orchestrator's copies (expect_bench_accepts_new_...)",
    "--allow-fallbacks": "tested with the orchestrator's copies (expect_bench_accepts_new_...)",
}


def knob_table():
    rc, out, err = run_tool(RENDER, ["--print-knobs"])
    if rc != 0:
        raise AssertionError(f"render-bench --print-knobs: exit {rc}: {err}")
    document = json.loads(out)
    assert document["schema"] == "rtb.render-bench.knobs/1", document["schema"]
    return document["knobs"]


def docs_knob_options():
    """The options in the first column of docs/render-bench.md's knob table."""
    with open(os.path.join(REPO, "docs", "render-bench.md"), encoding="utf-8") as f:
        text = f.read()
    start = text.index("| knob | what it changes |")
    rows = text[start:].split("\n\n", 1)[0].splitlines()[2:]
    options = set()
    for row in rows:
        first = row.split(" | ", 1)[0]
        options.update(re.findall(r"`(--[a-z][a-z-]*)", first))  # the first word of each span
    return options


class KnobTableTest(unittest.TestCase):

    def test_table_is_well_formed(self):
        knobs = knob_table()
        options = [k["option"] for k in knobs]
        self.assertEqual(len(options), len(set(options)), options)
        self.assertGreaterEqual(len(knobs), 25)
        for knob in knobs:
            self.assertIn(knob["arity"], ("once", "repeated", "flag"), knob)
            self.assertEqual(knob["value"] is None, knob["arity"] == "flag", knob)
            self.assertTrue(knob["help"], knob)

    def test_help_declares_every_knob_with_its_value(self):
        rc, out, _ = run_tool(RENDER, ["--help"])
        self.assertEqual(rc, 0)
        for knob in knob_table():
            with self.subTest(option=knob["option"]):
                shown = knob["option"] + ("" if knob["value"] is None else " " + knob["value"])
                # Its entry, with the lines of a description too wide for the column.
                match = re.search(r"\n  " + re.escape(shown) + r"\s[^\n]*(\n   [^\n]*)*", out)
                self.assertIsNotNone(match, shown)
                # One value per use, each use kept (repeatable_options_test.py runs them).
                entry = match.group(0) if match else ""
                self.assertEqual(entry.endswith("(repeatable)"), knob["arity"] == "repeated", entry)

    def test_docs_table_lists_exactly_the_knobs(self):
        table = {k["option"] for k in knob_table()}
        documented = docs_knob_options()
        self.assertEqual(sorted(table - documented), [], "knobs missing from the docs table")
        self.assertEqual(sorted(documented - table - ROLE_OPTIONS), [],
                         "options in the docs table that are no knob")

    def test_expect_bench_cases_render_every_knob(self):
        given = set()
        for args in diff_renders_test.DiffRendersTest.KNOBS.values():
            for arg in args:
                if arg.startswith("--"):
                    given.add(arg.split("=", 1)[0])
        table = {k["option"] for k in knob_table()}
        self.assertEqual(sorted(table - given - set(NOT_RENDERED_BY_EXPECT_BENCH)), [],
                         "knobs that diff_renders_test.KNOBS never renders")
        self.assertEqual(sorted(set(NOT_RENDERED_BY_EXPECT_BENCH) - table), [],
                         "exemptions for options that are no knob")

    def test_given_twice_a_once_knob_is_refused(self):
        once = [k["option"] for k in knob_table() if k["arity"] == "once"]
        self.assertIn("--namespace", once)
        rc, _, err = run_tool(RENDER,
                              ["--demo", "--name", "a", "--namespace", "x", "--namespace", "y"])
        self.assertEqual(rc, 2)
        self.assertIn("--namespace", err)

    def test_one_per_pod_names_the_knobs_an_arm_is_refused(self):
        """--print-knobs' one_per_pod is the reason a same-pod arm may not set the knob: each knob
        that has one is refused for an arm in those words, and a knob without one is taken."""
        knobs = knob_table()
        one_per_pod = {k["option"]: k["one_per_pod"] for k in knobs if k["one_per_pod"]}
        self.assertEqual(sorted(one_per_pod), [
            "--driver", "--dump-hlo", "--image", "--libtpu-flag", "--name", "--namespace",
            "--output-prefix", "--trainer-slice", "--weights"
        ])
        flags = {k["option"] for k in knobs if k["arity"] == "flag"}
        for option, reason in one_per_pod.items():
            with self.subTest(option=option):
                knob = option if option in flags else f"{option}=x"
                rc, out, err = run_tool(
                    RENDER, ["--demo", "--name", "ab", "--arm", "a", "--arm", f"b:{knob}"])
                self.assertEqual((rc, out), (2, ""), err)
                self.assertIn(f"{option} cannot change inside one pod: {reason};", err)
        arm_knobs = [k for k in knobs if k["one_per_pod"] is None]
        self.assertIn("--steps", [k["option"] for k in arm_knobs])
        rc, _, err = run_tool(RENDER,
                              ["--demo", "--name", "ab", "--arm", "a", "--arm", "b:--steps=3"])
        self.assertEqual(rc, 0, err)

    def test_print_knobs_takes_no_input(self):
        rc, out, err = run_tool(RENDER, ["--print-knobs", "--demo"])
        self.assertEqual((rc, out), (2, ""))
        self.assertEqual(err, "render-bench: --print-knobs takes no DRYRUN or --demo\n")


if __name__ == "__main__":
    unittest.main()
