"""Tests of calling into Tunix strictly (tunix.py): the runtime's flags split from an argv, the
log-prob gates LOGP_GATES=off turns off, and calls checked against a signature."""

import argparse
import dataclasses
import sys
import types
import unittest
from typing import Any, List, Optional
from unittest import mock

import numpy as np

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

  def test_process_module(self):
    self.assertEqual(bd.process_module("a.b.main", "d"), "a.b")
    self.assertEqual(bd.process_module("module", "d"), "module")
    self.assertEqual(bd.process_module("", "d"), "d")
    main, rest = bd.split_runtime_argv("ORCH_ARGV", ["--batch_size=4"])
    self.assertIsNone(main)
    self.assertEqual(rest, ["--batch_size=4"])


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
                              truncated_importance_sampling_ratio=2.0, beta=0.0)
    changed = bd.disable_logp_gates(args)
    self.assertEqual(len(changed), 3)
    self.assertIsNone(args.truncated_importance_sampling_type)
    self.assertIsNone(args.truncated_importance_sampling_ratio_min)
    self.assertEqual(args.beta, 0.0)

  def test_gates_left_on(self):

    class Config:
      seq_logprob_error_threshold = None
      sampler_is = False
      sampler_is_threshold = 2.0  # kept: a weight's threshold, not a gate
      _seq_logprob_error_threshold = 2.0  # private: not a setting

      @property
      def tis_mode(self):
        return "token"

      def truncated_importance_sampling_ratio(self):  # a method is no setting
        return 2.0

    self.assertEqual(bd.logp_gates_left_on(Config()), ["tis_mode='token'"])
    self.assertEqual(bd.logp_gates_left_on(None), [])
    self.assertEqual(bd.disable_logp_gates(object()), [])  # no fields to look at


def takes(request_id, payload, metadata=None, *, extra=None):
  """A Tunix function with two required arguments and two optional ones (untyped: the errors
  quote its signature)."""
  return {"request_id": request_id, "payload": payload, "metadata": metadata, "extra": extra}


class CheckedCallTest(unittest.TestCase):
  """plan_call / call_checked: a Tunix function called strictly against its signature."""

  def test_required_and_optional_arguments(self):
    lines: List[str] = []
    kwargs = bd.plan_call(takes, "takes", {"request_id": "r", "payload": 1},
                          {"metadata": {}, "temperature": 1.0}, lines.append)
    self.assertEqual(kwargs, {"request_id": "r", "payload": 1, "metadata": {}})
    self.assertEqual(lines, ["takes: this Tunix takes no 'temperature' (optional); left out"])
    self.assertEqual(bd.call_checked(takes, "takes", {"request_id": "r", "payload": 2}),
                     {"request_id": "r", "payload": 2, "metadata": None, "extra": None})

  def test_a_required_argument_the_function_does_not_take(self):
    with self.assertRaises(bd.TunixMissing) as caught:
      bd.plan_call(takes, "takes", {"request_id": "r", "payload": 1, "model_role": "actor"})
    message = str(caught.exception)
    self.assertTrue(message.startswith("takes ("), message)
    self.assertIn(
        "tunix_test.py) takes no argument 'model_role', which the driver must pass "
        "(its signature: takes(request_id, payload, metadata=None, *, extra=None))", message)
    # Through **kwargs every argument is taken.
    self.assertEqual(bd.plan_call(lambda **kwargs: None, "anything", {"x": 1}), {"x": 1})

  def test_a_required_parameter_the_driver_does_not_know(self):
    with self.assertRaisesRegex(
        bd.TunixMissing, r"takes \(.*\) requires 'payload', which the driver does not know "
        r"\(its signature: takes\(request_id, payload, metadata=None, \*, extra=None\)\)"):
      bd.plan_call(takes, "takes", {"request_id": "r"})

  def test_a_function_without_a_signature(self):
    with self.assertRaisesRegex(bd.TunixMissing, "has no signature the driver can check"):
      bd.plan_call(42, "number", {})


