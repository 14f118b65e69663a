"""The contract between render-bench and the bench driver. Both take the driver's settings from one
table, tools/render-bench/driver/settings.tsv; this test holds them to it, from the table itself,
so that a row added there is covered without a change here:

- a bad value (generated from the row's kind) is refused by both, in the same words:
  `render-bench: --steps 0: must be >= 1` and `bench_driver: STEPS='0': must be >= 1`;
- what render-bench writes for a value it accepts, the driver reads back as that value.

The driver is the built one-file driver (cli_common.DRIVER, RTB_DRIVER under ctest), run
as `python3 DRIVER --print-settings`: it parses its environment as the pod run would, then prints
one JSON object {NAME: parsed value} of the settings that are set (exit 0), or refuses a bad one
(exit 2, one line).
"""

import json
import os
import re
import subprocess
import tempfile
import unittest
from typing import Any, Dict, List, Tuple

import yaml

from cli_common import DRIVER, LAUNCH_DRYRUN, PYTHON, assert_bad_input, driver_settings_env, run_tool
from cli_common import container, load_driver, script_of, tool_path

REPO = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
SETTINGS = os.path.join(REPO, "tools", "render-bench", "driver", "settings.tsv")
TOOL = tool_path("render-bench")
DRIVER_ARGS = ["--print-settings"]
# The settings the driver requires, for a run that checks one other setting.
REQUIRED = {"TRAINER_ARGV": "--x", "ORCH_ARGV": "--y"}
NOT_A_BOOLEAN = "not a boolean (true/false, 1/0, yes/no, on/off)"


def read_settings():
    """The rows of settings.tsv, each a dict of its columns, in the file's order."""
    with open(SETTINGS, encoding="utf-8") as f:
        lines = [line.rstrip("\n") for line in f if not line.startswith("#")]
    columns = lines[0].split("\t")
    return [dict(zip(columns, line.split("\t"))) for line in lines[1:] if line]


SETTINGS_ROWS = read_settings()


def has_option(row):
    return row["option"].startswith("--")


def bad_values(kind):
    """(value, reason) pairs that a setting of `kind` refuses, with the reason both sides give."""
    if kind == "int":
        return [("x", "not an integer"), ("1.5", "not an integer")]
    if kind.startswith("int>="):
        minimum = int(kind[len("int>="):])
        return [(str(minimum - 1), f"must be >= {minimum}"), ("x", "not an integer"),
                ("1.5", "not an integer")]
    if kind.startswith("float>="):
        lowest = float(kind[len("float>="):])
        return [(f"{lowest - 1:g}", f"must be >= {lowest:g}"), ("x", "not a number"),
                ("inf", "must be finite"), ("nan", "must be finite")]
    if kind.startswith("choice:"):
        return [("maybe", f"must be one of {kind[len('choice:'):]}")]
    if kind == "bool":
        return [("maybe", NOT_A_BOOLEAN), ("2", NOT_A_BOOLEAN)]
    if kind == "pad_align":
        return [("0", "must be >= 1"), ("x", "not an integer"),
                ("100", "must be a multiple of the segment alignment 64")]
    if kind == "window":
        return [("5", "expected START:COUNT (timed steps, 0-based start)"),
                ("-1:2", "START must be >= 0"), ("1:0", "COUNT must be >= 1")]
    if kind in ("argv", "targets", "text"):
        return []  # not checked as a value (render-bench reads the targets from a FILE)
    raise AssertionError(f"settings.tsv has a kind this test does not know: {kind}")


