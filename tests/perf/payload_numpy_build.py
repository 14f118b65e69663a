#!/usr/bin/python3
"""The plain NumPy peer of `check-payload build` without -o, for `make bench`
(tests/perf/payload_bench.cc, PayloadBuildWholeProcessVsNumpy).

Builds the same fields in memory with the bench driver's own NumPy builder (build_payload of the
built driver file, every field of the spec, the 60-layer default table given inline) and writes
nothing: what a user would run to get the payload in a NumPy process. It checks nothing; it is a
speed reference. Prints one line: the fields built and the real tokens.

Usage: payload_numpy_build.py DRIVER ROWS TOKENS LAYERS TOPK EXPERTS TARGETS
(TARGETS: comma-separated max/mean per layer)
"""

from __future__ import annotations

import importlib.util
import sys


def main(argv: list) -> int:
  driver_path, rows, tokens, layers, topk, experts, targets = argv[1:8]
  spec = importlib.util.spec_from_file_location("bench_driver", driver_path)
  assert spec is not None and spec.loader is not None
  driver = importlib.util.module_from_spec(spec)
  sys.modules["bench_driver"] = driver  # dataclasses look their module up there
  spec.loader.exec_module(driver)
  rows_n, tokens_n = int(rows), int(tokens)
  target_list = [float(t) for t in targets.split(",")]
  layout = driver.spec_field_layout(rows_n, tokens_n, int(layers), int(topk))
  built = driver.build_payload(rows=rows_n, tokens=tokens_n, layout=layout,
                               vocab=driver.DEFAULT_VOCAB,
                               real_len=driver.default_real_len(tokens_n), segments=1,
                               real_rows=rows_n, pad_position="end", pad_align=4096,
                               targets=target_list, experts=int(experts), advantages="random",
                               seed=0)
  print(f"{len(built.arrays)} fields, {built.real_tokens} real tokens")
  return 0


if __name__ == "__main__":
  sys.exit(main(sys.argv))
