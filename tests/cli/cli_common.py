"""What every CLI test shares: where the built tools and the fixtures are, and how to run a tool.

ctest sets RTB_BIN_DIR (the built tools), RTB_TESTDATA_DIR (testdata/) and RTB_PYTHON (the
interpreter that has numpy and yaml); see CMakeLists.txt.
"""

import os
import subprocess
import sys

BIN = os.environ.get("RTB_BIN_DIR", "")
TESTDATA = os.environ.get("RTB_TESTDATA_DIR", "")
PYTHON = os.environ.get("RTB_PYTHON", sys.executable)


def tool_path(name):
    return os.path.join(BIN, name)


def testdata(*parts):
    return os.path.join(TESTDATA, *parts)


def run_tool(command, args=(), stdin=None, env=None, unset=(), cwd=None, timeout=120):
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