def good_value(row):
    """A value of the row's kind other than its default: (the text to give, the value the driver
    should read back, as --print-settings prints it)."""
    kind, default = row["kind"], row["default"]
    if kind == "int" or kind.startswith("int>="):
        minimum = int(kind[len("int>="):]) if kind.startswith("int>=") else 0
        value = next(v for v in (minimum + 2, minimum + 3) if str(v) != default)
        return f" {value} ", value
    if kind.startswith("float>="):
        number = next(v for v in (float(kind[len("float>="):]) + 1.5, 7.25) if f"{v:g}" != default)
        return f"{number:g}", number
    if kind.startswith("choice:"):
        word = next(w for w in reversed(kind[len("choice:"):].split("|")) if w != default)
        return word.upper(), word
    if kind == "bool":
        return ("Yes", True) if default != "1" else ("no", False)
    if kind == "pad_align":
        return "2048", 2048
    if kind == "window":
        return " 1 : 2 ", "1:2"  # within the other settings' STEPS (3)
    if kind == "text":
        return "contract-text", "contract-text"
    raise AssertionError(f"no good value for {row['name']} ({kind})")


def run_driver(env):
    """Runs the driver with exactly `env` as its environment; (exit code, stdout, stderr)."""
    proc = subprocess.run([PYTHON, DRIVER, *DRIVER_ARGS], env=env, capture_output=True, text=True,
                          timeout=120)
    return proc.returncode, proc.stdout, proc.stderr


def render(args, stdin=None):
    return run_tool(TOOL, args, stdin=stdin, timeout=60)


