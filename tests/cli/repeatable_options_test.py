"""Options that take several values never swallow the positionals after them (issue 28, item 2).

Every tool's --help (and each subcommand's) is read for its options: a repeatable option says
"(repeatable)" (tools/common add_repeatable_option), an option of a fixed count shows "x N" after
its value (add_fixed_count_option), and no option may show CLI11's "..." of an option that takes
every following word. Each repeatable option is given twice before the positionals, and each
fixed-count option once, and must mean what it means after them. An option a tool adds is found
here by its help; the test then asks for values for it in the tables below, naming it.
"""

import os
import re
import unittest
from dataclasses import dataclass
from typing import Optional

from cli_common import (LAUNCH_DRYRUN, LAUNCH_DRYRUN_V5P, TempDirTestCase, run_tool, testdata,
                        tool_path)
from install_test import TOOLS

BENCH_LOGS = testdata("bench_logs")


def bench_log(name: str) -> str:
    return os.path.join(BENCH_LOGS, name)


# Two values of each repeatable option, as every tool that has it accepts them (one option, one
# meaning: render-bench and aot-check share the knobs). A value file is named by its basename
# and written to the test's folder.
REPEATABLE_VALUES = {
    "--maxtext-flag": ("scan_layers=true", "remat_policy=full"),
    "--maxtext-replace": ("moe_route=host", "ragged_buffer_factor=2.5"),
    "--libtpu-flag": ("--xla_tpu_a=1", "--xla_tpu_b=2"),
    "--trainer-arg": ("--foo=1", "--bar"),
    "--trainer-arg-remove": ("--lora_rank", "--lora_alpha"),
    "--orch-arg": ("--foo=1", "--bar=2"),
    "--driver-env": ("A=1", "B=2"),
    "--compile-key": ("a=1", "b=2"),
    "--limit": ("grad_norm=1", "loss=1e-3"),
    "--metric": ("entropy=policy/entropy", "loss=loss"),
    "--rename": ("abtest-orch=abtest-orch", "abtest-train=abtest-train"),
    "--ignore": ("*.image", "*.env.*"),
    "--ignore-file": ("ignore_a.txt", "ignore_b.txt"),
    "--only": ("abtest-orch:*", "abtest-train:*"),
    "--arm": ("base", "blk:--maxtext-flag=sa_block_q=2048"),
}
VALUE_FILES = {"ignore_a.txt": "*.image\n", "ignore_b.txt": "# nothing\n*.env.*\n"}

# The values of each fixed-count option, as many as its count.
FIXED_VALUES = {
    "--control-pair": (bench_log("bench_ctl.log"), bench_log("bench_ctl2.log")),
    "--numerics": (bench_log("numerics_ref1.log"), bench_log("numerics_ref2.log"),
                   bench_log("numerics_variant.log")),
}


@dataclass
class Command:
    """How to run a tool for these tests: its positionals and the other words it needs."""
    positionals: list[str]
    rest: list[str]


# For each tool that has such options. Output goes to stdout, so that both orders are compared.
COMMANDS = {
    "render-bench": Command([LAUNCH_DRYRUN], ["--name", "abtest-bench"]),
    "aot-check": Command([LAUNCH_DRYRUN], []),
    "bench-report": Command(
        [bench_log("bench_ctl.log"), bench_log("bench_fast.log")], []),
    "diff-renders": Command([LAUNCH_DRYRUN, LAUNCH_DRYRUN_V5P], []),
}


@dataclass
class HelpOption:
    command: list[str]  # the tool, then its subcommand if any
    name: str  # the long name
    text: str  # its help entry, continuation lines joined


def help_of(command: list[str]) -> str:
    code, out, err = run_tool(tool_path(command[0]), command[1:] + ["--help"])
    assert code == 0, (command, err)
    return out


def subcommands(help_text: str) -> list[str]:
    """The names in CLI11's "Subcommands:" list."""
    names, listing = [], False
    for line in help_text.splitlines():
        if line == "Subcommands:":
            listing = True
        elif listing and (m := re.match(r"^  ([a-z][a-z0-9-]*)( |$)", line)):
            names.append(m.group(1))
        elif not line.startswith("   "):
            listing = False
    return names


def options_of(command: list[str], help_text: str) -> list[HelpOption]:
    """Each option entry of a --help: two spaces, the names, the value; a description too wide for
    its column goes on the next lines."""
    entries: list[list[str]] = []
    current: Optional[list[str]] = None
    for line in help_text.splitlines():
        if line.startswith("  -"):
            current = [line[2:]]
            entries.append(current)
        elif current is not None and line.startswith("   "):
            current.append(line.strip())
        else:
            current = None
    options = []
    for entry in entries:
        names = entry[0].split(" ", 1)[0].split(",")
        long_names = [n for n in names if n.startswith("--")]
        if long_names:
            options.append(HelpOption(command, long_names[0], " ".join(entry)))
    return options


