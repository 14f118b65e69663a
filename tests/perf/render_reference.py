#!/usr/bin/env python3
"""The plain Python peer of render-bench, for `make bench` (tests/perf/render_perf.cc).

What a user would write in an afternoon to do render-bench's main job: read the launcher's DRY_RUN
(log lines and YAML documents between `---` lines) with PyYAML's default pure-Python SafeLoader,
take the trainer JobSet, rename it, set maxRestarts to 0, add a libtpu flag and a MaxText flag in
the client's startup line, swap that line for a wrapper that unpacks the bench driver (gzip +
base64, as the driver does not fit in one argument verbatim) and dump the JobSet with yaml.dump.
It is a speed reference, not a second renderer to trust: none of render-bench's checks.

Usage: render_reference.py DRYRUN DRIVER NAME > bench.yaml
"""

from __future__ import annotations

import base64
import gzip
import re
import sys
from typing import Any, Dict, List, Optional

import yaml

TRAINER_MAIN = "run_trainer_node.main"
LIBTPU_FLAG = "--xla_tpu_scoped_vmem_limit_kib=65536"
MAXTEXT_FLAG = "sa_block_q=2048"


def documents(text: str) -> List[Dict[str, Any]]:
  """The YAML mappings with a `kind` among the `---`-separated chunks; log chunks are skipped."""
  found = []
  for chunk in re.split(r"(?m)^---$", text):
    try:
      document = yaml.load(chunk, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
      continue
    if isinstance(document, dict) and "kind" in document:
      found.append(document)
  return found


def trainer_command(jobset: Dict[str, Any]) -> Optional[List[str]]:
  """The command list of the container whose script starts the trainer, or None."""
  for job in jobset.get("spec", {}).get("replicatedJobs", []):
    pod = job["template"]["spec"]["template"]["spec"]
    for container in pod.get("containers", []):
      command = container.get("command")
      if command and TRAINER_MAIN in command[-1]:
        return command
  return None


def bench_script(script: str, driver: str) -> str:
  script = re.sub(r"LIBTPU_INIT_ARGS='([^']*)'", lambda m: f"LIBTPU_INIT_ARGS='{m.group(1)} "
                  f"{LIBTPU_FLAG}'", script)
  script = re.sub(r'MAXTEXT_EXTRA_FLAGS="([^"]*)"',
                  lambda m: f'MAXTEXT_EXTRA_FLAGS="{m.group(1)} {MAXTEXT_FLAG}"', script)
  packed = base64.encodebytes(gzip.compress(driver.encode("utf-8"), compresslevel=9)).decode()
  return ("base64 -d > /tmp/bench_driver.py.gz <<'EOF'\n" + packed + "EOF\n"
          "gzip -dc /tmp/bench_driver.py.gz > /tmp/bench_driver.py\n" + script)


def main(argv: List[str]) -> int:
  if len(argv) != 4:
    print(__doc__.strip().splitlines()[-1], file=sys.stderr)
    return 2
  with open(argv[1], encoding="utf-8") as handle:
    text = handle.read()
  with open(argv[2], encoding="utf-8") as handle:
    driver = handle.read()
  for jobset in documents(text):
    command = trainer_command(jobset) if jobset["kind"] == "JobSet" else None
    if command is None:
      continue
    jobset["metadata"]["name"] = argv[3]
    jobset["spec"].setdefault("failurePolicy", {})["maxRestarts"] = 0
    command[-1] = bench_script(command[-1], driver)
    sys.stdout.write(yaml.dump(jobset, sort_keys=False))
    return 0
  print(f"render_reference.py: {argv[1]}: no trainer JobSet", file=sys.stderr)
  return 2


if __name__ == "__main__":
  sys.exit(main(sys.argv))
