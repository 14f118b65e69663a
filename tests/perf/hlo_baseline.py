#!/usr/bin/python3
"""Baseline for the hlo-overlap benchmark: a straightforward line-by-line regex parser of a
scheduled HLO dump, doing the same core work as the C++ reader on single-line instructions
(computations, instructions, compute count, start/done pairing through the done's operand,
exposed pairs, synchronous collectives). Prints one JSON object with its counts.

Usage: hlo_baseline.py DUMP
"""

import json
import re
import sys

HEADER = re.compile(r"^(?:ENTRY\s+)?%?([\w.\-]+)\s*(?:\(.*\)\s*->\s*.*)?\{\s*$")
INSTRUCTION = re.compile(r"^\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=\s*(.+?)\s+([a-z][a-z0-9\-_]*)\((.*)$")
OPERAND = re.compile(r"\s*(?:(?:\(.*?\)|[a-z0-9]+\[[^\]]*\](?:\{[^}]*\})?)\s+)?%?([\w.\-]+)")
COMPUTE = {"fusion", "dot", "convolution", "custom-call"}
SYNC = {
    "all-gather", "all-reduce", "reduce-scatter", "all-to-all", "ragged-all-to-all",
    "collective-permute", "collective-broadcast"
}


def main(path):
  counts = {
      "computations": 0, "instructions": 0, "compute": 0, "pairs": 0, "exposed_pairs": 0, "sync": 0,
      "unpaired_starts": 0, "unpaired_dones": 0
  }
  in_computation = False
  open_starts: dict[str, int] = {}  # a start's name -> the compute count when it started
  compute = 0
  with open(path, encoding="utf-8", errors="replace") as f:
    for line in f:
      if not in_computation:
        if not line.startswith("HloModule") and HEADER.match(line):
          in_computation = True
          counts["computations"] += 1
          open_starts = {}
          compute = 0
        continue
      # A computation ends at "}" or "}, execution_thread=..."; real dumps also have
      # continuation lines of multi-line attributes that start with "}}" (kernel_metadata).
      if line.startswith("}") and (line.rstrip() == "}" or line.startswith("}, ")):
        counts["unpaired_starts"] += len(open_starts)
        in_computation = False
        continue
      m = INSTRUCTION.match(line)
      if not m:
        continue
      name, opcode, rest = m.group(1), m.group(3), m.group(4)
      counts["instructions"] += 1
      if opcode in COMPUTE:
        compute += 1
        counts["compute"] += 1
      elif opcode.endswith("-start") or opcode in ("send", "recv"):
        open_starts[name] = compute
      elif opcode.endswith("-done"):
        operand = OPERAND.match(rest)
        start = operand.group(1) if operand else None
        if start in open_starts:
          counts["pairs"] += 1
          if open_starts.pop(start) == compute:
            counts["exposed_pairs"] += 1
        else:
          counts["unpaired_dones"] += 1
      elif opcode in SYNC:
        counts["sync"] += 1
  if in_computation:
    counts["unpaired_starts"] += len(open_starts)
  print(json.dumps(counts))


if __name__ == "__main__":
  if len(sys.argv) != 2:
    sys.exit(__doc__)
  main(sys.argv[1])
