"""Stand-ins for Tunix, JAX and transformers, and the base of the tests that run the one-file
driver on them as the pod runs it (pod_test.py, preflight_test.py).

The stand-ins are small modules written to a temporary directory and put first on PYTHONPATH, so
`python3 bench_driver.py` runs exactly as in the pod: it parses the argv with the (fake) Tunix
parsers, builds the worker, algorithm, assembler and warm-up payload, compiles, times the steps
and prints its lines. The fake worker checks every payload it receives and logs every call.
A test may change the tree for itself (FakeTunixTestCase.variant) to take a module away or
replace one. Test code: it never ships.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import types
import unittest
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from driver_loader import driver_path

PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable

FAKES = {
    "maxtext/__init__.py": """
        # Stands in for the MaxText package (the preflight imports it).
        """,
    "tunix/utils/maxtext_utils.py": """
        def get_tokenizer_pad_id(model_id, tokenizer_path, model_dir):
          return 9
        def maxtext_modules():
          from maxtext.configs import pyconfig
          return pyconfig, None, None
        """,
    # MaxText's config, as tunix.utils.maxtext_utils.maxtext_modules() finds it: the model's shape
    # agrees with the fake trainer's Config (FAKE_LAYERS changes the layers it reads).
    "maxtext/configs/base.yml": """
        # Stands in for MaxText's base config (read_model_shape checks that it exists).
        """,
    "maxtext/configs/pyconfig.py": """
        import os, types
        from tunix import fake_log
        def initialize(argv):
          fake_log.record("pyconfig", argv=argv[2:])
          if "model_name=unknown" in argv:
            raise ValueError("no such model: unknown")
          layers = int(os.environ.get("FAKE_LAYERS", "3"))
          return types.SimpleNamespace(num_decoder_layers=layers, num_experts=16,
                                       num_experts_per_tok=2, vocab_size=500)
        """,
    "tunix/experimental/distributed/runtime/contexts/k8s_context.py": """
        import os
        from tunix import fake_log
        class K8sJaxContext:
          def initialize(self):
            # What XLA reads when JAX starts (DUMP_HLO sets it before).
            fake_log.record("jax_initialize", xla_flags=os.environ.get("XLA_FLAGS"))
        """,
    "tunix/fake_log.py": """
        import json, os
        def record(event, **fields):
          with open(os.environ["FAKE_TUNIX_LOG"], "a") as handle:
            handle.write(json.dumps(dict(event=event, **fields)) + "\\n")
        """,
    "tunix/experimental/common/datatypes.py": """
        import dataclasses
        from typing import Any
        @dataclasses.dataclass
        class TrainRequest:
          request_id: str
          payload: Any
          metadata: dict
        class Response:
          def __init__(self, **metadata):
            self.metadata = metadata
            self.request_id = None
        @dataclasses.dataclass
        class LogprobsRequest:
          prompt_tokens: Any
          completion_tokens: Any
          pad_id: int
          eos_id: int
          temperature: float = 1.0
          model_role: str = "actor"
          segment_ids: Any = None
          segment_positions: Any = None
        @dataclasses.dataclass
        class RLTrainerPayload:
          prompt_ids: Any = None
          prompt_mask: Any = None
          completion_ids: Any = None
          completion_mask: Any = None
          advantages: Any = None
          segment_ids: Any = None
          segment_positions: Any = None
          old_per_token_logps: Any = None
          ref_per_token_logps: Any = None
          sampler_is_weights: Any = None
          routed_experts: Any = None
          num_segments: int = 1
          metadata: dict = dataclasses.field(default_factory=dict)
          def replace(self, **changes):
            return dataclasses.replace(self, **changes)
        """,
    "tunix/experimental/examples/common/run_trainer_node.py": """
        import argparse, os
        from tunix.experimental.worker import trainer_worker
        def _parse_args(argv):
          parser = argparse.ArgumentParser()
          parser.add_argument("--worker_id", default="trainer-0")
          parser.add_argument("--mesh_fsdp", type=int, default=1)
          parser.add_argument("--maxtext_output_directory", default="")
          parser.add_argument("--profiler_steps", type=int, default=0)
          parser.add_argument("--skip_first_n_profiler_steps", type=int, default=1)
          parser.add_argument("--compute_logps_chunk_size", type=int, default=0)
          parser.add_argument("--optimizer_chain_kwargs", default="")
          parser.add_argument("--maxtext_model_name", default="qwen3-0.6b")
          parser.add_argument("--maxtext_ckpt_path", default=os.getenv("MAXTEXT_CKPT", ""))
          return parser.parse_args(argv)
        def _create_trainer_factory(args):
          return (lambda: trainer_worker.FakeTrainer(args)), "MESH"
        def main(argv, context=None):
          args = _parse_args(argv)
          factory, mesh = _create_trainer_factory(args)
          return trainer_worker.TrainerWorker(trainer_factory=factory, worker_id=args.worker_id,
                                              execution_context=mesh)
        """,
    "tunix/experimental/worker/trainer_worker.py": """
        import os
        import numpy as np
        from tunix import fake_log
        from tunix.experimental.common import datatypes
        LAYERS, TOPK, EXPERTS, VOCAB = 3, 2, 16, 500
        class Config:
          num_decoder_layers, num_experts_per_tok, num_experts, vocab_size = (
              LAYERS, TOPK, EXPERTS, VOCAB)
          capacity_factor, ragged_buffer_factor = -1.0, 2.0
        class Leaf:
          # A device array of the trainer's state: ready at once.
          def block_until_ready(self):
            return self
        class FakeTrainer:
          def __init__(self, args):
            self._config = Config()
            self._state_pure = None  # rebound from each update, as MaxText's engine does
            fake_log.record("trainer", profiler_steps=args.profiler_steps,
                            chain=args.optimizer_chain_kwargs)
        def payload_signature(payload):
          return {k: (tuple(v.shape), str(np.dtype(v.dtype))) for k, v in vars(payload).items()
                  if hasattr(v, "shape")}
        def signature_mismatch(a, b):
          return "; ".join(sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k)))
        def check_payload(payload):
          real = payload.segment_ids > 0
          routed = payload.routed_experts
          if routed is not None:
            assert routed.dtype == np.int16 and routed.shape[2:] == (LAYERS, TOPK)
            assert (routed[~real] == -1).all() and (routed[real] >= 0).all()
          # Trajectories: completion values only where the mask is 1, prompts unmasked.
          mask = payload.completion_mask
          assert (mask[~real] == 0).all()
          assert (payload.advantages[mask == 0] == 0).all()
          assert (payload.old_per_token_logps[mask == 0] == 0).all()
          pad = int(os.environ.get("FAKE_PAD", "3"))  # the tokenizer's pad id
          assert (payload.completion_ids[~real] == pad).all()
          assert payload.segment_ids.max() <= payload.num_segments - 1
          return int(real.sum()), int(real.any(axis=1).sum())
        class ExplicitWorker:
          def __init__(self, trainer_factory, *, worker_id="w", logps_chunk_size=0,
                       execution_context=None):
            self._trainer = trainer_factory()
            self.step = 0
            fake_log.record("worker", worker_id=worker_id, context=execution_context,
                            chunk=logps_chunk_size)
          def initialize(self):
            fake_log.record("initialize")
          def with_loss_fn(self, loss_fn, has_aux=False):
            fake_log.record("with_loss_fn", loss=loss_fn(), has_aux=has_aux)
          def with_gen_model_input_fn(self, fn):
            fake_log.record("with_gen_model_input_fn", value=fn(None))
          def routed_experts_shape(self):
            return (LAYERS, TOPK)
          def compile(self, dummy):
            fake_log.record("compile", abstract=not isinstance(dummy.completion_ids, np.ndarray))
          def fwd_bwd(self, request, **kwargs):
            self.calls = getattr(self, "calls", 0) + 1
            if str(self.calls - 1) == os.environ.get("FAKE_FAIL_AT"):
              raise RuntimeError("device lost")
            tokens, rows = check_payload(request.payload)
            fake_log.record("fwd_bwd", kwargs=kwargs, tokens=tokens, rows=rows,
                            completion=int(request.payload.completion_mask.sum()),
                            routed=request.payload.routed_experts is not None,
                            request=request.request_id,
                            jax_platforms=os.environ.get("JAX_PLATFORMS"))
            return datatypes.Response(queued=True)
          def update(self):
            self.step += 1
            if os.environ.get("FAKE_NO_STATE") != "1":  # a trainer that keeps no state to read
              self._trainer._state_pure = {"model": Leaf()}
            fake_log.record("update", step=self.step)
            return self.step
          def per_token_logps(self, request):
            fake_log.record("per_token_logps", role=request.model_role, pad=request.pad_id,
                            eos=request.eos_id, segmented=request.segment_ids is not None)
            return np.zeros(request.completion_tokens.shape, np.float32)
          def get_metrics(self):
            return {"loss": 0.5, "gradient_norm": 2.0}
          def get_step_timing(self):
            return {"v": 1, "train_step": self.step, "mb": [], "update": None, "prepare": None}
        class FusedWorker(ExplicitWorker):
          def fwd_bwd(self, request, accumulate_gradients=False, apply_optimizer=False,
                      skip_jit=False):
            tokens, rows = check_payload(request.payload)
            fake_log.record("fwd_bwd", kwargs=dict(apply_optimizer=apply_optimizer), tokens=tokens,
                            rows=rows, request=request.request_id, jax_platforms=None)
            if apply_optimizer:
              self.step += 1
              self._trainer._state_pure = {"model": Leaf()}
              return datatypes.Response(updated=True, train_step=self.step)
            return datatypes.Response(queued=True)
        TrainerWorker = FusedWorker if os.environ.get("FAKE_WORKER") == "fused" else ExplicitWorker
        """,
    "tunix/experimental/examples/deepswe_dist/run_deepswe_dist.py": """
        import argparse, dataclasses, os
        from typing import Optional
        os.environ.setdefault("JAX_PLATFORMS", "cpu")  # as the real module does
        @dataclasses.dataclass
        class GRPOConfig:
          epsilon: float = 0.2
          seq_logprob_error_threshold: Optional[float] = None
          sampler_is: Optional[str] = None
          sampler_is_threshold: float = 2.0
        class Algo:
          def __init__(self, args):
            self.algo_config = GRPOConfig(
                seq_logprob_error_threshold=args.seq_logprob_error_threshold)
            self.num_generations = args.num_generations
            self.mini_batch_size = args.mini_batch_size
            self.train_micro_batch_size = args.train_micro_batch_size
          def loss_fn(self):
            config = self.algo_config
            return lambda: {"seq_logprob_error_threshold": config.seq_logprob_error_threshold}
          def build_gen_model_input_fn(self, pad_id, eos_id):
            return lambda payload: {"pad_id": pad_id, "eos_id": eos_id}
        def _parse_args(argv):
          parser = argparse.ArgumentParser()
          for name, kind, default in [("batch_size", int, 1), ("mini_batch_size", int, None),
                                      ("num_generations", int, 2),
                                      ("train_micro_batch_size", int, 1),
                                      ("max_prompt_length", int, 64),
                                      ("max_response_length", int, 448),
                                      ("max_seq_token_per_tpu", int, None),
                                      ("max_segments_per_packed_row", int, None),
                                      ("trainer_fsdp", int, None), ("trainer_dp", int, None),
                                      ("trainer_expert", int, None),
                                      ("seq_logprob_error_threshold", float, None),
                                      ("tokenizer_path", str, ""), ("model_id", str, "m")]:
            parser.add_argument("--" + name, type=kind, default=default)
          return parser.parse_args(argv)
        def _build_algo(args):
          return Algo(args)
        class GenerationArgs:
          def __init__(self, **kwargs):
            self.kwargs = kwargs
        def main(argv, context=None):
          args = _parse_args(argv)
          return GenerationArgs(max_generation_steps=args.max_response_length,
                                return_logprobs=True)
        """,
    "tunix/experimental/orchestrator/batch_assembly.py": """
        import dataclasses
        from typing import Optional
        @dataclasses.dataclass
        class BatchConfig:
          pad_id: int = 0
          max_prompt_length: Optional[int] = None
          max_response_length: Optional[int] = None
          max_seq_token_per_tpu: Optional[int] = None
          max_segments_per_packed_row: Optional[int] = None
          trainer_fsdp: Optional[int] = None
          trainer_dp: Optional[int] = None
          trainer_expert: Optional[int] = None
        class SequencePackedBatchAssembler:
          def __init__(self, batch_size, max_packed_len, pad_id, max_segments_per_packed_row):
            self.batch_size, self.max_packed_len = batch_size, max_packed_len
            self.pad_id, self.max_segments_per_packed_row = pad_id, max_segments_per_packed_row
        class PaddedBatchAssembler:
          pass
        def create_batch_assembler(*, num_generations, mini_batch_size, train_micro_batch_size,
                                   batch_config):
          if batch_config.max_seq_token_per_tpu is None:
            return PaddedBatchAssembler()
          rows = ((batch_config.trainer_fsdp or 1) * (batch_config.trainer_dp or 1) *
                  (batch_config.trainer_expert or 1))
          return SequencePackedBatchAssembler(rows, batch_config.max_seq_token_per_tpu,
                                              batch_config.pad_id,
                                              batch_config.max_segments_per_packed_row)
        """,
    "tunix/experimental/orchestrator/compile_warmup.py": """
        import numpy as np
        from tunix import fake_log
        from tunix.experimental.common import datatypes
        class Abstract:
          def __init__(self, shape, dtype):
            self.shape, self.dtype = tuple(shape), np.dtype(dtype)
        def build_trainer_warmup_payload(*, algo, assembler, rollout_logprobs,
                                         routed_experts_shape=None, sampler_is=None,
                                         sampler_is_threshold=2.0,
                                         seq_logprob_error_threshold=None):
          fake_log.record("warmup", seq_logprob_error_threshold=seq_logprob_error_threshold,
                          rollout_logprobs=rollout_logprobs)
          rows, length = assembler.batch_size, assembler.max_packed_len
          token = lambda dtype: Abstract((rows, length), dtype)
          return datatypes.RLTrainerPayload(
              prompt_ids=Abstract((rows, 0), np.int32), prompt_mask=Abstract((rows, 0), np.float32),
              completion_ids=token(np.int32), completion_mask=token(np.float32),
              advantages=token(np.float32), segment_ids=token(np.int32),
              segment_positions=token(np.int32), old_per_token_logps=token(np.float32),
              routed_experts=(None if routed_experts_shape is None else
                              Abstract((rows, length, *routed_experts_shape), np.int16)),
              num_segments=(assembler.max_segments_per_packed_row or length) + 1)
        """,
    # rl_program as the driver reads it (upstream.rl_program_agreement): the newer program that
    # skips the actor log-prob pass when the GRPO loss can check the agreement itself.
    "tunix/experimental/orchestrator/rl_program.py": """
        class StandardRLProgram:
          async def train_stage(self, batch, algo_config):
            can_fuse_agreement_in_loss = algo_config.policy_loss_fn == "grpo"
            if not can_fuse_agreement_in_loss:
              batch = await self._apply_sampler_trainer_agreement(batch)
            return batch
        """,
    "transformers.py": """
        class _Tokenizer:
          pad_token_id, eos_token_id, eos_token = 3, 4, "</s>"
          def __len__(self):
            return 500
        class AutoTokenizer:
          @staticmethod
          def from_pretrained(path, trust_remote_code=False):
            return _Tokenizer()
        """,
    "jax/__init__.py": """
        from jax import profiler
        class _Device:
          device_kind = "TPU7x"
          def __init__(self, chip):
            self.coords, self.slice_index = (chip, 0, 0), 0
        def devices():
          return [_Device(i // 2) for i in range(8)]
        def live_arrays():
          return []
        def block_until_ready(tree):
          return tree
        """,
    "jax/profiler.py": """
        from tunix import fake_log
        def start_trace(log_dir):
          fake_log.record("start_trace", log_dir=log_dir)
        def stop_trace():
          fake_log.record("stop_trace")
        class StepTraceAnnotation:
          def __init__(self, name, **kwargs):
            self.name, self.kwargs = name, kwargs
          def __enter__(self):
            fake_log.record("step_trace", name=self.name, **self.kwargs)
            return self
          def __exit__(self, *exc):
            fake_log.record("step_trace_end", name=self.name, **self.kwargs)
            return False
        """,
}

# Appended to the fake trainer_worker.py for `--preflight --numerics` (numerics_test.py): a NumPy
# stand-in of MaxText's engine (maxtext_engine.py@b8bf66d6: `_accumulated_grads` and
# `_accumulated_denominator` summed by fwd_bwd, applied and cleared by update(), gradient_norm
# recorded) whose loss is a GRPO-like policy loss on one weight per token id, built for the
# miniature model that MAXTEXT_EXTRA_FLAGS describes. FAKE_NUMERICS_BUG breaks a knob: "mask"
# masks each segment's first completion token whatever the gates say, "advantages" adds 1 to
# every advantage; "opaque" shows neither the gradients, the denominator nor a gradient norm.
NUMERICS_WORKER = """
    import math
    class MiniatureConfig:
      def __init__(self, flags):
        items = dict(item.split("=", 1) for item in flags.split())
        self.num_decoder_layers = int(items.get("base_num_decoder_layers", LAYERS))
        self.num_experts_per_tok = int(items.get("num_experts_per_tok", TOPK))
        self.num_experts = int(items.get("num_experts", EXPERTS))
        self.emb_dim = int(items.get("base_emb_dim", 0)) or None
        self.vocab_size = VOCAB
        self.capacity_factor, self.ragged_buffer_factor = -1.0, 2.0
    class NumericsEngine:
      def __init__(self):
        flags = os.environ.get("MAXTEXT_EXTRA_FLAGS", "")
        self._config = MiniatureConfig(flags)
        self.weights = np.zeros(VOCAB)
        self._accumulated_grads = None
        self._accumulated_denominator = None
        self.gate = None
        self.bug = os.environ.get("FAKE_NUMERICS_BUG", "")
        self.norm = None
        fake_log.record("numerics_engine", flags=flags)
      def fwd_bwd(self, payload):
        mask = payload.completion_mask.astype(np.float64)
        if self.gate is not None or self.bug == "mask":
          first = np.zeros_like(mask, dtype=bool)
          first[:, 1:] = (mask[:, 1:] > 0) & (mask[:, :-1] == 0)
          mask = np.where(first, 0.0, mask)
        advantages = payload.advantages.astype(np.float64) + (1.0 if self.bug == "advantages"
                                                               else 0.0)
        grads = np.zeros(VOCAB)
        np.add.at(grads, payload.completion_ids, -advantages * mask)
        if self._accumulated_grads is None:
          self._accumulated_grads = {"embedding": {"weight": grads}}
          self._accumulated_denominator = np.float32(mask.sum())
        else:
          self._accumulated_grads["embedding"]["weight"] += grads
          self._accumulated_denominator += np.float32(mask.sum())
        if self.bug == "opaque":  # an engine that shows neither sum
          self._hidden = (self._accumulated_grads, self._accumulated_denominator)
          self._accumulated_grads = self._accumulated_denominator = None
      def update(self):
        if self.bug == "opaque":
          self._accumulated_grads, self._accumulated_denominator = self._hidden
        grads = self._accumulated_grads["embedding"]["weight"] / max(
            float(self._accumulated_denominator), 1.0)
        self.norm = float(math.sqrt((grads ** 2).sum()))
        self.weights -= 0.1 * grads
        self._accumulated_grads = self._accumulated_denominator = None
    class NumericsWorker(ExplicitWorker):
      def __init__(self, trainer_factory, **kwargs):
        super().__init__(trainer_factory, **kwargs)
        self._trainer = NumericsEngine()
      def with_loss_fn(self, loss_fn, has_aux=False):
        self._trainer.gate = loss_fn()["seq_logprob_error_threshold"]
        fake_log.record("with_loss_fn", loss=loss_fn(), has_aux=has_aux)
      def routed_experts_shape(self):
        config = self._trainer._config
        return (config.num_decoder_layers, config.num_experts_per_tok)
      def fwd_bwd(self, request, **kwargs):
        payload = request.payload
        config = self._trainer._config
        assert payload.routed_experts.shape[2:] == (config.num_decoder_layers,
                                                    config.num_experts_per_tok)
        assert (payload.routed_experts < config.num_experts).all()
        fake_log.record("fwd_bwd", kwargs=kwargs, rows=int(payload.completion_ids.shape[0]),
                        tokens=int(payload.completion_ids.shape[1]),
                        advantages=float(np.abs(payload.advantages).sum()))
        self._trainer.fwd_bwd(payload)
        return datatypes.Response(queued=True)
      def update(self):
        self._trainer.update()
        self.step += 1
        fake_log.record("update", step=self.step)
        return self.step
      def get_metrics(self):
        if self._trainer.bug == "opaque":
          return {"loss": 0.5}
        return {"loss": 0.5, "gradient_norm": self._trainer.norm}
    if os.environ.get("FAKE_WORKER") == "numerics":
      TrainerWorker = NumericsWorker
    """


def fake_module(path: str) -> types.ModuleType:
  """The stand-in module at `path` of FAKES, run in this process: for a test that calls the driver
  in-process with the same stand-in class the pod tests run."""
  module = types.ModuleType(path[:-len(".py")].replace("/", "."))
  exec(compile(textwrap.dedent(FAKES[path]), path, "exec"), module.__dict__)
  return module


TRAINER_ARGV = ("--process_main=tunix.experimental.examples.common.run_trainer_node.main "
                "--discovery_id=trainer --discovery_port=8080 --worker_id=bench-trainer "
                "--mesh_fsdp=2 --maxtext_output_directory=gs://bucket/bench "
                "--profiler_steps=2 --skip_first_n_profiler_steps=1 "
                "--optimizer_chain_kwargs=\"{'max_norm': 0.0625}\"")
# The trainer argv without the trainer's own profiler, for runs the driver traces (PROFILE_WINDOW
# with --profiler_steps > 0 is refused: one profiler only).
TRAINER_ARGV_UNPROFILED = TRAINER_ARGV.replace("--profiler_steps=2 ", "")
ORCH_ARGV = ("--process_main=tunix.experimental.examples.deepswe_dist.run_deepswe_dist.main "
             "--batch_size=4 --num_generations=2 --max_seq_token_per_tpu=512 "
             "--max_segments_per_packed_row=4 --trainer_fsdp=2 --trainer_expert=2 "
             "--seq_logprob_error_threshold=2.0")


class FakeTunixTestCase(unittest.TestCase):
  """Runs the one-file driver in a subprocess on the stand-in tree; it has no tests itself."""

  root: str  # the stand-in tree, written once per test class

  @classmethod
  def setUpClass(cls) -> None:
    cls.root = tempfile.mkdtemp(prefix="fake_tunix_")
    for path, text in FAKES.items():
      full = os.path.join(cls.root, path)
      os.makedirs(os.path.dirname(full), exist_ok=True)
      with open(full, "w", encoding="utf-8") as handle:
        handle.write(textwrap.dedent(text))
    for directory, _, files in os.walk(cls.root):
      if directory != cls.root and "__init__.py" not in files:
        open(os.path.join(directory, "__init__.py"), "w", encoding="utf-8").close()

  @classmethod
  def tearDownClass(cls) -> None:
    shutil.rmtree(cls.root)

  def variant(self, remove: Sequence[str] = (), replace: Optional[Mapping[str, str]] = None) -> str:
    """A copy of the stand-in tree with files removed or replaced (for one test)."""
    root = tempfile.mkdtemp(prefix="fake_tunix_variant_")
    self.addCleanup(shutil.rmtree, root)
    shutil.copytree(self.root, root, dirs_exist_ok=True)
    for path in remove:
      full = os.path.join(root, path)
      if os.path.isdir(full):
        shutil.rmtree(full)
      else:
        os.unlink(full)
    for path, text in (replace or {}).items():
      with open(os.path.join(root, path), "w", encoding="utf-8") as handle:
        handle.write(textwrap.dedent(text))
    return root

  def driver_env(self, root: str, worker: str = "explicit", **settings: str) -> Dict[str, str]:
    """The environment of a 2-step, 3-micro-step run on the stand-in tree at `root`, with
    `settings` on top; the stand-ins log their calls to a fresh calls.jsonl there."""
    log = os.path.join(root, "calls.jsonl")
    if os.path.exists(log):
      os.unlink(log)
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": root, "FAKE_TUNIX_LOG": log,
        "FAKE_WORKER": worker, "TRAINER_ARGV": TRAINER_ARGV, "ORCH_ARGV": ORCH_ARGV,
        "BENCH_NAME": "bench-test", "STEPS": "2", "MICRO_STEPS": "3", "ROUTING_TARGETS": "1,2,4",
        "ROLLOUT_RETURN_ROUTED_EXPERTS": "true"
    }
    env.update(settings)
    return env

  @staticmethod
  def logged_calls(root: str) -> List[Dict[str, Any]]:
    """Every call the stand-ins at `root` logged, in order."""
    log = os.path.join(root, "calls.jsonl")
    if not os.path.exists(log):
      return []
    with open(log, encoding="utf-8") as handle:
      return [json.loads(line) for line in handle]

  def run_driver(
      self, worker: str = "explicit", root: Optional[str] = None, args: Sequence[str] = (),
      **settings: str) -> Tuple["subprocess.CompletedProcess[str]", List[Dict[str, Any]]]:
    """Runs `python3 bench_driver.py ARGS` in driver_env(root, worker, **settings): (the
    finished process, every call the stand-ins logged)."""
    root = root or self.root
    env = self.driver_env(root, worker, **settings)
    result = subprocess.run([PYTHON, driver_path(), *args], env=env, capture_output=True, text=True,
                            timeout=60)
    return result, self.logged_calls(root)

  @staticmethod
  def machine(result: "subprocess.CompletedProcess[str]", prefix: str) -> List[str]:
    return [line for line in result.stdout.splitlines() if line.startswith(prefix)]

  def summary_of(self, result: "subprocess.CompletedProcess[str]") -> Dict[str, Any]:
    """The JSON of the run's one BENCH_SUMMARY line."""
    (summary_line,) = self.machine(result, "BENCH_SUMMARY ")
    return json.loads(summary_line.split(" ", 1)[1])

  def run_stopped(self, returncode: int, **run: Any) -> str:
    """Runs the driver, which must exit `returncode` with one stderr line before timing any
    fwd_bwd; returns that line."""
    result, calls = self.run_driver(**run)
    self.assertEqual(result.returncode, returncode, result.stdout + result.stderr)
    (line,) = result.stderr.strip().splitlines()
    self.assertNotIn("fwd_bwd", [call["event"] for call in calls])
    return line