class ParseWithTest(unittest.TestCase):

  def parse(self, words: List[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="trainer")
    parser.add_argument("--mesh_fsdp", type=int, default=1)
    return parser.parse_args(words)

  def test_a_rejection_is_one_line(self):
    self.assertEqual(bd.parse_with(self.parse, ["--mesh_fsdp=4"], "TRAINER_ARGV").mesh_fsdp, 4)
    with self.assertRaises(bd.SettingsError) as caught:
      bd.parse_with(self.parse, ["--mesh_fsdp=4", "--unknown=1"], "TRAINER_ARGV")
    self.assertEqual(
        str(caught.exception), "TRAINER_ARGV is rejected by Tunix's argument parser: trainer: "
        "error: unrecognized arguments: --unknown=1")

  def test_an_exit_without_words(self):

    def parse(words):
      raise SystemExit(3)

    with self.assertRaisesRegex(
        bd.SettingsError, r"^ORCH_ARGV is rejected by Tunix's argument "
        r"parser: exit status 3$"):
      bd.parse_with(parse, [], "ORCH_ARGV")


class ImportTest(unittest.TestCase):

  def test_import_tunix_and_require_name_what_is_missing(self):
    with mock.patch.dict(sys.modules, {"tunix.fake.module": None}):
      with self.assertRaises(bd.TunixMissing) as caught:
        bd.import_tunix("tunix.fake.module", "build the worker")
    self.assertTrue(
        str(caught.exception).startswith(
            "cannot import tunix.fake.module (needed to build the worker): "), caught.exception)
    fake = types.ModuleType("tunix.fake.worker")
    setattr(fake, "TrainerWorker", object)
    self.assertIs(bd.require(fake, "TrainerWorker", "time"), object)
    with self.assertRaises(bd.TunixMissing) as caught:
      bd.require(fake, "update", "time the trainer")
    self.assertEqual(
        str(caught.exception), "tunix.fake.worker.update is missing in this image's "
        "Tunix (needed to time the trainer)")

  def test_source_file(self):
    self.assertTrue(bd.source_file(takes).endswith("tunix_test.py"))
    self.assertEqual(bd.source_file(42), "<unknown file>")


class FallbacksTest(unittest.TestCase):

  def test_a_fallback_stops_the_run_unless_allowed(self):
    lines: List[str] = []
    with self.assertRaises(bd.TunixMissing) as caught:
      bd.Fallbacks(False, log=lines.append).take("no compile_warmup", "build the layout")
    self.assertEqual(str(caught.exception), "no compile_warmup; ALLOW_FALLBACKS=1 would build the "
                     "layout")
    allowed = bd.Fallbacks(True, log=lines.append)
    allowed.take("no compile_warmup", "build the layout")
    self.assertEqual(allowed.taken, ["no compile_warmup: build the layout"])
    self.assertEqual(lines, ["FALLBACK (ALLOW_FALLBACKS=1): no compile_warmup: build the layout"])


class PayloadFieldsTest(unittest.TestCase):

  def test_field_layout_and_replace_fields(self):

    @dataclasses.dataclass
    class Payload:
      ids: Any
      mask: Any = None
      num_segments: int = 1

    payload = Payload(np.zeros((2, 8), np.int32),
                      types.SimpleNamespace(shape=(2, 8), dtype="float32"))
    self.assertEqual(bd.field_layout(payload),
                     {"ids": ((2, 8), np.dtype(np.int32)), "mask": ((2, 8), np.dtype(np.float32))})
    self.assertEqual(
        bd.field_layout(
            types.SimpleNamespace(ids=np.zeros(3, np.int16), n=2,
                                  shaped=types.SimpleNamespace(shape=(1,)))),
        {"ids": ((3,), np.dtype(np.int16))})
    self.assertEqual(bd.replace_fields(payload, num_segments=5).num_segments, 5)

    class WithReplace:

      def replace(self, **changes):
        return ("replaced", changes)

    self.assertEqual(bd.replace_fields(WithReplace(), ids=1), ("replaced", {"ids": 1}))


if __name__ == "__main__":
  unittest.main()
