"""What every CLI test shares: where the built tools and the fixtures are, and how to run a tool.

ctest sets RTB_BIN_DIR (the built tools), RTB_TESTDATA_DIR (testdata/), RTB_PYTHON (the
interpreter that has numpy and yaml) and RTB_DRIVER (the built one-file bench driver); see
CMakeLists.txt.
"""

import importlib.util
import os
import re
import shlex
import subprocess
import sys
import tempfile
import unittest
from typing import Iterable, Mapping, Optional, Sequence, Union

BIN = os.environ.get("RTB_BIN_DIR", "")
TESTDATA = os.environ.get("RTB_TESTDATA_DIR", "")
PYTHON = os.environ.get("RTB_PYTHON", sys.executable)
# The one-file bench driver as render-bench embeds it (the build's artifact, made from the
# rtb_driver package by tools/render-bench/driver/amalgamate.py).
DRIVER = os.environ.get("RTB_DRIVER") or os.path.join(BIN, "..", "driver", "bench_driver.py")


def load_driver(name: str = "bench_driver_under_cli_test"):
    """The built one-file driver (DRIVER) imported as a module, once per process."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, DRIVER)
    assert spec is not None and spec.loader is not None, DRIVER
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def tool_path(name: str) -> str:
    return os.path.join(BIN, name)


def testdata(*parts: str) -> str:
    return os.path.join(TESTDATA, *parts)


# The fixtures several tools' tests start from: the DRY_RUN of a trainer launch (v7x and v5p), and
# the folder of bad inputs.
LAUNCH_DRYRUN = testdata("launch_dryrun.txt")
LAUNCH_DRYRUN_V5P = testdata("launch_dryrun_v5p.txt")
BAD_INPUTS = testdata("bad")

# A command: a tool's path, or a list of words that starts with one.
Command = Union[str, Sequence[str]]


def run_tool(command: Command, args: Iterable[str] = (), stdin: Union[str, bytes, None] = None,
             env: Optional[Mapping[str, str]] = None, unset: Iterable[str] = (),
             cwd: Optional[str] = None, timeout: float = 120) -> tuple[int, str, str]:
    """Runs `command` (a path, or a list that starts with one) with `args` and `stdin` (text or
    bytes); returns (exit code, stdout, stderr) as UTF-8 text. `env` adds to this process's
    environment, `unset` removes."""
    full_env = dict(os.environ)
    for name in unset:
        full_env.pop(name, None)
    full_env.update(env or {})
    argv = (list(command) if isinstance(command, (list, tuple)) else [command]) + list(args)
    data = stdin.encode("utf-8") if isinstance(stdin, str) else stdin  # bytes pass as they are
    proc = subprocess.run(argv, input=data, capture_output=True, timeout=timeout, env=full_env,
                          cwd=cwd)
    return proc.returncode, proc.stdout.decode("utf-8"), proc.stderr.decode("utf-8")


def expect_exit(test: unittest.TestCase, code: Optional[int], command: Command,
                args: Iterable[str] = (), **run_kwargs) -> tuple[str, str]:
    """Runs `command` like run_tool() and asserts that it exits with `code` (stdout and stderr in
    the message) unless `code` is None; returns (stdout, stderr)."""
    rc, out, err = run_tool(command, args, **run_kwargs)
    if code is not None:
        test.assertEqual(rc, code, out + err)
    return out, err


def assert_bad_input(test: unittest.TestCase, tool: str, result: tuple[int, str, str],
                     expected: Optional[str] = None, pattern: Optional[str] = None) -> str:
    """Asserts that `result`, the (exit code, stdout, stderr) of a run of `tool` (its name), is a
    bad-input failure as the house rules want it: exit 2, nothing on stdout, one stderr line
    `tool: ...` that holds `expected` and matches the regex `pattern` (each when given). Returns
    that line."""
    code, out, err = result
    test.assertEqual(code, 2, out + err)
    test.assertEqual(out, "")
    lines = err.splitlines()
    test.assertEqual(len(lines), 1, err)
    test.assertTrue(err.endswith("\n"), err)
    test.assertTrue(lines[0].startswith(tool + ": "), err)
    if expected is not None:
        test.assertIn(expected, lines[0])
    if pattern is not None:
        test.assertRegex(lines[0], pattern)
    return lines[0]


def assert_help_and_version(test: unittest.TestCase, tool: str, *in_help: str) -> None:
    """`tool --help` exits 0 with an example ("Examples:") and each text of `in_help`; `tool
    --version` exits 0 and names the tool, the project and a version."""
    out, _ = expect_exit(test, 0, tool_path(tool), ["--help"])
    test.assertIn("Examples:", out)
    # Every tool masks credentials and says how (issue 26; the lists come from data/secrets.tsv).
    test.assertIn("--show-secrets", out)
    test.assertIn("Secrets: ", out)
    test.assertIn("..._API_KEY", out)
    for text in in_help:
        test.assertIn(text, out)
    out, _ = expect_exit(test, 0, tool_path(tool), ["--version"])
    test.assertRegex(out, r"^" + re.escape(tool) + r" \(rl-trainer-bench\) \d+\.\d+\.\d+")


def assert_all_checks_pass(test: unittest.TestCase, report: str) -> None:
    """`report` (check-payload's text, or the part of it on stderr) says every check passed: its
    `checks: N passed, 0 failed, 0 skipped` line counts the checks it lists as `ok`, so no count
    is written here that a new check would make wrong."""
    match = re.search(r"^checks: (\d+) passed, 0 failed, 0 skipped$", report, re.M)
    test.assertIsNotNone(match, report)
    listed = re.findall(r"^  [a-z_]+ +ok$", report, re.M)
    test.assertGreater(len(listed), 0, report)
    test.assertEqual(int(match.group(1)) if match else -1, len(listed), report)


# --- a bench JobSet's client script (render-bench's tests, the driver settings contract) -------
def containers(jobset):
    """(job, container) for every container and initContainer."""
    for job in jobset["spec"]["replicatedJobs"]:
        spec = job["template"]["spec"]["template"]["spec"]
        for key in ("initContainers", "containers"):
            for c in spec.get(key) or []:
                yield job["name"], c


def container(jobset, name):
    for _, c in containers(jobset):
        if c["name"] == name:
            return c
    raise AssertionError(f"no container {name}")


def command_of(jobset):
    """The client container's command: bash, -c, the script, then the arguments after it (its $0
    and the packed driver when the driver does not go in the script)."""
    return container(jobset, "main")["command"]


def script_of(jobset):
    return command_of(jobset)[2]


def without_packed_driver(text):
    """A render's YAML text without the packed driver's arguments (long base64 lines, in which any
    short text may occur by chance): what a test searches for values the render must not hold."""
    import yaml  # pylint: disable=import-outside-toplevel  (only render tests need it)
    docs = list(yaml.safe_load_all(text))
    for doc in docs:
        for job in (doc or {}).get("spec", {}).get("replicatedJobs", []) or []:
            spec = job["template"]["spec"]["template"]["spec"]
            for key in ("initContainers", "containers"):
                for c in spec.get(key) or []:
                    if isinstance(c.get("command"), list):
                        del c["command"][3:]
        pod = (doc or {}).get("spec", {}).get("template", {}).get("spec", {})
        for c in pod.get("containers") or []:
            if isinstance(c.get("command"), list):
                del c["command"][3:]
    return yaml.safe_dump_all(docs, width=1 << 20)


def startup_words(script):
    lines = script.split("\n")
    start = next(i for i, line in enumerate(lines) if line.strip() == "(")
    end = next(i for i, line in enumerate(lines) if line.strip().startswith(") & PID=$!"))
    # bash removes backslash-newline line continuations before it splits words.
    return shlex.split("\n".join(lines[start + 1:end]).replace("\\\n", ""))


def startup_env(script):
    env = {}
    for word in startup_words(script):
        m = re.match(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", word, re.S)
        if not m:
            break
        env[m.group(1)] = m.group(2)
    return env


def driver_settings_env(script):
    """The driver's settings in a client script: its startup assignments from BENCH_NAME (the first
    one render-bench writes, k8s::kDriverSettingsStart) on, in order, as bash would pass them."""
    env = startup_env(script)
    names = list(env)
    return {name: env[name] for name in names[names.index("BENCH_NAME"):]}


class TempDirTestCase(unittest.TestCase):
    """A test case whose tests share one temporary directory, `self.tmp.name`, removed after them."""
    tmp: tempfile.TemporaryDirectory[str]

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def write(self, name: str, text: str) -> str:
        """Writes `text` (UTF-8) to `name` in the directory; returns its path."""
        path = os.path.join(self.tmp.name, name)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        return path