def every_option() -> list[HelpOption]:
    found = []
    for tool in TOOLS:
        text = help_of([tool])
        found += options_of([tool], text)
        for sub in subcommands(text):
            found += options_of([tool, sub], help_of([tool, sub]))
    return found


def fixed_count(option: HelpOption):
    """N of an option whose help shows `--opt VALUE x N`, else None."""
    m = re.match(r"^\S+ \S+ x (\d+)(\s|$)", option.text)
    return int(m.group(1)) if m else None


class RepeatableOptionsTest(TempDirTestCase):
    options: list[HelpOption]
    files: dict[str, str]  # a value file's name -> its path

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.options = every_option()
        cls.files = {}
        for name, text in VALUE_FILES.items():
            path = os.path.join(cls.tmp.name, name)
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
            cls.files[name] = path

    def value(self, value: str) -> str:
        return self.files.get(value, value)

    def repeatable(self):
        return [o for o in self.options if "(repeatable)" in o.text]

    def fixed(self):
        return [o for o in self.options if fixed_count(o) is not None]

    def run_both_orders(self, option: HelpOption, words: list[str]):
        """Runs the tool with `words` (the option and its values) before the positionals, then
        after them; the run after them must be accepted, and both must be the same run."""
        tool = option.command[0]
        self.assertIn(tool, COMMANDS, f"{tool}: add a command for its {option.name} to COMMANDS")
        command = COMMANDS[tool]
        before = run_tool(tool_path(tool), words + command.positionals + command.rest)
        after = run_tool(tool_path(tool), command.positionals + command.rest + words)
        self.assertNotEqual(after[0], 2, f"{tool} {' '.join(words)} after the positionals: {after}")
        self.assertEqual(before, after, f"{tool} {' '.join(words)} before the positionals")

    def test_help_finds_the_options_of_issue_28(self):
        repeatable = {(o.command[0], o.name) for o in self.repeatable()}
        for expected in [("render-bench", "--trainer-arg"), ("render-bench", "--maxtext-flag"),
                         ("aot-check", "--maxtext-flag"), ("aot-check", "--compile-key"),
                         ("bench-report", "--limit"), ("diff-renders", "--ignore")]:
            self.assertIn(expected, repeatable)
        fixed = {(o.command[0], o.name): fixed_count(o) for o in self.fixed()}
        self.assertEqual(fixed, {("bench-report", "--control-pair"): 2,
                                 ("bench-report", "--numerics"): 3})

    def test_no_option_takes_every_word_after_it(self):
        for option in self.options:
            with self.subTest(command=option.command, option=option.name):
                self.assertNotRegex(option.text, r"^\S+ \S+ \.\.\.(\s|$)",
                                    "declare it with add_repeatable_option (tools/common)")

    def test_each_repeatable_option_twice_before_the_positionals(self):
        for option in self.repeatable():
            with self.subTest(command=option.command, option=option.name):
                self.assertIn(option.name, REPEATABLE_VALUES,
                              f"add two values of {option.name} to REPEATABLE_VALUES")
                first, second = (self.value(v) for v in REPEATABLE_VALUES[option.name])
                # Both spellings: --opt=VALUE and --opt VALUE.
                self.run_both_orders(option, [f"{option.name}={first}", option.name, second])

    def test_each_fixed_count_option_keeps_its_count(self):
        for option in self.fixed():
            with self.subTest(command=option.command, option=option.name):
                self.assertIn(option.name, FIXED_VALUES,
                              f"add {fixed_count(option)} values of {option.name} to FIXED_VALUES")
                values = list(FIXED_VALUES[option.name])
                self.assertEqual(len(values), fixed_count(option))
                self.run_both_orders(option, [option.name] + values)
                # One value short: refused, naming the option, rather than taking fewer.
                tool = option.command[0]
                command = COMMANDS[tool]
                code, out, err = run_tool(
                    tool_path(tool),
                    command.positionals + command.rest + [option.name] + values[:-1])
                self.assertEqual((code, out), (2, ""), err)
                self.assertEqual(len(err.splitlines()), 1, err)
                self.assertIn(f"{option.name}: At least {len(values)} required", err)

    def test_the_issue_28_commands(self):
        """The command lines of the issue, each now read as written."""
        trainer_arg = ["--trainer-arg=--foo=1", LAUNCH_DRYRUN, "--name", "x"]
        for tool, args in [
            ("render-bench", trainer_arg),
            ("render-bench", ["--maxtext-flag", "a=1", LAUNCH_DRYRUN, "--name", "x"]),
            ("aot-check", ["--maxtext-flag", "a=1", LAUNCH_DRYRUN]),
            ("bench-report",
             ["--limit", "grad_norm=1",
              bench_log("bench_ctl.log"),
              bench_log("bench_ctl2.log")]),
        ]:
            with self.subTest(tool=tool, args=args):
                code, _, err = run_tool(tool_path(tool), args)
                self.assertEqual(code, 0, err)


if __name__ == "__main__":
    unittest.main()
