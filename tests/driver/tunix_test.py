"""Tests of calling into Tunix strictly (tunix.py): the runtime's flags split from an argv, the
log-prob gates LOGP_GATES=off turns off, and calls checked against a signature."""

import argparse
import dataclasses
import unittest
from typing import Any, Optional

from driver_loader import load_driver

bd = load_driver()


class RuntimeArgvTest(unittest.TestCase):

  def test_split_runtime_argv(self):
    words = [
        "--process_main=tunix.x.run_trainer_node.main", "--discovery_id", "trainer",
        "--discovery_port=8080", "--discovery_addrs=orch:1", "--mesh_fsdp=32",
        "--maxtext_output_directory", "gs://b/out", "--process_executor=E"
    ]
    main, rest = bd.split_runtime_argv("TRAINER_ARGV", words)
    self.assertEqual(main, "tunix.x.run_trainer_node.main")
    self.assertEqual(rest, ["--mesh_fsdp=32", "--maxtext_output_directory", "gs://b/out"])
    self.assertEqual(bd.process_module(main, "d"), "tunix.x.run_trainer_node")
    self.assertEqual(bd.process_module(None, "d"), "d")
    self.assertEqual(bd.flag_value(rest, "--maxtext_output_directory"), "gs://b/out")
    self.assertEqual(bd.flag_value(["--a=1", "--a=2"], "--a"), "2")
    with self.assertRaises(bd.SettingsError):
      bd.split_runtime_argv("TRAINER_ARGV", ["--process_main=a.main", "--process", "--x"])


class LogpGatesTest(unittest.TestCase):

  def test_disable_logp_gates(self):

    @dataclasses.dataclass
    class GRPOConfig:
      epsilon: float = 0.2
      use_rollout_logps: bool = False
      sampler_is: Optional[str] = "token"
      sampler_is_threshold: float = 2.0
      seq_logprob_error_threshold: Optional[float] = 2.0
      truncated_importance_sampling_type: Optional[str] = None
      truncated_importance_sampling_ratio_min: Optional[float] = None
      truncated_importance_sampling_ratio: Optional[float] = None
      sampler_is_length_buckets: Any = (512, 2048)
      tis_enabled: bool = True

    config = GRPOConfig()
    changed = bd.disable_logp_gates(config)
    self.assertIsNone(config.sampler_is)
    self.assertIsNone(config.seq_logprob_error_threshold)
    self.assertFalse(config.tis_enabled)
    self.assertEqual(config.sampler_is_threshold, 2.0)
    self.assertEqual(config.sampler_is_length_buckets, (512, 2048))
    self.assertEqual(config.epsilon, 0.2)
    self.assertFalse(config.use_rollout_logps)
    self.assertEqual(len(changed), 3)
    self.assertEqual(bd.disable_logp_gates(config), [])  # nothing left to turn off

    args = argparse.Namespace(truncated_importance_sampling_type="seq-mask-tis",
                              truncated_importance_sampling_ratio_min=0.5,
                              truncated_importance_sampling_ratio=2.0,
                              beta=0.0)
    changed = bd.disable_logp_gates(args)
    self.assertEqual(len(changed), 3)
    self.assertIsNone(args.truncated_importance_sampling_type)
    self.assertIsNone(args.truncated_importance_sampling_ratio_min)
    self.assertEqual(args.beta, 0.0)


if __name__ == "__main__":
  unittest.main()
