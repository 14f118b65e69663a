"""Tests of the pieces of the e2e trainer's set-up (builders.py), in-process on stand-in Tunix and
transformers modules put into sys.modules: the batch configuration, the batch assembler, the
tokenizer's ids, the GRPO algorithm with LOGP_GATES and the warm-up payload."""

import contextlib
import dataclasses
import io
import os
import sys
import types
import unittest
from typing import Any, Dict, List, Optional
from unittest import mock

import numpy as np

from settings_env import base_env
from driver_loader import load_driver

bd = load_driver()

ORCH_ARGS = dict(max_prompt_length=64, max_response_length=448, max_seq_token_per_tpu=512,
                 max_segments_per_packed_row=4, trainer_fsdp=2, num_generations=2,
                 mini_batch_size=4, train_micro_batch_size=1)


def orch_args(**changes: Any) -> types.SimpleNamespace:
  values: Dict[str, Any] = dict(ORCH_ARGS)
  values.update(changes)
  return types.SimpleNamespace(**values)


def module(name: str, **attributes: Any) -> types.ModuleType:
  """A stand-in module named `name` holding `attributes`."""
  made = types.ModuleType(name)
  for key, value in attributes.items():
    setattr(made, key, value)
  return made


@dataclasses.dataclass
class BatchConfig:
  """Tunix's BatchConfig as the fallback path builds it (an older Tunix: no pad knobs)."""
  pad_id: int
  max_prompt_length: Optional[int]
  max_response_length: Optional[int]
  max_seq_token_per_tpu: Optional[int]
  max_segments_per_packed_row: Optional[int]
  trainer_fsdp: Optional[int]
  trainer_dp: Optional[int] = None
  trainer_expert: Optional[int] = None


class SequencePackedBatchAssembler:

  def __init__(self, **kwargs: Any) -> None:
    self.kwargs = kwargs


class PaddedBatchAssembler:

  def __init__(self, **kwargs: Any) -> None:
    self.kwargs = kwargs


class BatchConfigTest(unittest.TestCase):
  """make_batch_config: the orchestrator's _batch_config when its signature is one the driver
  recognises, else BatchConfig from the parsed argv."""

  def test_recognised_batch_config_signatures(self):
    calls: List[Any] = []

    def args_only(args):
      calls.append(("args", args))
      return "config-1"

    def args_and_pad(args, pad_id):
      calls.append(("positional", args, pad_id))
      return "config-2"

    def positional_only(args, pad_id, /):
      calls.append(("positional only", args, pad_id))
      return "config-4"

    def args_and_keyword_pad(args, *, pad_id):
      calls.append(("keyword", args, pad_id))
      return "config-3"

    args = orch_args()
    for function, expected, call in [(args_only, "config-1", ("args", args)),
                                     (args_and_pad, "config-2", ("positional", args, 7)),
                                     (args_and_keyword_pad, "config-3", ("keyword", args, 7)),
                                     (positional_only, "config-4", ("positional only", args, 7))]:
      with self.subTest(function=function.__name__):
        calls.clear()
        node = types.SimpleNamespace(_batch_config=function)
        self.assertEqual(bd.make_batch_config(node, None, args, 7), expected)
        self.assertEqual(calls, [call])

  def test_an_unknown_signature_is_refused(self):

    def three(args, pad_id, vocab):
      raise AssertionError("never called")

    def keyword_args(*, args):
      raise AssertionError("never called")

    def with_kwargs(args, **kwargs):
      raise AssertionError("never called")

    def other_name(args, pad):
      raise AssertionError("never called")

    for function, signature in [(three, "(args, pad_id, vocab)"), (keyword_args, "(*, args)"),
                                (with_kwargs, "(args, **kwargs)"), (other_name, "(args, pad)")]:
      with self.subTest(signature=signature):
        with self.assertRaises(bd.TunixMissing) as caught:
          bd.make_batch_config(types.SimpleNamespace(_batch_config=function), None, orch_args(), 7)
        message = str(caught.exception)
        self.assertTrue(message.startswith(f"_batch_config{signature} in "), message)
        self.assertIn("builders_test.py", message)  # the file it comes from
        self.assertIn(
            "not a signature the driver recognises ((args), (args, pad_id) or "
            "(args, *, pad_id))", message)

  def test_without_batch_config_the_argv_builds_BatchConfig(self):
    assembly = module("fake_batch_assembly", BatchConfig=BatchConfig)
    args = orch_args(trainer_expert=2, pack_pad_align=512)  # the second: not in this BatchConfig
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
      config = bd.make_batch_config(object(), assembly, args, 3)
    self.assertEqual(
        config,
        BatchConfig(pad_id=3, max_prompt_length=64, max_response_length=448,
                    max_seq_token_per_tpu=512, max_segments_per_packed_row=4, trainer_fsdp=2,
                    trainer_expert=2))
    self.assertEqual(
        out.getvalue(),
        "[TrainerBench] BatchConfig: this Tunix takes no 'pack_pad_align' (optional); left out\n")
    with self.assertRaisesRegex(
        bd.TunixMissing, r"^fake_batch_assembly\.BatchConfig is missing in this image's "
        r"Tunix \(needed to build the batch configuration\)$"):
      bd.make_batch_config(object(), module("fake_batch_assembly"), args, 3)


