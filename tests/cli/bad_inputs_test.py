"""The hostile-input corpus: runs every tool on the cases of testdata/bad/cases.tsv (truncated, empty,
binary, huge, deeply nested, alias bombs, duplicate keys, invalid UTF-8, CRLF, NUL bytes, shell
metacharacters, numbers out of range, negative sizes, missing files, directories) and checks, for each,
the exit code, the start of the one-line error, that nothing crashed or hung, and that no output file
was written or damaged.

cases.tsv: one case per line, tab-separated, `#` comments:
    id  tool  args  exit  stderr  [check]  [stdin]
- args: the argument list as shell words (split with shlex; nothing is run through a shell);
- placeholders in args, stderr and stdin: {bad} = testdata/bad, {testdata} = testdata, {tmp} = a
  fresh directory for the case, {gen:NAME} = a file made at test time by GENERATORS[NAME] (the huge
  inputs, kept out of the repository);
- exit: the expected exit code;
- stderr: what the first error line on stderr starts with (exit 2), "" for no error line;
- check (optional): `script=VALUE` (render-bench / aot-check output: every shell script parses with
  `bash -n` and VALUE appears in it only as a literal: inside single quotes or a quoted here-document),
  `json` (stdout is valid UTF-8 JSON), `no-cr` (the output file has no carriage return);
- stdin (optional): a file fed to the tool's stdin (default: /dev/null).
Any `-o/--output/--svg PATH` under {tmp} is created beforehand with sentinel bytes: a failing case
must leave them intact, and no temporary file may be left beside them.
"""

import json
import os
import re
import shlex
import subprocess
import tempfile
import unittest

import yaml

BIN = os.environ.get("RTB_BIN_DIR", "")
TESTDATA = os.environ.get("RTB_TESTDATA_DIR", "")
BAD = os.path.join(TESTDATA, "bad")
CASES = os.path.join(BAD, "cases.tsv")
TIMEOUT_S = 10  # seconds per case: every case takes well under one on a release build
SENTINEL = b"sentinel: a good file from an earlier run\n"
CRASH_MARKS = ("Traceback (most recent call last)", "terminate called", "AddressSanitizer",
               "UndefinedBehaviorSanitizer", "runtime error:", "Segmentation fault", "Aborted",
               "core dumped", "LeakSanitizer", "internal error")
OUTPUT_OPTIONS = ("-o", "--output", "--svg")
HUGE = 20 << 20  # bytes of a "huge single line"


def gen_huge_line(path):
    """20 MiB of text without a newline."""
    with open(path, "wb") as f:
        f.write(b"a" * HUGE)


def gen_huge_config_value(path):
    """A real config log with one value of 20 MiB on one line."""
    with open(os.path.join(TESTDATA, "configlog_trainer_node.log"), "rb") as f:
        text = f.read()
    text = text.replace(b"Config param adam_b2: 0.95", b"Config param adam_b2: " + b"9" * HUGE, 1)
    with open(path, "wb") as f:
        f.write(text)


def gen_huge_hlo_statement(path):
    """An HLO module whose first instruction is a 20 MiB line (over --max-statement-mib 16)."""
    with open(path, "wb") as f:
        f.write(b"HloModule huge, is_scheduled=true\n\nENTRY %main (p: f32[8]) -> f32[8] {\n"
                b"  %p = f32[8]{0} parameter(0), metadata={op_name=\"" + b"x" * HUGE + b"\"}\n"
                b"  ROOT %r = f32[8]{0} all-reduce(%p), replica_groups={}, to_apply=%add\n}\n")


