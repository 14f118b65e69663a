#!/usr/bin/env python3
"""Writes synthetic_overlap_tpu.xplane.pb: a SYNTHETIC XSpace capture (our own encoding, never
written by a profiler) of three executions of a real scheduled module,
testdata/hlo/latency_hiding_scheduler__ResourceLimitWithinAnnotationGroup.hlo.txt (XLA's latency
hiding scheduler test; testdata/SOURCES.md). One device plane, /device:TPU:0, with an `XLA Ops`
line holding one event per instruction of the entry computation and of the while body (one
iteration), in the module's schedule order, named as the instructions are, and an `XLA Modules`
line with one event per execution. The times are chosen so that the schedule's verdicts and the
measured waits disagree on purpose:
  - agd0 (all-gather, scheduled overlapped): its done waits about 200 us: planned hidden,
    measured exposed;
  - agd1 (all-gather, scheduled overlapped): its done takes 0.5 us: both say hidden;
  - cpd1 (collective-permute, scheduled exposed): its done takes 0.5 us: planned exposed,
    measured hidden.

  testdata/profile/make_synthetic_overlap.py OUT.xplane.pb
"""
import re
import sys
from typing import Dict, List, Tuple

from xspace_cut import length_field, put_varint

HLO = "latency_hiding_scheduler__ResourceLimitWithinAnnotationGroup.hlo.txt"
PS_PER_US = 1_000_000
# Duration (us) of each instruction's event; instructions not named take 1 us. agd0's wait
# differs per execution (the spread an A/B would see).
DURATIONS_US = {"c0": 100.0, "c1": 190.0, "add": 20.0, "agd1": 0.5, "cpd1": 0.5}
AGD0_WAIT_US = [200.0, 210.0, 190.0]
# Instructions that run no device op.
NO_OP = {"parameter", "get-tuple-element", "tuple", "while"}


def instructions(text: str, computation: str) -> List[Tuple[str, str]]:
  """(name, opcode) of each instruction of `computation`, in the text's (schedule) order."""
  body = re.search(r"^(?:ENTRY )?" + computation + r" \{\n(.*?)^\}", text, re.M | re.S)
  assert body, computation
  found = []
  for line in body.group(1).splitlines():
    match = re.match(r"\s*(?:ROOT )?(\S+) = .*?\) ([a-z-]+)\(|\s*(?:ROOT )?(\S+) = \S+ ([a-z-]+)\(",
                     line)
    if match:
      name = match.group(1) or match.group(3)
      opcode = match.group(2) or match.group(4)
      found.append((name, opcode))
  return found


def vfield(number: int, value: int) -> bytes:
  return put_varint(number << 3) + put_varint(value)


def event(metadata_id: int, offset_ps: int, duration_ps: int) -> bytes:
  return length_field(4, vfield(1, metadata_id) + vfield(2, offset_ps) + vfield(3, duration_ps))


def main() -> None:
  here = sys.path[0]
  with open(f"{here}/../hlo/{HLO}", encoding="utf-8") as f:
    text = f.read()
  entry = instructions(text, "entry")
  body = instructions(text, "while_body")
  ids: Dict[str, int] = {}
  ops: List[bytes] = []
  modules: List[bytes] = []
  time_ps = 0
  for execution, agd0_wait in enumerate(AGD0_WAIT_US):
    start = time_ps
    for name, opcode in entry:
      if opcode == "while":
        schedule = [(n, o) for n, o in body if o not in NO_OP]
      elif opcode in NO_OP:
        continue
      else:
        schedule = [(name, opcode)]
      for op, _ in schedule:
        duration = agd0_wait if op == "agd0" else DURATIONS_US.get(op, 1.0)
        ids.setdefault(op, len(ids) + 1)
        ops.append(event(ids[op], time_ps, int(duration * PS_PER_US)))
        time_ps += int(duration * PS_PER_US)
    modules.append(event(len(AGD0_WAIT_US) + 100, start, time_ps - start))
    time_ps += 50 * PS_PER_US  # the host's gap before the next execution
  timestamp_ns = 1_700_000_000_000_000_000
  ops_line = vfield(1, 1) + length_field(2, b"XLA Ops") + vfield(3, timestamp_ns) + b"".join(ops)
  modules_line = (vfield(1, 2) + length_field(2, b"XLA Modules") + vfield(3, timestamp_ns) +
                  b"".join(modules))
  metadata = b""
  names = dict((v, k) for k, v in ids.items())
  names[len(AGD0_WAIT_US) + 100] = "module(1)"
  for metadata_id, name in sorted(names.items()):
    entry_bytes = vfield(1, metadata_id) + length_field(
        2,
        vfield(1, metadata_id) + length_field(2, name.encode()))
    metadata += length_field(4, entry_bytes)
  plane = (vfield(1, 1) + length_field(2, b"/device:TPU:0") + length_field(3, ops_line) +
           length_field(3, modules_line) + metadata)
  with open(sys.argv[1], "wb") as f:
    f.write(length_field(1, plane))


if __name__ == "__main__":
  main()
