"""The driver's whole pod flow against stand-ins for Tunix, JAX and transformers.

The stand-ins are small modules written to a temporary directory and put first on PYTHONPATH, so
`python3 bench_driver.py` runs exactly as in the pod: it parses the argv with the (fake) Tunix
parsers, builds the worker, algorithm, assembler and warm-up payload, compiles, times the steps
and prints its lines. The fake worker checks every payload it receives and logs every call.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import unittest

from driver_loader import driver_path


PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable

FAKES = {
    "maxtext/__init__.py": """
        # Stands in for the MaxText package (the preflight imports it).
        """,
    "tunix/utils/maxtext_utils.py": """
        def get_tokenizer_pad_id(model_id, tokenizer_path, model_dir):
          return 9
        """,
    "tunix/experimental/distributed/runtime/contexts/k8s_context.py": """
        from tunix import fake_log
        class K8sJaxContext:
          def initialize(self):
            fake_log.record("jax_initialize")
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
        import argparse
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
        class FakeTrainer:
          def __init__(self, args):
            self._config = Config()
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
        """,
}

TRAINER_ARGV = ("--process_main=tunix.experimental.examples.common.run_trainer_node.main "
                "--discovery_id=trainer --discovery_port=8080 --worker_id=bench-trainer "
                "--mesh_fsdp=2 --maxtext_output_directory=gs://bucket/bench "
                "--profiler_steps=2 --skip_first_n_profiler_steps=1 "
                "--optimizer_chain_kwargs=\"{'max_norm': 0.0625}\"")
ORCH_ARGV = ("--process_main=tunix.experimental.examples.deepswe_dist.run_deepswe_dist.main "
             "--batch_size=4 --num_generations=2 --max_seq_token_per_tpu=512 "
             "--max_segments_per_packed_row=4 --trainer_fsdp=2 --trainer_expert=2 "
             "--seq_logprob_error_threshold=2.0")




class PodFlowTest(unittest.TestCase):

  @classmethod
  def setUpClass(cls):
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
  def tearDownClass(cls):
    shutil.rmtree(cls.root)

  def variant(self, remove=(), replace=None):
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

  def run_driver(self, worker="explicit", root=None, args=(), **settings):
    root = root or self.root
    log = os.path.join(root, "calls.jsonl")
    if os.path.exists(log):
      os.unlink(log)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": root,
           "FAKE_TUNIX_LOG": log, "FAKE_WORKER": worker, "TRAINER_ARGV": TRAINER_ARGV,
           "ORCH_ARGV": ORCH_ARGV, "BENCH_NAME": "bench-test", "STEPS": "2", "MICRO_STEPS": "3",
           "ROUTING_TARGETS": "1,2,4"}
    env.update(settings)
    result = subprocess.run([PYTHON, driver_path(), *args], env=env, capture_output=True,
                            text=True, timeout=60)
    calls = []
    if os.path.exists(log):
      with open(log, encoding="utf-8") as handle:
        calls = [json.loads(line) for line in handle]
    return result, calls

  @staticmethod
  def machine(result, prefix):
    return [line for line in result.stdout.splitlines() if line.startswith(prefix)]

  def summary_of(self, result):
    """The JSON of the run's one BENCH_SUMMARY line."""
    (summary_line,) = self.machine(result, "BENCH_SUMMARY ")
    return json.loads(summary_line.split(" ", 1)[1])

  def run_stopped(self, returncode, **run):
    """Runs the driver, which must exit `returncode` with one stderr line before timing any
    fwd_bwd; returns that line."""
    result, calls = self.run_driver(**run)
    self.assertEqual(result.returncode, returncode, result.stdout + result.stderr)
    (line,) = result.stderr.strip().splitlines()
    self.assertNotIn("fwd_bwd", [call["event"] for call in calls])
    return line

  def test_explicit_worker_run(self):
    result, calls = self.run_driver()
    self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
    events = [call["event"] for call in calls]
    self.assertEqual(events[:3], ["jax_initialize", "trainer", "worker"])
    worker = calls[2]
    self.assertEqual(worker["context"], "MESH")
    self.assertEqual(worker["worker_id"], "bench-trainer")
    self.assertEqual(calls[1]["chain"], "{'max_norm': 0.0625}")
    self.assertEqual(events.count("compile"), 1)
    self.assertTrue(next(c for c in calls if c["event"] == "compile")["abstract"])
    fwd_bwd = [call for call in calls if call["event"] == "fwd_bwd"]
    self.assertEqual(len(fwd_bwd), 6)
    self.assertEqual(events.count("update"), 2)
    rows, tokens = 4, 512 - round(512 * 4588 / 65536)
    for call in fwd_bwd:
      self.assertEqual(call["kwargs"], {"skip_jit": False})
      self.assertEqual(call["tokens"], rows * tokens)
      self.assertTrue(call["request"].startswith("train_req_"))
      self.assertIsNone(call["jax_platforms"])  # the orchestrator import did not leave cpu
    loss = next(call for call in calls if call["event"] == "with_loss_fn")
    self.assertTrue(loss["has_aux"])
    self.assertEqual(loss["loss"], {"seq_logprob_error_threshold": 2.0})
    self.assertEqual(next(c for c in calls if c["event"] == "with_gen_model_input_fn")["value"],
                     {"pad_id": 3, "eos_id": 4})

    steps = [json.loads(line.split(" ", 1)[1]) for line in self.machine(result, "BENCH_STEP ")]
    self.assertEqual([step["step"] for step in steps], [0, 1])
    for step in steps:
      self.assertFalse(step["fused_update"])
      self.assertEqual(step["microbatch_timing"], "dispatch")  # nothing to wait on here
      self.assertEqual(step["tokens"], 3 * rows * tokens)
      self.assertEqual(len(step["microbatch_s"]), 3)
      self.assertEqual(step["metrics"], {"loss": 0.5, "gradient_norm": 2.0})
    timing = self.machine(result, "TRAINER_STEP_TIMING ")
    self.assertEqual(len(timing), 2)
    self.assertRegex(timing[1], r"^TRAINER_STEP_TIMING step=1 policy_version=1 rtt_s=\d+\.\d{3} "
                     r'timing=\{"v":1,"train_step":2,"mb":\[\],"update":null,"prepare":null\}$')
    summary = self.summary_of(result)
    self.assertEqual(summary["name"], "bench-test")
    self.assertEqual((summary["rows"], summary["tokens_per_row"], summary["real_len"]),
                     (4, 512, tokens))
    self.assertEqual((summary["layers"], summary["topk"], summary["experts"]), (3, 2, 16))
    self.assertEqual(summary["chips"], 4)  # 8 TPU7x devices, two per chip
    # One 64 + 448-token trajectory per 476-token row (max-length trajectories that fit).
    self.assertEqual(summary["segments"], 1)
    self.assertIn("max-length trajectories", summary["choices"]["segments"]["source"])
    self.assertEqual(summary["choices"]["pad_position"]["value"], "end")
    self.assertEqual(summary["fallbacks"], [])
    self.assertEqual(len(summary["step_s"]), 2)
    self.assertEqual([entry["target"] for entry in summary["routing"]], [1.0, 2.0, 4.0])
    for entry in summary["routing"]:
      self.assertAlmostEqual(entry["achieved"], entry["target"], delta=0.01 * entry["target"])
    self.assertEqual(summary["knobs"]["logp_gates"], "on")
    # The fake MaxText config sizes its ragged buffers at 2x balanced and counts no drops.
    self.assertEqual(summary["token_dropping"]["verdict"], "unknown")
    self.assertEqual(summary["token_dropping"]["ragged_buffer_factor"], 2.0)
    self.assertIn("WARNING: dropped tokens: unknown", result.stdout)
    self.assertEqual(summary["compile"]["method"], "worker.compile")
    for line in result.stdout.splitlines():
      self.assertTrue(line.startswith(("[TrainerBench] ", "BENCH_STEP {", "BENCH_SUMMARY {",
                                       "TRAINER_STEP_TIMING step=")), line)

  def test_staging_on_without_the_calls_exits_2_naming_them(self):
    line = self.run_stopped(2, STAGE_BOUNDARY="on")  # nothing was timed
    self.assertIn("STAGE_BOUNDARY=on", line)
    self.assertIn("stage_fwd_bwd", line)
    # auto, with the e2e orchestrator staging: a loud line, and the run goes on without it.
    result, _ = self.run_driver(ORCH_PIPELINE_STEP_BOUNDARY="true")
    self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
    self.assertIn("the bench CANNOT reproduce it", result.stdout)
    stage = self.summary_of(result)["stage_boundary"]
    self.assertEqual((stage["requested"], stage["resolved"], stage["engaged"]),
                     ("auto", "off", False))
    self.assertIn("not reproducible", stage["source"])

  def test_fallbacks_stop_the_run_unless_allowed(self):
    root = self.variant(remove=["tunix/experimental/orchestrator/compile_warmup.py"])
    line = self.run_stopped(1, root=root)
    self.assertIn("build_trainer_warmup_payload is missing", line)
    self.assertIn("ALLOW_FALLBACKS=1 would", line)
    result, calls = self.run_driver(root=root, ALLOW_FALLBACKS="1")
    self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
    fallbacks = self.summary_of(result)["fallbacks"]
    self.assertEqual(len(fallbacks), 1)
    self.assertIn("equivalent payload layout", fallbacks[0])

  def test_a_tokenizer_that_does_not_load_is_a_fallback(self):
    root = self.variant(replace={"transformers.py": """
        class AutoTokenizer:
          @staticmethod
          def from_pretrained(path, trust_remote_code=False):
            raise OSError("no such model: " + str(path))
        """})
    result, _ = self.run_driver(root=root)
    self.assertEqual(result.returncode, 1, result.stdout + result.stderr)
    self.assertIn("did not load (no such model", result.stderr)
    result, calls = self.run_driver(root=root, ALLOW_FALLBACKS="1", FAKE_PAD="9")
    self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
    self.assertEqual(next(c for c in calls if c["event"] == "with_gen_model_input_fn")["value"],
                     {"pad_id": 9, "eos_id": 9})

  def test_a_warmup_signature_mismatch_is_fatal(self):
    worker = FAKES["tunix/experimental/worker/trainer_worker.py"].replace(
        'return "; ".join(sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k)))',
        'return "completion_ids: expected [4,512] int32, got [4,512] int64"')
    root = self.variant(replace={"tunix/experimental/worker/trainer_worker.py": worker})
    line = self.run_stopped(1, root=root)
    self.assertIn("differs from the warm-up signature", line)
    self.assertIn("completion_ids: expected [4,512] int32, got [4,512] int64", line)

  def test_a_changed_signature_names_function_argument_and_file(self):
    # A newer BatchConfig that requires an argument the driver does not know.
    assembly = FAKES["tunix/experimental/orchestrator/batch_assembly.py"].replace(
        "class BatchConfig:\n          pad_id: int = 0",
        "class BatchConfig:\n          token_policy: str\n          pad_id: int = 0")
    self.assertNotEqual(assembly, FAKES["tunix/experimental/orchestrator/batch_assembly.py"])
    root = self.variant(replace={"tunix/experimental/orchestrator/batch_assembly.py": assembly})
    line = self.run_stopped(1, root=root)
    self.assertIn("BatchConfig (", line)
    self.assertIn("batch_assembly.py", line)
    self.assertIn("'token_policy'", line)

  def test_routing_off_and_prompts(self):
    orch = ORCH_ARGV + " --max_prompt_length=40"
    result, calls = self.run_driver(ROUTING="off", ORCH_ARGV=orch)
    self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
    fwd_bwd = [call for call in calls if call["event"] == "fwd_bwd"]
    self.assertTrue(fwd_bwd and not any(call["routed"] for call in fwd_bwd))
    # Prompts are real tokens without the completion mask.
    self.assertTrue(all(0 < call["completion"] < call["tokens"] for call in fwd_bwd))
    choices = self.summary_of(result)["choices"]
    self.assertEqual(choices["routing"], {"value": False, "source": "ROUTING=off"})
    self.assertEqual(choices["max_prompt_length"]["value"], 40)

  def test_padding_follows_the_orchestrators_environment(self):
    result, _ = self.run_driver(ORCH_PACK_PAD_POSITION="start", ORCH_PACK_PAD_ALIGN="64")
    self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
    summary = self.summary_of(result)
    self.assertEqual(summary["choices"]["pad_position"]["value"], "start")
    self.assertIn("PACK_PAD_POSITION=start", summary["choices"]["pad_position"]["source"])
    self.assertEqual(summary["shift"], 0)  # 36 tokens of padding: less than one 64-token step
    self.assertIn("pad_position: start (orchestrator env PACK_PAD_POSITION=start)", result.stdout)

  def preflight(self, root=None, **settings):
    result, calls = self.run_driver(root=root, args=["--preflight"], JAX_PLATFORMS="cpu",
                                    **settings)
    lines = [line for line in result.stdout.splitlines() if line.startswith("preflight: ")]
    status = {}
    for line in lines:
      parts = line[len("preflight: "):].split(None, 1)
      if parts[0] in ("ok", "FAIL", "skip") and ":" in parts[1]:
        status[parts[1].split(":", 1)[0]] = parts[0]
    return result, calls, status

  def test_preflight_all_good(self):
    result, calls, status = self.preflight(LOGP_GATES="off")
    self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
    self.assertEqual(set(status.values()), {"ok"}, status)
    for item in ("trainer module", "TRAINER_ARGV", "MaxText", "TrainerWorker", "datatypes",
                 "orchestrator module", "ORCH_ARGV", "GRPO config", "tokenizer",
                 "batch configuration", "warm-up payload", "payload", "staged step boundary",
                 "jax"):
      self.assertIn(item, status)
    self.assertIn("seq_logprob_error_threshold=2.0 turned off", result.stdout)
    self.assertTrue(result.stdout.rstrip().endswith("preflight: all good (exit 0)"))
    # No trainer was built, no JAX initialized, nothing timed: no weights load.
    events = [call["event"] for call in calls]
    for event in ("trainer", "worker", "jax_initialize", "compile", "fwd_bwd"):
      self.assertNotIn(event, events)

  def test_preflight_finds_a_missing_module(self):
    root = self.variant(remove=["tunix/experimental/orchestrator/batch_assembly.py"])
    result, _, status = self.preflight(root=root)
    self.assertEqual(result.returncode, 1, result.stdout + result.stderr)
    self.assertEqual(status["batch configuration"], "FAIL")
    self.assertIn("cannot import tunix.experimental.orchestrator.batch_assembly", result.stdout)
    self.assertEqual(status["warm-up payload"], "skip")  # needs the assembler
    self.assertEqual(status["GRPO config"], "ok")  # the rest is still checked
    self.assertEqual(status["TrainerWorker"], "ok")

  def test_preflight_finds_maxtext_missing(self):
    root = self.variant(remove=["maxtext"])  # the package, not only its __init__
    result, _, status = self.preflight(root=root)
    self.assertEqual(result.returncode, 1, result.stdout + result.stderr)
    self.assertEqual(status["MaxText"], "FAIL")
    self.assertIn("cannot import maxtext", result.stdout)

  def test_preflight_finds_a_changed_signature(self):
    assembly = FAKES["tunix/experimental/orchestrator/batch_assembly.py"].replace(
        "class BatchConfig:\n          pad_id: int = 0",
        "class BatchConfig:\n          token_policy: str\n          pad_id: int = 0")
    root = self.variant(replace={"tunix/experimental/orchestrator/batch_assembly.py": assembly})
    result, _, status = self.preflight(root=root)
    self.assertEqual(result.returncode, 1, result.stdout + result.stderr)
    self.assertEqual(status["batch configuration"], "FAIL")
    line = next(line for line in result.stdout.splitlines() if "FAIL  batch configuration" in line)
    self.assertIn("'token_policy'", line)
    self.assertIn("batch_assembly.py", line)

  def test_preflight_finds_a_gate_that_cannot_be_turned_off(self):
    orchestrator = FAKES["tunix/experimental/examples/deepswe_dist/run_deepswe_dist.py"].replace(
        "          sampler_is_threshold: float = 2.0\n",
        "          sampler_is_threshold: float = 2.0\n"
        "          @property\n"
        "          def tis_mode(self):\n"
        "            return 'token'  # derived: nothing can set it\n")
    self.assertNotEqual(orchestrator,
                        FAKES["tunix/experimental/examples/deepswe_dist/run_deepswe_dist.py"])
    root = self.variant(
        replace={"tunix/experimental/examples/deepswe_dist/run_deepswe_dist.py": orchestrator})
    result, _, status = self.preflight(root=root, LOGP_GATES="off")
    self.assertEqual(result.returncode, 1, result.stdout + result.stderr)
    self.assertEqual(status["GRPO config"], "FAIL")
    self.assertIn("cannot turn off tis_mode='token'", result.stdout)
    # The pod run stops there too, before timing anything.
    result, calls = self.run_driver(root=root, LOGP_GATES="off")
    self.assertEqual(result.returncode, 1, result.stdout + result.stderr)
    self.assertNotIn("fwd_bwd", [call["event"] for call in calls])

  def test_preflight_bad_settings_exit_2(self):
    result, _, status = self.preflight(STAGE_BOUNDARY="on")
    self.assertEqual(result.returncode, 2, result.stdout + result.stderr)
    self.assertEqual(status["staged step boundary"], "FAIL")
    result, _, _ = self.preflight(STEPS="0")
    self.assertEqual(result.returncode, 2)
    self.assertIn("STEPS", result.stderr)

  def test_the_actor_log_prob_pass(self):
    result, calls = self.run_driver(LOGPS_PASS="on")
    self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
    events = [call["event"] for call in calls if call["event"] in ("per_token_logps", "fwd_bwd")]
    self.assertEqual(events, ["per_token_logps", "fwd_bwd"] * 6)  # before each micro-batch
    first = next(call for call in calls if call["event"] == "per_token_logps")
    self.assertEqual((first["role"], first["pad"], first["eos"], first["segmented"]),
                     ("actor", 3, 4, True))
    steps = [json.loads(line.split(" ", 1)[1]) for line in self.machine(result, "BENCH_STEP ")]
    self.assertTrue(all(len(step["logps_pass_s"]) == 3 for step in steps))
    # auto: this program uses no rollout log-probs as old ones, so the e2e makes no pass.
    result, calls = self.run_driver()
    self.assertNotIn("per_token_logps", [call["event"] for call in calls])
    choice = self.summary_of(result)["choices"]["logps_pass"]
    self.assertFalse(choice["value"])
    self.assertIn("no actor log-prob pass", choice["source"])
    # on, without the call: exit 2 naming it.
    worker = FAKES["tunix/experimental/worker/trainer_worker.py"].replace(
        "def per_token_logps(self, request):", "def _no_per_token_logps(self, request):")
    root = self.variant(replace={"tunix/experimental/worker/trainer_worker.py": worker})
    result, _ = self.run_driver(root=root, LOGPS_PASS="on")
    self.assertEqual(result.returncode, 2, result.stdout + result.stderr)
    self.assertIn("LOGPS_PASS=on but this image's Tunix lacks TrainerWorker.per_token_logps",
                  result.stderr)

  def test_fused_worker_gets_no_update(self):
    result, calls = self.run_driver(worker="fused")
    self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
    events = [call["event"] for call in calls]
    self.assertNotIn("update", events)
    flags = [call["kwargs"]["apply_optimizer"] for call in calls if call["event"] == "fwd_bwd"]
    self.assertEqual(flags, [False, False, True] * 2)
    steps = [json.loads(line.split(" ", 1)[1]) for line in self.machine(result, "BENCH_STEP ")]
    self.assertTrue(all(step["fused_update"] for step in steps))
    self.assertEqual([step["train_step"] for step in steps], [1, 2])

  def test_knobs_reach_the_payload_and_the_algorithm(self):
    result, calls = self.run_driver(LOGP_GATES="off", FINAL_ROWS="1", PROFILE_WINDOW="1:2",
                                    SEGMENTS="2", PAD_POSITION="start", PAD_ALIGN="64")
    self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
    warmup = next(call for call in calls if call["event"] == "warmup")
    self.assertIsNone(warmup["seq_logprob_error_threshold"])
    loss = next(call for call in calls if call["event"] == "with_loss_fn")
    self.assertEqual(loss["loss"], {"seq_logprob_error_threshold": None})
    self.assertIn("seq_logprob_error_threshold=2.0 turned off", result.stdout)
    # The trainer's own profiler is off; the driver traces calls 1 and 2.
    self.assertEqual(next(c for c in calls if c["event"] == "trainer")["profiler_steps"], 0)
    events = [call["event"] for call in calls]
    self.assertEqual(events.count("start_trace"), 1)
    self.assertEqual(events.count("stop_trace"), 1)
    first = events.index("fwd_bwd")
    self.assertEqual(events.index("start_trace"), first + 1)  # before call 1
    fwd_indices = [i for i, event in enumerate(events) if event == "fwd_bwd"]
    self.assertTrue(fwd_indices[2] < events.index("stop_trace") < fwd_indices[3])
    start = next(call for call in calls if call["event"] == "start_trace")
    self.assertEqual(start["log_dir"], "gs://bucket/bench/bench_profile")
    rows = [call["rows"] for call in calls if call["event"] == "fwd_bwd"]
    self.assertEqual(rows, [4, 4, 1] * 2)  # the last micro-batch of a step has 1 real row
    summary = self.summary_of(result)
    self.assertEqual(summary["final_rows"], 1)
    self.assertEqual(summary["segments"], 2)
    self.assertEqual(summary["shift"], 0)  # 37 tokens of padding < PAD_ALIGN 64: no move
    self.assertIn("routing_final", summary)
    self.assertEqual(summary["knobs"]["profile_window"], "1:2")

  def test_bad_settings_found_with_the_shapes_exit_2(self):
    for settings, fragment in [
        ({"ROUTING_TARGETS": "1,2"}, "ROUTING_TARGETS has 2 values but the model has 3 decoder"),
        ({"SEGMENTS": "5"}, "the 4 segments a row may hold"),
        ({"FINAL_ROWS": "5"}, "R=4"),
        ({"ROUTING_TARGETS": "1,2,9"}, "cannot be reached with 16 experts and top-2"),
        ({"ORCH_ARGV": ORCH_ARGV.replace("--max_seq_token_per_tpu=512", "")},
         "does not select sequence packing"),
    ]:
      with self.subTest(settings=settings):
        result, _ = self.run_driver(**settings)
        self.assertEqual(result.returncode, 2, result.stdout + result.stderr)
        self.assertEqual(len(result.stderr.splitlines()), 1, result.stderr)
        self.assertIn(fragment, result.stderr)
        self.assertEqual(self.machine(result, "BENCH_"), [])

  def test_a_flag_tunix_rejects_exits_2_with_one_line(self):
    result, _ = self.run_driver(TRAINER_ARGV=TRAINER_ARGV + " --unknown_flag=1")
    self.assertEqual(result.returncode, 2, result.stdout + result.stderr)
    self.assertEqual(len(result.stderr.splitlines()), 1, result.stderr)
    self.assertIn("TRAINER_ARGV is rejected by Tunix's argument parser", result.stderr)
    self.assertIn("unrecognized arguments: --unknown_flag=1", result.stderr)

  def test_a_failing_step_exits_1_and_stops_the_trace(self):
    result, calls = self.run_driver(FAKE_FAIL_AT="4", PROFILE_WINDOW="3:3")
    self.assertEqual(result.returncode, 1, result.stdout + result.stderr)
    self.assertEqual(result.stderr.splitlines()[-1], "bench_driver: failed: device lost")
    self.assertIn("Traceback", result.stderr)
    events = [call["event"] for call in calls]
    self.assertEqual(events.count("start_trace"), 1)
    self.assertEqual(events.count("stop_trace"), 1)
    self.assertEqual(len(self.machine(result, "BENCH_STEP ")), 1)
    self.assertEqual(self.machine(result, "BENCH_SUMMARY"), [])

if __name__ == "__main__":
  unittest.main()
