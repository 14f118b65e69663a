#!/usr/bin/env python3
"""Writes synthetic_overlap_tpu.xplane.pb: a SYNTHETIC XSpace capture (our own encoding, never
written by a profiler) of three executions of a real scheduled module,
testdata/hlo/latency_hiding_scheduler__ResourceLimitWithinAnnotationGroup.hlo.txt (XLA's latency
hiding scheduler test; testdata/SOURCES.md), on two devices. Each device plane, /device:TPU:0 and
/device:TPU:1, has an `XLA Ops` line holding one event per instruction of the entry computation
and of the while body (one iteration), in the module's schedule order, named as the instructions
are, and an `XLA Modules` line with one event per execution. Each instruction's event metadata
carries an `hlo_category` stat, the category XProf gives its opcode (convolution, all-gather,
...), except `slice`'s, whose category then comes from its name. The times are chosen so that the
schedule's verdicts and the measured waits disagree on purpose, and the two devices disagree:
  - agd0 (all-gather, scheduled overlapped): on TPU:0 its done waits about 200 us (planned
    hidden, measured exposed); on TPU:1 0.5 us (both say hidden);
  - agd1 (all-gather, scheduled overlapped): its done takes 0.5 us on both: both say hidden;
  - cpd1 (collective-permute, scheduled exposed): on TPU:0 its done takes 0.5 us (planned
    exposed, measured hidden); on TPU:1 150 us (both say exposed).

  testdata/profile/make_synthetic_overlap.py OUT.xplane.pb
"""
import re
import sys
from typing import Dict, List, Tuple

from xspace_cut import length_field, put_varint

HLO = "latency_hiding_scheduler__ResourceLimitWithinAnnotationGroup.hlo.txt"
PS_PER_US = 1_000_000
# Per device: the duration (us) of each instruction's event (instructions not named take 1 us),
# and agd0's wait in each execution (the spread an A/B would see).
DEVICES = [
    ("/device:TPU:0", {"c0": 100.0, "c1": 190.0, "add": 20.0, "agd1": 0.5,
                       "cpd1": 0.5}, [200.0, 210.0, 190.0]),
    ("/device:TPU:1", {"c0": 100.0, "c1": 190.0, "add": 20.0, "agd1": 0.5,
                       "cpd1": 150.0}, [0.5, 0.5, 0.5]),
]
EXECUTIONS = 3
# Instructions that run no device op.
NO_OP = {"parameter", "get-tuple-element", "tuple", "while"}
# The hlo_category stat of each opcode's ops (slice has none: its category comes from its name).
HLO_CATEGORY = {
    "convolution": "convolution",
    "all-gather-start": "all-gather",
    "all-gather-done": "all-gather",
    "collective-permute-start": "collective-permute",
    "collective-permute-done": "collective-permute",
    "add": "non-fusion elementwise",
}
HLO_CATEGORY_STAT_ID = 1


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


def plane(name: str, plane_id: int, durations_us: Dict[str, float], agd0_wait_us: List[float],
          entry: List[Tuple[str, str]], body: List[Tuple[str, str]]) -> bytes:
  ids: Dict[str, int] = {}
  opcodes: Dict[str, str] = {}
  ops: List[bytes] = []
  modules: List[bytes] = []
  time_ps = 0
  module_id = EXECUTIONS + 100
  for execution in range(EXECUTIONS):
    start = time_ps
    for instruction, opcode in entry:
      if opcode == "while":
        schedule = [(n, o) for n, o in body if o not in NO_OP]
      elif opcode in NO_OP:
        continue
      else:
        schedule = [(instruction, opcode)]
      for op, op_opcode in schedule:
        duration = agd0_wait_us[execution] if op == "agd0" else durations_us.get(op, 1.0)
        ids.setdefault(op, len(ids) + 1)
        opcodes[op] = op_opcode
        ops.append(event(ids[op], time_ps, int(duration * PS_PER_US)))
        time_ps += int(duration * PS_PER_US)
    modules.append(event(module_id, start, time_ps - start))
    time_ps += 50 * PS_PER_US  # the host's gap before the next execution
  timestamp_ns = 1_700_000_000_000_000_000
  ops_line = vfield(1, 1) + length_field(2, b"XLA Ops") + vfield(3, timestamp_ns) + b"".join(ops)
  modules_line = (vfield(1, 2) + length_field(2, b"XLA Modules") + vfield(3, timestamp_ns) +
                  b"".join(modules))
  metadata = b""
  names = dict((v, k) for k, v in ids.items())
  names[module_id] = "module(1)"
  for metadata_id, op in sorted(names.items()):
    fields = vfield(1, metadata_id) + length_field(2, op.encode())
    category = HLO_CATEGORY.get(opcodes.get(op, ""))
    if category is not None:
      stat = vfield(1, HLO_CATEGORY_STAT_ID) + length_field(5, category.encode())
      fields += length_field(5, stat)
    entry_bytes = vfield(1, metadata_id) + length_field(2, fields)
    metadata += length_field(4, entry_bytes)
  stat_metadata = vfield(1, HLO_CATEGORY_STAT_ID) + length_field(
      2,
      vfield(1, HLO_CATEGORY_STAT_ID) + length_field(2, b"hlo_category"))
  metadata += length_field(5, stat_metadata)
  return (vfield(1, plane_id) + length_field(2, name.encode()) + length_field(3, ops_line) +
          length_field(3, modules_line) + metadata)


def main() -> None:
  here = sys.path[0]
  with open(f"{here}/../hlo/{HLO}", encoding="utf-8") as f:
    text = f.read()
  entry = instructions(text, "entry")
  body = instructions(text, "while_body")
  space = b""
  for plane_id, (name, durations_us, agd0_wait_us) in enumerate(DEVICES, start=1):
    space += length_field(1, plane(name, plane_id, durations_us, agd0_wait_us, entry, body))
  with open(sys.argv[1], "wb") as f:
    f.write(space)


if __name__ == "__main__":
  main()
