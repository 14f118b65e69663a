"""The environment the driver reads its settings from, as the in-process tests write it, and a
helper that returns the words a SettingsError refuses a value with.

Test code shared by the driver's tests (settings, values, resolve, pod, main); it never ships.
"""

import unittest
from typing import Any, Callable, Dict

from driver_loader import load_driver

bd = load_driver()

TRAINER_ARGV = ("--process_main=tunix.experimental.examples.common.run_trainer_node.main "
                "--discovery_id=trainer --worker_id=bench-trainer --mesh_fsdp=32 --mesh_expert=2 "
                "--maxtext_output_directory=gs://bucket/bench "
                "--optimizer_chain_kwargs=\"{'max_norm': 0.0625}\"")
ORCH_ARGV = ("--process_main=tunix.experimental.examples.deepswe_dist.run_deepswe_dist.main "
             "--batch_size=16 --max_seq_token_per_tpu=65536 --trainer_fsdp=32 --trainer_expert=2")


def base_env(**extra: str) -> Dict[str, str]:
  """TRAINER_ARGV and ORCH_ARGV of a seed-like run, with `extra` settings on top."""
  env = {"TRAINER_ARGV": TRAINER_ARGV, "ORCH_ARGV": ORCH_ARGV}
  env.update(extra)
  return env


def settings_error(test: unittest.TestCase, call: Callable[..., Any], *args: Any) -> str:
  """The message of the SettingsError that call(*args) raises; a failure of `test` if none."""
  with test.assertRaises(bd.SettingsError) as caught:
    call(*args)
  return str(caught.exception)