class DriverSettingsContractTest(unittest.TestCase):

    def render_bench_reason(self, args, where):
        """The reason render-bench gives for refusing `args`, its error line being
        `render-bench: <where>: <reason>`."""
        line = assert_bad_input(self, "render-bench",
                                render(["--demo", "--name", "contract-bench", *args]))
        prefix = f"render-bench: {where}: "
        self.assertTrue(line.startswith(prefix), f"{line!r} should start with {prefix!r}")
        return line[len(prefix):]

    def driver_reason(self, name, value):
        """The reason the driver gives for refusing NAME=value, its error line being
        `bench_driver: NAME='value': <reason>`."""
        code, out, err = run_driver({**REQUIRED, name: value})
        self.assertEqual((code, out), (2, ""), err)
        prefix = f"bench_driver: {name}={value!r}: "
        self.assertTrue(
            err.startswith(prefix) and err.endswith("\n") and err.count("\n") == 1,
            f"{err!r} should be one line starting with {prefix!r}")
        return err[len(prefix):-1]

    def refused(self):
        """(row, the render-bench arguments, where render-bench names them, value, reason) for every
        bad value of every setting render-bench takes: through its option, or, without one, through
        --driver-env."""
        for row in SETTINGS_ROWS:
            if row["option"] in ("argv", "arm") or row["option"] == "--allow-fallbacks":
                # The argvs are render-bench's own, the arm settings its arms script's (each arm's
                # name is checked as an --arm name); --allow-fallbacks takes no value.
                continue
            for value, reason in bad_values(row["kind"]):
                if has_option(row):
                    yield (row, [f"{row['option']}={value}"], f"{row['option']} {value}", value,
                           reason)
                else:
                    yield (row, [f"--driver-env={row['name']}={value}"],
                           f"--driver-env {row['name']}={value}", value, reason)

    # --- (a) a bad value: refused by both, in the same words -----------------------------------
    def test_render_bench_refuses_bad_values_in_the_tables_words(self):
        cases = 0
        for row, args, where, value, reason in self.refused():
            with self.subTest(setting=row["name"], value=value):
                cases += 1
                self.assertEqual(self.render_bench_reason(args, where), reason)
        self.assertGreater(cases, 30)

    def test_the_driver_refuses_them_in_the_same_words(self):
        for row, args, where, value, reason in self.refused():
            with self.subTest(setting=row["name"], value=value):
                driver = self.driver_reason(row["name"], value)
                self.assertEqual(driver, self.render_bench_reason(args, where))
                self.assertEqual(driver, reason)

    def test_a_window_beyond_the_timed_steps_is_refused_by_both_in_the_same_words(self):
        # PROFILE_WINDOW counts timed steps: both check it against STEPS, not against the calls.
        reason = "ends after the last timed step (STEPS=3: steps 0..2)"
        code, out, err = run_driver({**REQUIRED, "STEPS": "3", "PROFILE_WINDOW": "2:2"})
        self.assertEqual((code, out, err),
                         (2, "", f"bench_driver: PROFILE_WINDOW='2:2': {reason}\n"))
        self.assertEqual(
            self.render_bench_reason(["--steps", "3", "--profile-window", "2:2"],
                                     "--profile-window 2:2"), reason)

    # --- (b) an accepted value: what render-bench writes, the driver reads back -----------------
    def test_every_setting_without_an_option_passes_driver_env(self):
        for row in SETTINGS_ROWS:
            if row["option"] != "-":
                continue
            with self.subTest(setting=row["name"]):
                given, _ = good_value(row)
                rc, out, err = render(
                    ["--demo", "--name", "contract-bench", f"--driver-env={row['name']}={given}"])
                self.assertEqual(rc, 0, err)
                env = driver_settings_env(script_of(yaml.safe_load(out)))
                self.assertEqual(env[row["name"]], given)

    def test_what_render_bench_writes_the_driver_reads_as_asked(self):
        """One render with a value other than the default for every setting render-bench writes:
        through its option, --driver-env for those without one, the e2e orchestrator's environment
        for its ORCH_* copies, the rollout JobSet's flag for its ROLLOUT_* copies. The driver, run
        with exactly the driver settings of the client script, reads each back as the value asked
        for."""
        expected: Dict[str, Any] = {}
        args: List[str] = []
        orchestrator_env: List[str] = []
        rollout_flags: Dict[str, str] = {}
        with tempfile.TemporaryDirectory() as tmp:
            for row in SETTINGS_ROWS:
                name, option, kind = row["name"], row["option"], row["kind"]
                if kind == "argv" or option == "arm":
                    # TRAINER_ARGV, ORCH_ARGV: render-bench's own (render_bench_test); BENCH_ARM,
                    # BENCH_RUN: a same-pod A/B's (test_arm_settings_read_back).
                    continue
                if option == "--routing-targets":
                    targets = os.path.join(tmp, "targets.txt")
                    with open(targets, "w", encoding="utf-8") as f:
                        f.write("# two layers\n1.5\n2.25\n")
                    args += [option, targets]
                    expected[name] = [1.5, 2.25]
                elif option == "--allow-fallbacks":
                    args.append(option)
                    expected[name] = True
                elif option == "--name":
                    args += [option, "contract-bench"]
                    expected[name] = "contract-bench"
                elif has_option(row):
                    given, expected[name] = good_value(row)
                    args.append(f"{option}={given}")
                elif option == "-":
                    given, expected[name] = good_value(row)
                    args.append(f"--driver-env={name}={given}")
                elif option == "orch":
                    given, expected[name] = good_value(row)
                    orchestrator_env.append(f"{name[len('ORCH_'):]}={given.strip()}")
                elif option == "rollout":
                    # The rollout JobSet's flag of that name (ROLLOUT_RETURN_ROUTED_EXPERTS:
                    # --return_routed_experts), replacing the fixture's.
                    given, expected[name] = good_value(row)
                    rollout_flags[f"--{name[len('ROLLOUT_'):].lower()}"] = given.strip()
                else:
                    self.fail(f"settings.tsv: {name} has an option column this test does not know")
            with open(LAUNCH_DRYRUN, encoding="utf-8") as f:
                dryrun = f.read()
            anchor = 'ORCHESTRATOR_ID="abtest-orch"'
            self.assertIn(anchor, dryrun)
            dryrun = dryrun.replace(anchor, " ".join(orchestrator_env + [anchor]), 1)
            for flag, given in rollout_flags.items():
                self.assertEqual(dryrun.count(f" {flag}="), 1, flag)
                dryrun = re.sub(rf" {flag}=\S+", f" {flag}={given}", dryrun)
            rc, out, err = render(["-", *args], stdin=dryrun)
        self.assertEqual(rc, 0, err)
        env = driver_settings_env(script_of(yaml.safe_load(out)))
        for name in expected:
            self.assertIn(name, env, "render-bench writes every setting asked for")
        code, out, err = run_driver(env)
        self.assertEqual(code, 0, err)
        printed = json.loads(out)
        self.assertIsInstance(printed, dict)
        for name, value in expected.items():
            with self.subTest(setting=name):
                self.assertIn(name, printed)
                # Types too: True is not 1, 2048 is not 2048.0.
                self.assertEqual((type(printed[name]), printed[name]), (type(value), value))