class AssemblerTest(unittest.TestCase):
  """build_assembler: create_batch_assembler, which must pack sequences."""

  def assembly(self, **attributes: Any) -> types.ModuleType:
    return module("fake_batch_assembly", SequencePackedBatchAssembler=SequencePackedBatchAssembler,
                  **attributes)

  def test_a_packing_assembler_from_the_algorithms_sizes(self):

    def create_batch_assembler(*, group_size, mini_batch_size, train_micro_batch_size,
                               batch_config):
      return SequencePackedBatchAssembler(group_size=group_size, mini_batch_size=mini_batch_size,
                                          train_micro_batch_size=train_micro_batch_size,
                                          batch_config=batch_config)

    algo = types.SimpleNamespace(num_generations=8, mini_batch_size=16)
    assembler = bd.build_assembler(self.assembly(create_batch_assembler=create_batch_assembler),
                                   algo, orch_args(), "CONFIG", log=[].append)
    self.assertIsInstance(assembler, SequencePackedBatchAssembler)
    # The algorithm's sizes win over the argv's; what it lacks comes from the argv.
    self.assertEqual(
        assembler.kwargs,
        dict(group_size=8, mini_batch_size=16, train_micro_batch_size=1, batch_config="CONFIG"))

  def test_an_older_create_takes_num_generations(self):

    def create_batch_assembler(*, num_generations, mini_batch_size, train_micro_batch_size,
                               batch_config):
      return SequencePackedBatchAssembler(num_generations=num_generations)

    assembler = bd.build_assembler(self.assembly(create_batch_assembler=create_batch_assembler),
                                   object(), orch_args(), "CONFIG")
    self.assertEqual(assembler.kwargs, {"num_generations": 2})

  def test_an_assembler_that_does_not_pack_is_refused(self):

    def create_batch_assembler(*, num_generations, mini_batch_size, train_micro_batch_size,
                               batch_config):
      return PaddedBatchAssembler()

    with self.assertRaises(bd.SettingsError) as caught:
      bd.build_assembler(self.assembly(create_batch_assembler=create_batch_assembler), object(),
                         orch_args(), "CONFIG")
    self.assertEqual(
        str(caught.exception),
        "ORCH_ARGV does not select sequence packing (--max_seq_token_per_tpu): the assembler is "
        "PaddedBatchAssembler, whose shapes depend on the data")
    with self.assertRaisesRegex(bd.TunixMissing, "create_batch_assembler is missing"):
      bd.build_assembler(self.assembly(), object(), orch_args(), "CONFIG")


class Tokenizer:
  """What AutoTokenizer.from_pretrained gives: setting pad_token sets pad_token_id."""

  def __init__(self, pad_token_id: Optional[int], eos_token_id: Optional[int]) -> None:
    self.pad_token_id, self.eos_token_id = pad_token_id, eos_token_id
    self.eos_token = None if eos_token_id is None else "</s>"

  @property
  def pad_token(self) -> Optional[str]:
    return None if self.pad_token_id is None else "<pad>"

  @pad_token.setter
  def pad_token(self, token: str) -> None:
    assert token == self.eos_token
    self.pad_token_id = self.eos_token_id

  def __len__(self) -> int:
    return 1000


def transformers_module(tokenizer: Optional[Tokenizer], paths: List[Any]) -> types.ModuleType:
  """A stand-in transformers whose AutoTokenizer gives `tokenizer`, or raises without one."""

  class AutoTokenizer:

    @staticmethod
    def from_pretrained(path: Any, trust_remote_code: bool = False) -> Tokenizer:
      paths.append((path, trust_remote_code))
      if tokenizer is None:
        raise OSError(f"no such model:\n{path}")
      return tokenizer

  return module("transformers", AutoTokenizer=AutoTokenizer)