def gen_huge_bench_line(path):
    """A bench log whose only step line carries 20 MiB of JSON."""
    with open(path, "wb") as f:
        f.write(b'BENCH_STEP {"step":1,"seconds":2.0,"microbatch_s":[' + b"1.0," * (HUGE // 4) +
                b"1.0]}\n")


GENERATORS = {
    "huge_line": gen_huge_line,
    "huge_config_value": gen_huge_config_value,
    "huge_hlo_statement": gen_huge_hlo_statement,
    "huge_bench_line": gen_huge_bench_line,
}


def load_cases():
    cases = []
    with open(CASES, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line.strip() or line.startswith("#"):
                continue
            fields = line.split("\t")
            if len(fields) < 5 or len(fields) > 7:
                raise ValueError(
                    f"cases.tsv:{number}: expected 5 to 7 tab-separated fields, got {len(fields)}")
            fields += [""] * (7 - len(fields))
            case_id, tool, args, exit_code, stderr, check, stdin = fields
            cases.append({
                "line": number, "id": case_id, "tool": tool, "args": args, "exit": int(exit_code),
                "stderr": stderr, "check": check, "stdin": stdin
            })
    return cases


def shell_states(script):
    """For every character of a bash script: 'none' (unquoted), 'single', 'double' or 'heredoc-quoted'
    / 'heredoc' (a here-document body with a quoted / unquoted delimiter). Enough of bash's lexer to
    tell where a value is literal: quotes, backslashes, comments and here-documents."""
    states = ["none"] * len(script)
    state = "none"
    pending = []  # here-document delimiters opened on the current line: (word, quoted, strip_tabs)
    i = 0
    n = len(script)
    while i < n:
        c = script[i]
        if state == "none":
            states[i] = "none"
            if c == "\\":
                i += 2
                continue
            if c == "'":
                state = "single"
            elif c == '"':
                state = "double"
            elif c == "#" and (i == 0 or script[i - 1] in " \t\n;|&("):
                while i < n and script[i] != "\n":
                    states[i] = "none"
                    i += 1
                continue
            elif script.startswith("<<", i) and not script.startswith("<<<", i):
                m = re.match(r"<<(-?)\s*(['\"]?)([A-Za-z_0-9]+)\2", script[i:])
                if m:
                    pending.append((m.group(3), bool(m.group(2)), bool(m.group(1))))
                    for k in range(i, i + m.end()):
                        states[k] = "none"
                    i += m.end()
                    continue
            elif c == "\n" and pending:
                i += 1
                for word, quoted, strip_tabs in pending:
                    while i < n:
                        end = script.find("\n", i)
                        end = n if end < 0 else end
                        line = script[i:end]
                        if (line.lstrip("\t") if strip_tabs else line) == word:
                            for k in range(i, end):
                                states[k] = "none"
                            i = end
                            break
                        for k in range(i, min(end + 1, n)):
                            states[k] = "heredoc-quoted" if quoted else "heredoc"
                        i = end + 1
                pending = []
                continue
        elif state == "single":
            states[i] = "single"
            if c == "'":
                state = "none"
        elif state == "double":
            states[i] = "double"
            if c == "\\":
                if i + 1 < n:
                    states[i + 1] = "double"
                i += 2
                continue
            if c == '"':
                state = "none"
        i += 1
    return states


class BadInputsTest(unittest.TestCase):
    # Set once, by setUpClass.
    gen_dir: tempfile.TemporaryDirectory[str]
    generated: dict[str, str]

    @classmethod
    def setUpClass(cls):
        cls.gen_dir = tempfile.TemporaryDirectory(prefix="rtb-bad-gen-")
        cls.generated = {}

    @classmethod
    def tearDownClass(cls):
        cls.gen_dir.cleanup()

    def generated_path(self, name):
        if name not in self.generated:
            path = os.path.join(self.gen_dir.name, name)
            GENERATORS[name](path)
            self.generated[name] = path
        return self.generated[name]

    def expand(self, text, tmp):
        text = text.replace("{bad}", BAD).replace("{testdata}", TESTDATA).replace("{tmp}", tmp)
        return re.sub(r"\{gen:([a-z_]+)\}", lambda m: self.generated_path(m.group(1)), text)

    def test_cases_table_is_well_formed(self):
        cases = load_cases()
        ids = [c["id"] for c in cases]
        self.assertEqual(len(ids), len(set(ids)), "case ids are unique")
        self.assertGreaterEqual(len(cases), 60)
        for case in cases:
            self.assertTrue(os.path.exists(os.path.join(BIN, case["tool"])), case["tool"])
            self.assertIn(case["exit"], (0, 1, 2), case["id"])
            if case["exit"] == 2:
                self.assertTrue(case["stderr"].startswith(case["tool"] + ": "), case["id"])

    def test_every_case(self):
        for case in load_cases():
            with self.subTest(case=case["id"], line=case["line"]):
                self.run_case(case)

    def run_case(self, case):
        tool = case["tool"]
        with tempfile.TemporaryDirectory(prefix="rtb-bad-") as tmp:
            args = [self.expand(word, tmp) for word in shlex.split(case["args"])]
            outputs = [
                args[i + 1] for i, a in enumerate(args[:-1])
                if a in OUTPUT_OPTIONS and args[i + 1].startswith(tmp + os.sep)
            ]
            outputs += [
                a.split("=", 1)[1] for a in args
                if a.split("=", 1)[0] in OUTPUT_OPTIONS[1:] and "=" in a
            ]
            outputs = [path for path in outputs if os.path.isdir(os.path.dirname(path))]
            for path in outputs:
                with open(path, "wb") as f:
                    f.write(SENTINEL)
            before = set(os.listdir(tmp))
            stdin_path = self.expand(case["stdin"], tmp) if case["stdin"] else os.devnull
            command = [os.path.join(BIN, tool)] + args
            shown = " ".join(shlex.quote(w) for w in command)
            with open(stdin_path, "rb") as stdin:
                try:
                    proc = subprocess.run(command, stdin=stdin, capture_output=True,
                                          timeout=TIMEOUT_S, cwd=tmp)
                except subprocess.TimeoutExpired:
                    self.fail(f"hang: no exit within {TIMEOUT_S} s: {shown}")
            stderr = proc.stderr.decode("utf-8", "replace")
            context = f"\ncommand: {shown}\nexit: {proc.returncode}\nstderr: {stderr[:2000]}"

            self.assertGreaterEqual(proc.returncode, 0, "killed by a signal" + context)
            for mark in CRASH_MARKS:
                self.assertNotIn(mark, stderr, "crash report on stderr" + context)
            self.assertEqual(proc.returncode, case["exit"], "exit code" + context)

            log_prefixes = tuple(f"{tool}: {level}: "
                                 for level in ("warning", "info", "debug", "error", "critical"))
            errors = [
                line for line in stderr.splitlines() if line and not line.startswith(log_prefixes)
            ]
            expected = self.expand(case["stderr"], tmp)
            if case["exit"] == 2:
                self.assertEqual(len(errors), 1,
                                 "exactly one error line besides log lines" + context)
                self.assertTrue(errors[0].startswith(expected),
                                f"error line should start with {expected!r}" + context)
            elif expected:
                self.assertTrue(errors and errors[0].startswith(expected),
                                f"first error line should start with {expected!r}" + context)

            # Outputs: a failed run leaves a good file alone; no temporary file is left behind.
            after = set(os.listdir(tmp))
            self.assertEqual(sorted(after - before), [],
                             "files left in the output directory" + context)
            if case["exit"] == 2:
                for path in outputs:
                    with open(path, "rb") as f:
                        self.assertEqual(f.read(), SENTINEL,
                                         f"{path} was changed by a failed run" + context)
            self.check_output(case, tmp, proc, outputs, context)

    def check_output(self, case, tmp, proc, outputs, context):
        check = self.expand(case["check"], tmp)
        if not check:
            return
        text = proc.stdout
        if outputs and case["exit"] == 0:
            with open(outputs[0], "rb") as f:
                text = f.read()
        if check == "json":
            try:
                json.loads(text.decode("utf-8"))  # strict: invalid UTF-8 or JSON raises
            except ValueError as e:  # UnicodeDecodeError and JSONDecodeError
                self.fail(f"stdout is not valid UTF-8 JSON: {e}" + context)
        elif check == "no-cr":
            self.assertNotIn(b"\r", text, "a carriage return reached the output" + context)
        elif check.startswith("script="):
            self.check_scripts(case["tool"], text.decode("utf-8"), check[len("script="):], context)
        else:
            self.fail(f"unknown check {check!r}")

    def check_scripts(self, tool, text, value, context):
        if tool == "render-bench":
            scripts = []
            for job in yaml.safe_load(text)["spec"]["replicatedJobs"]:
                spec = job["template"]["spec"]["template"]["spec"]
                containers = (spec.get("initContainers") or []) + (spec.get("containers") or [])
                for container in containers:
                    command = container.get("command") or []
                    if len(command) >= 3 and command[0] in ("bash", "sh", "/bin/bash", "/bin/sh"):
                        scripts.append(command[2])
        else:
            scripts = [text]
        found = 0
        for script in scripts:
            proc = subprocess.run(["bash", "-n"], input=script.encode(), capture_output=True,
                                  timeout=TIMEOUT_S)
            self.assertEqual(
                proc.returncode, 0,
                "bash -n fails on the script: " + proc.stderr.decode(errors="replace") + context)
            states = shell_states(script)
            for m in re.finditer(re.escape(value), script):
                found += 1
                self.assertIn(
                    states[m.start()], ("single", "heredoc-quoted"),
                    f"{value!r} at offset {m.start()} is not quoted: "
                    f"{script[max(0, m.start() - 80):m.end() + 20]!r}" + context)
        self.assertGreater(found, 0, f"{value!r} does not appear verbatim in a script" + context)


if __name__ == "__main__":
    unittest.main()
