"""The entry point: which mode the arguments ask for, and the exit code of each outcome."""

from __future__ import annotations

import os
import signal
import sys
import traceback
from typing import Any, Mapping, Optional, Sequence

from .common import describe_exception, error_line, one_line, SettingsError, TunixMissing
from .masking import scrub
from .dump import dump_main
from .numerics import run_numerics
from .pod import run_pod
from .preflight import run_preflight
from .settings import parse_settings, print_settings
from .usage import help_text


def _terminate(signum: int, _frame: Any) -> None:
  raise SystemExit(128 + signum)  # unwinds, so an open trace is stopped


def main(argv: Optional[Sequence[str]] = None, env: Optional[Mapping[str, str]] = None) -> int:
  """Runs the mode `argv` asks for (default: the process's) with settings from `env` (default:
  the process's environment); the exit code: 0 success, 2 bad settings, 1 a failure."""
  argv = list(sys.argv[1:] if argv is None else argv)
  try:
    if any(word == "--dump-payload" or word.startswith("--dump-payload=") for word in argv):
      try:
        return dump_main(argv)
      except BrokenPipeError:
        # The reader went away (`| head`): the file is written; end quietly, no traceback.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    if argv in (["-h"], ["--help"]):
      print(help_text())
      return 0
    if argv == ["--print-settings"]:
      print(scrub(print_settings(os.environ if env is None else env)))
      return 0
    numerics = sorted(argv) == ["--numerics", "--preflight"]
    preflight = argv == ["--preflight"] or numerics
    if argv and not preflight:
      raise SettingsError(f"unexpected arguments {' '.join(argv)} (settings come from the "
                          "environment; see --help)")
    settings = parse_settings(os.environ if env is None else env)
  except SettingsError as exc:
    error_line(one_line(exc))
    return 2
  try:
    signal.signal(signal.SIGTERM, _terminate)
  except (ValueError, OSError):
    pass
  try:
    if numerics:
      return run_numerics(settings)
    return run_preflight(settings) if preflight else run_pod(settings)
  except SettingsError as exc:
    error_line(one_line(exc))
    return 2
  except TunixMissing as exc:
    error_line(one_line(exc))
    return 1
  except Exception as exc:  # pylint: disable=broad-except  # last resort: one line, exit 1
    print(scrub(traceback.format_exc()), end="", file=sys.stderr)
    error_line(f"failed: {describe_exception(exc)}")
    return 1
