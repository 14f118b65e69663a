"""The Python baseline of the profile benchmark (tests/perf/profile_bench.cc): reads an XSpace
capture with Debian's python3-protobuf through a module protoc generates from
tests/perf/xplane_subset.proto at run time, and computes what profile-report's summary reads:
per device plane, the events, their total duration and the duration by event name.

  python3 profile_baseline.py CAPTURE
"""
import collections
import importlib
import os
import subprocess
import sys
import tempfile


def load_module(work: str):
  here = os.path.dirname(os.path.abspath(__file__))
  subprocess.run(["protoc", f"--proto_path={here}", f"--python_out={work}", "xplane_subset.proto"],
                 check=True)
  sys.path.insert(0, work)
  return importlib.import_module("xplane_subset_pb2")


def main() -> None:
  with tempfile.TemporaryDirectory() as work:
    module = load_module(work)
    space = module.XSpace()
    with open(sys.argv[1], "rb") as f:
      space.ParseFromString(f.read())
  events = 0
  total_ps = 0
  by_name: collections.Counter = collections.Counter()
  for plane in space.planes:
    if not plane.name.startswith("/device:"):
      continue
    names = {key: value.name for key, value in plane.event_metadata.items()}
    for line in plane.lines:
      for event in line.events:
        events += 1
        total_ps += event.duration_ps
        by_name[names.get(event.metadata_id, "")] += event.duration_ps
  print(f"{len(space.planes)} planes, {events} device events, {total_ps} ps, "
        f"{len(by_name)} names")


if __name__ == "__main__":
  main()