class ProfileDirContractTest(unittest.TestCase):
    """Where the trace and the HLO dump go: render-bench --dump-hlo puts the proxy's dump in
    <PROFILE_DIR>/hlo, and the driver writes its trace to PROFILE_DIR and, with DUMP_HLO=1, its
    own compiles' dump to the same <PROFILE_DIR>/hlo. Both default PROFILE_DIR to
    <--maxtext_output_directory>/bench_profile; this test holds the two to one answer for each
    way PROFILE_DIR and the output directory can be given."""

    CASES: List[Tuple[str, List[str]]] = [
        ("the e2e's output directory", []),
        ("--output-prefix", ["--output-prefix", "gs://b/prefix"]),
        ("an output directory with a trailing slash",
         ["--trainer-arg=--maxtext_output_directory=gs://b/out/"]),
        ("no output directory", ["--trainer-arg-remove=--maxtext_output_directory"]),
        ("PROFILE_DIR", ["--driver-env=PROFILE_DIR=gs://b/profiles/run1"]),
        ("PROFILE_DIR with a trailing slash", ["--driver-env=PROFILE_DIR=gs://b/profiles/"]),
        ("PROFILE_DIR with blanks around it", ["--driver-env=PROFILE_DIR= gs://b/profiles/run2 "]),
        ("an empty PROFILE_DIR (the default)", ["--driver-env=PROFILE_DIR="]),
    ]

    def test_render_bench_and_the_driver_agree_on_the_dump_directory(self):
        driver = load_driver()
        for name, args in self.CASES:
            with self.subTest(case=name):
                rc, out, err = render([LAUNCH_DRYRUN, "--name", "dir-bench", "--dump-hlo", *args])
                self.assertEqual(rc, 0, err)
                bench = yaml.safe_load(out)
                dumps = [
                    a for a in container(bench, "pathways-proxy")["args"]
                    if a.startswith("--xla_dump_to=")
                ]
                self.assertEqual(len(dumps), 1, dumps)
                env = driver_settings_env(script_of(bench))
                settings = driver.parse_settings(env)
                _, words = driver.split_runtime_argv("TRAINER_ARGV", settings.trainer_argv)
                output_dir = driver.flag_value(words, "--maxtext_output_directory")
                flags = driver.hlo_dump_flags(
                    driver.profile_dir_of(settings.profile_dir, output_dir))
                self.assertIn(dumps[0], flags.split(), f"render-bench: {dumps[0]}, driver: {flags}")


class ArmSettingsContractTest(unittest.TestCase):

    def test_arm_settings_read_back(self):
        """A same-pod A/B's settings: each arm's startup block sets BENCH_ARM, the wrapper exports
        each run's BENCH_RUN, and the driver reads both back."""
        rows = [row["name"] for row in SETTINGS_ROWS if row["option"] == "arm"]
        self.assertEqual(rows, ["BENCH_ARM", "BENCH_RUN"])
        rc, out, err = render(
            ["--demo", "--name", "contract-bench", "--arm", "base", "--arm", "more:--steps=3"])
        self.assertEqual(rc, 0, err)
        env = driver_settings_env(script_of(yaml.safe_load(out)))  # the first arm's block
        self.assertEqual(env["BENCH_ARM"], "base")
        self.assertNotIn("BENCH_RUN", env)  # exported by the wrapper for each run
        code, printed, err = run_driver({**env, "BENCH_RUN": "4"})
        self.assertEqual(code, 0, err)
        self.assertEqual({k: v
                          for k, v in json.loads(printed).items() if k.startswith("BENCH_")},
                         {"BENCH_NAME": "contract-bench", "BENCH_ARM": "base", "BENCH_RUN": 4})


if __name__ == "__main__":
    unittest.main()