class TokenIdsTest(unittest.TestCase):
  """token_ids: the tokenizer's pad and eos ids as run_deepswe_dist gets them."""

  def setUp(self):
    self.paths: List[Any] = []
    self.pad_calls: List[Any] = []
    self.log: List[str] = []
    self.trainer_args = types.SimpleNamespace(model_id="trainer-model", tokenizer_path="/tok",
                                              model_dir="/weights")
    environment = mock.patch.dict(os.environ)
    environment.start()
    self.addCleanup(environment.stop)
    os.environ.pop("MODEL_DIR", None)

  def token_ids(self, tokenizer: Optional[Tokenizer], allowed: bool, args: Any = None,
                maxtext_utils: Any = "fake") -> Any:
    if maxtext_utils == "fake":

      def get_tokenizer_pad_id(model_id, tokenizer_path, model_dir):
        self.pad_calls.append((model_id, tokenizer_path, model_dir))
        return 9

      maxtext_utils = module("tunix.utils.maxtext_utils", get_tokenizer_pad_id=get_tokenizer_pad_id)
    modules = {
        "transformers": transformers_module(tokenizer, self.paths),
        "tunix.utils.maxtext_utils": maxtext_utils,
    }
    with mock.patch.dict(sys.modules, modules):
      return bd.token_ids(args or orch_args(tokenizer_path="/orch-tok", model_id="m"),
                          self.trainer_args, bd.Fallbacks(allowed, log=self.log.append))

  def test_the_tokenizers_ids(self):
    self.assertEqual(self.token_ids(Tokenizer(3, 4), allowed=False), (3, 4, 1000))
    self.assertEqual(self.paths, [("/orch-tok", True)])
    # No pad token: its eos is the pad; no eos: the pad is the eos.
    self.assertEqual(self.token_ids(Tokenizer(None, 4), allowed=False), (4, 4, 1000))
    self.assertEqual(self.token_ids(Tokenizer(5, None), allowed=False), (5, 5, 1000))
    self.assertEqual(self.token_ids(Tokenizer(None, None), allowed=False), (0, 0, 1000))
    self.assertEqual(self.pad_calls, [])

  def test_the_tokenizer_path_falls_back_to_model_dir_then_model_id(self):
    os.environ["MODEL_DIR"] = "/model-dir"
    self.token_ids(Tokenizer(3, 4), False, orch_args(tokenizer_path="", model_id="m"))
    del os.environ["MODEL_DIR"]
    self.token_ids(Tokenizer(3, 4), False, orch_args(tokenizer_path="", model_id="m"))
    self.assertEqual([path for path, _ in self.paths], ["/model-dir", "m"])

  def test_a_tokenizer_that_does_not_load_stops_the_run_unless_allowed(self):
    with self.assertRaises(bd.TunixMissing) as caught:
      self.token_ids(None, allowed=False)
    self.assertEqual(
        str(caught.exception), "the tokenizer '/orch-tok' did not load (no such model: /orch-tok); "
        "ALLOW_FALLBACKS=1 would take the pad id from tunix.utils.maxtext_utils."
        "get_tokenizer_pad_id and use it as the eos id too")
    self.assertEqual(self.pad_calls, [])
    self.assertEqual(self.log, [])

  def test_allowed_the_pad_id_comes_from_maxtext_utils(self):
    self.assertEqual(self.token_ids(None, allowed=True), (9, 9, None))
    self.assertEqual(self.pad_calls, [("trainer-model", "/tok", "/weights")])
    self.assertEqual(len(self.log), 1)
    self.assertTrue(self.log[0].startswith("FALLBACK (ALLOW_FALLBACKS=1): the tokenizer"),
                    self.log[0])
    with self.assertRaisesRegex(
        bd.TunixMissing, r"^cannot import tunix\.utils\.maxtext_utils \(needed to find "
        r"the tokenizer's pad id\)"):
      self.token_ids(None, allowed=True, maxtext_utils=None)


@dataclasses.dataclass
class GRPOConfig:
  epsilon: float = 0.2
  seq_logprob_error_threshold: Optional[float] = 2.0
  sampler_is_threshold: float = 2.0


class GatedConfig(GRPOConfig):
  """A config whose gate is derived: nothing can turn it off."""

  @property
  def tis_mode(self) -> str:
    return "token"


class AlgoTest(unittest.TestCase):
  """build_algo: the GRPO algorithm with LOGP_GATES applied to the argv and the built config."""

  def build(self, gates: str, config: Any) -> Any:
    node = types.SimpleNamespace(
        _build_algo=lambda args: types.SimpleNamespace(algo_config=config, args=args))
    args = types.SimpleNamespace(seq_logprob_error_threshold=2.0,
                                 truncated_importance_sampling_type=None)
    settings = bd.parse_settings(base_env(LOGP_GATES=gates))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
      result = bd.build_algo(settings, node, args)
    return result, args, out.getvalue()

  def test_gates_on_leave_everything(self):
    config = GRPOConfig()
    (algo, algo_config, changed), args, out = self.build("on", config)
    self.assertIs(algo_config, config)
    self.assertEqual(changed, [])
    self.assertEqual(config.seq_logprob_error_threshold, 2.0)
    self.assertEqual(args.seq_logprob_error_threshold, 2.0)
    self.assertIs(algo.args, args)
    self.assertEqual(out, "")

  def test_gates_off_turns_them_off_in_the_argv_and_the_config(self):
    config = GRPOConfig()
    (_, _, changed), args, out = self.build("off", config)
    self.assertIsNone(config.seq_logprob_error_threshold)
    self.assertIsNone(args.seq_logprob_error_threshold)
    self.assertEqual(config.sampler_is_threshold, 2.0)  # a weight's threshold, not a gate
    self.assertEqual(changed, ["seq_logprob_error_threshold=2.0"])  # once, though set twice
    self.assertEqual(
        out, "[TrainerBench] LOGP_GATES=off: seq_logprob_error_threshold=2.0 "
        "turned off\n")

  def test_a_gate_that_stays_on_is_an_error(self):
    with self.assertRaises(bd.TunixMissing) as caught:
      self.build("off", GatedConfig())
    message = str(caught.exception)
    self.assertTrue(
        message.startswith("LOGP_GATES=off cannot turn off tis_mode='token' in the built GRPO "
                           "config (GatedConfig in "), message)
    self.assertIn("builders_test.py", message)


class WarmupTest(unittest.TestCase):
  """build_warmup: Tunix's warm-up payload, or the equivalent layout as a fallback."""

  WARMUP = "tunix.experimental.orchestrator.compile_warmup"
  DATATYPES = "tunix.experimental.common.datatypes"

  def test_without_compile_warmup_the_fallback_stops_the_run_unless_allowed(self):
    with mock.patch.dict(sys.modules, {self.WARMUP: None}):
      with self.assertRaises(bd.TunixMissing) as caught:
        bd.build_warmup(None, None, None, None, bd.Choice(False, ""), bd.Fallbacks(False))
    self.assertEqual(
        str(caught.exception), f"{self.WARMUP}.build_trainer_warmup_payload is missing in this "
        "image's Tunix; ALLOW_FALLBACKS=1 would build the equivalent payload layout from the "
        "assembler")

  def test_the_equivalent_layout(self):

    @dataclasses.dataclass
    class RLTrainerPayload:
      completion_ids: Any
      completion_mask: Any
      segment_ids: Any
      segment_positions: Any
      advantages: Any
      prompt_ids: Any
      prompt_mask: Any
      num_segments: int
      old_per_token_logps: Any = None
      routed_experts: Any = None
      metadata: Any = None

    assembler = types.SimpleNamespace(batch_size=2, max_packed_len=128,
                                      max_segments_per_packed_row=4)
    taken: List[str] = []
    modules = {
        self.WARMUP: None, self.DATATYPES: module(self.DATATYPES, RLTrainerPayload=RLTrainerPayload)
    }
    with mock.patch.dict(sys.modules, modules):
      warmup, abstract = bd.build_warmup(assembler, None, None, (3, 2), bd.Choice(True, ""),
                                         bd.Fallbacks(True, log=taken.append))
    self.assertFalse(abstract)
    self.assertEqual(len(taken), 1)
    self.assertEqual(warmup.completion_ids.shape, (2, 128))
    self.assertEqual(warmup.completion_ids.dtype, np.int32)
    self.assertEqual(warmup.routed_experts.shape, (2, 128, 3, 2))
    self.assertEqual(warmup.routed_experts.dtype, np.int16)
    self.assertEqual(warmup.old_per_token_logps.shape, (2, 128))
    self.assertEqual(warmup.prompt_ids.shape, (2, 0))
    self.assertEqual(warmup.num_segments, 5)
    self.assertEqual(warmup.metadata, {})
    self.assertFalse(warmup.segment_ids.any())

  def test_no_warmup_payload_is_a_settings_error(self):
    calls: List[Dict[str, Any]] = []

    def build_trainer_warmup_payload(*, algo, assembler, routed_experts_shape,
                                     rollout_logprobs=False):
      calls.append(
          dict(algo=algo, assembler=assembler, shape=routed_experts_shape,
               rollout=rollout_logprobs))
      return None

    fake = module(self.WARMUP, build_trainer_warmup_payload=build_trainer_warmup_payload)
    out = io.StringIO()
    with mock.patch.dict(sys.modules, {self.WARMUP: fake}), contextlib.redirect_stdout(out):
      with self.assertRaisesRegex(bd.SettingsError, "Tunix built no warm-up payload"):
        bd.build_warmup("ASSEMBLER", "ALGO", None, None, bd.Choice(True, ""), bd.Fallbacks(False))
    # The routing shape is passed even when None (no routing), the optional ones when named.
    self.assertEqual(calls, [dict(algo="ALGO", assembler="ASSEMBLER", shape=None, rollout=True)])
    self.assertIn("takes no 'sampler_is' (optional); left out", out.getvalue())


if __name__ == "__main__":
  unittest.main()
