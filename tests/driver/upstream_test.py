"""Tests of what the driver reads from the image's own sources with ast (upstream.py), and of the
facts read before the trainer is built (trainer_facts.py: weights, profiler, the MaxText model
shape and ROUTING_TARGETS against it). The stand-in sources are written from the upstream code
named in docs/upstream-trainer-facts.md ("Issue 25: ..."): run_trainer_node.main's
TrainerWorker(...) call, run_deepswe_dist.main's GenerationArgs(...), rl_program's
can_fuse_agreement_in_loss and distributed_rl_engine's configure_worker."""

import os
import shutil
import sys
import tempfile
import textwrap
import types
import unittest
from unittest import mock
from typing import Any, Dict

from driver_loader import load_driver
from settings_env import base_env, settings_error

bd = load_driver()


class SourcesTestCase(unittest.TestCase):
  """Writes stand-in modules to a temporary package on sys.path, one fresh name per test."""

  def setUp(self) -> None:
    self.root = tempfile.mkdtemp(prefix="upstream_test_")
    self.addCleanup(shutil.rmtree, self.root)
    sys.path.insert(0, self.root)
    self.addCleanup(sys.path.remove, self.root)
    self.count = 0

  def module(self, text: str) -> str:
    """Writes `text` as a new module; its name (never imported by the code under test)."""
    self.count += 1
    name = f"stand_in_{id(self)}_{self.count}"
    with open(os.path.join(self.root, name + ".py"), "w", encoding="utf-8") as handle:
      handle.write(textwrap.dedent(text))
    return name


# run_trainer_node.main at google/tunix@035dbdb9: no log-prob keyword.
WITHOUT_CHUNK = """
    def main(argv, context=None):
      args = _parse_args(argv)
      trainer_factory, mesh = _create_trainer_factory(args)
      worker_service = trainer_worker.TrainerWorker(
          trainer_factory=trainer_factory, worker_id=args.worker_id, execution_context=mesh)
    """

# A trainer node that passes the chunk keywords from its argv.
WITH_CHUNK = """
    def main(argv, context=None):
      args = _parse_args(argv)
      trainer_factory, mesh = _create_trainer_factory(args)
      worker_service = trainer_worker.TrainerWorker(
          trainer_factory=trainer_factory, worker_id=args.worker_id, execution_context=mesh,
          logps_chunk_size=args.compute_logps_chunk_size,
          logps_micro_batch_size=args.compute_logps_micro_batch_size)
    """


class TrainerWorkerKeywordsTest(SourcesTestCase):

  def test_the_keywords_the_call_has_and_lacks(self):
    _, keywords = bd.trainer_worker_keywords(self.module(WITHOUT_CHUNK))
    self.assertEqual(sorted(keywords), ["execution_context", "trainer_factory", "worker_id"])
    path, keywords = bd.trainer_worker_keywords(self.module(WITH_CHUNK))
    self.assertTrue(path.endswith(".py"))
    args = types.SimpleNamespace(compute_logps_chunk_size=512, compute_logps_micro_batch_size=2)
    chunk = keywords["logps_chunk_size"]
    self.assertEqual((chunk.attribute, chunk.text, chunk.value(args)),
                     ("compute_logps_chunk_size", "args.compute_logps_chunk_size", 512))
    self.assertEqual(keywords["logps_micro_batch_size"].value(args), 2)
    # A constant is passed as written; an argv without the attribute is an error.
    _, keywords = bd.trainer_worker_keywords(
        self.module("def main(argv):\n  TrainerWorker(logps_chunk_size=1024)\n"))
    self.assertEqual(keywords["logps_chunk_size"].value(None), 1024)
    with self.assertRaisesRegex(bd.TunixMissing,
                                "its parsed argv has no 'compute_logps_chunk_size'"):
      chunk.value(types.SimpleNamespace())

  def test_unreadable_is_an_error(self):
    cases: Dict[str, str] = {
        "no main": "def other():\n  TrainerWorker()\n",
        "two calls": "def main(a):\n  TrainerWorker(x=1)\n  TrainerWorker(x=2)\n",
        "no call": "def main(a):\n  pass\n",
        "kwargs": "def main(a):\n  TrainerWorker(**a)\n",
        "syntax": "def main(a:\n",
    }
    messages = {
        "no main": r"has no top-level main\(\)",
        "two calls": r"main\(\) makes 2 TrainerWorker\(...\) calls",
        "no call": r"main\(\) makes 0 TrainerWorker\(...\) calls",
        "kwargs": "takes \\*\\*kwargs",
        "syntax": "cannot parse",
    }
    for case, text in cases.items():
      with self.subTest(case=case):
        with self.assertRaisesRegex(bd.TunixMissing, messages[case]):
          bd.trainer_worker_keywords(self.module(text))
    with self.assertRaisesRegex(bd.TunixMissing, "cannot find|cannot read"):
      bd.trainer_worker_keywords("no_such_module_anywhere")
    _, keywords = bd.trainer_worker_keywords(
        self.module("def main(a):\n  TrainerWorker(logps_chunk_size=size())\n"))
    with self.assertRaisesRegex(bd.TunixMissing, "cannot evaluate"):
      keywords["logps_chunk_size"].value(None)


class OrchestratorSourcesTest(SourcesTestCase):

  def test_rollout_logprobs_as_the_orchestrator_asks(self):
    # run_deepswe_dist.main at 000f523a always asks: return_logprobs=True.
    always = self.module("def main(argv):\n  GenerationArgs(temperature=1.0, "
                         "return_logprobs=True)\n")
    asked, where = bd.rollout_logprobs_asked(always, None)
    self.assertTrue(asked)
    self.assertIn("GenerationArgs(return_logprobs=True)", where)
    flag = self.module("def main(argv):\n  GenerationArgs(return_logprobs=args.logprobs)\n")
    self.assertFalse(bd.rollout_logprobs_asked(flag, types.SimpleNamespace(logprobs=False))[0])
    self.assertFalse(bd.rollout_logprobs_asked(self.module("GenerationArgs(top_k=1)\n"), None)[0])
    # No call (or several): the caller judges by the argv.
    asked, where = bd.rollout_logprobs_asked(self.module("def main(argv):\n  pass\n"), None)
    self.assertIsNone(asked)
    self.assertIn("makes 0 GenerationArgs(...) calls", where)
    # The Choice the set-up makes of it wins over the argv's rule.
    args = types.SimpleNamespace(use_rollout_logps=False)
    self.assertTrue(bd.rollout_logps_requested(args, bd.Choice(True, "asked")).value)
    self.assertFalse(bd.rollout_logps_requested(args).value)

  def test_rl_program_variants(self):
    fusable = self.module("""
        class P:
          async def train(self, cfg, batch):
            can_fuse_agreement_in_loss = getattr(cfg, "policy_loss_fn", "grpo") == "grpo"
            if not can_fuse_agreement_in_loss:
              batch = await self._apply_sampler_trainer_agreement(batch)
        """)
    always = self.module("""
        class P:
          async def train(self, batch):
            return await self._apply_sampler_trainer_agreement(batch)
        """)
    never = self.module("class P:\n  def train(self, batch):\n    return batch\n")
    self.assertEqual(bd.rl_program_agreement(fusable)[0], "fusable")
    self.assertEqual(bd.rl_program_agreement(always)[0], "always")
    self.assertEqual(bd.rl_program_agreement(never)[0], "never")

  def test_eos_as_configure_worker_takes_it(self):
    # distributed_rl_engine's configure_worker: getattr(assembler, "eos_id", <eos_id kwarg, else
    # the pad id>); an orchestrator that configures the loss itself passes the tokenizer's eos.
    engine = self.module("def main(argv):\n  engine.configure_worker(role, algo=a, assembler=b)\n")
    passes = self.module("def main(argv):\n  engine.configure_worker(role, eos_id=eos_id)\n")
    itself = self.module("def main(argv):\n  _configure_trainer_loss(h, pad_id=3, eos_id=4)\n")
    with_eos = types.SimpleNamespace(eos_id=7)
    without = types.SimpleNamespace()
    self.assertEqual(bd.configured_eos(engine, with_eos, 3, 4).value, 7)
    choice = bd.configured_eos(engine, without, 3, 4)
    self.assertEqual(choice.value, 3)
    self.assertIn("the pad id: the orchestrator passes no eos_id", choice.source)
    self.assertEqual(bd.configured_eos(passes, without, 3, 4).value, 4)
    self.assertEqual(bd.configured_eos(itself, with_eos, 3, 4).value, 4)


class MaxTextShapeTest(SourcesTestCase):

  def pyconfig(self, **fields: Any) -> str:
    """A stand-in MaxText package whose pyconfig returns `fields`; its maxtext_modules module."""
    package = f"mt_{id(self)}_{self.count}"
    self.count += 1
    os.makedirs(os.path.join(self.root, package))
    open(os.path.join(self.root, package, "__init__.py"), "w", encoding="utf-8").close()
    open(os.path.join(self.root, package, "base.yml"), "w", encoding="utf-8").close()
    with open(os.path.join(self.root, package, "pyconfig.py"), "w", encoding="utf-8") as handle:
      handle.write("import types\nSEEN = []\ndef initialize(argv):\n  SEEN.append(argv)\n"
                   f"  return types.SimpleNamespace(**{fields!r})\n")
    return package

  def test_the_shape_and_the_routing_check(self):
    package = self.pyconfig(num_decoder_layers=4, num_experts=8, num_experts_per_tok=2,
                            vocab_size=1000)
    pyconfig = __import__(f"{package}.pyconfig", fromlist=["initialize"])
    with mock.patch.object(bd, "maxtext_pyconfig", lambda: pyconfig):
      shape = bd.read_model_shape(types.SimpleNamespace(maxtext_model_name="qwen3-moe"),
                                  {"base_num_decoder_layers": "4", "ragged_buffer_factor": "2.75"})
    self.assertEqual((shape.layers, shape.experts, shape.topk, shape.vocab), (4, 8, 2, 1000))
    self.assertEqual(shape.routing_shape, (4, 2))
    self.assertEqual(pyconfig.SEEN[0][2:], ["model_name=qwen3-moe", "base_num_decoder_layers=4"])
    self.assertIn("4 targets for 4 layers", bd.check_routing_targets([1, 2, 3, 4], shape, "x"))
    refusals = [
        (None, "^ROUTING_TARGETS is required: the payload replays routing \\(4 layers, top-2\\)"),
        ([1, 2], "^ROUTING_TARGETS has 2 values but the model has 4 decoder layers"),
        ([1, 1, 1, 5], "^routing target 5 of layer 3 cannot be reached with 8 experts and top-2"),
    ]
    for targets, message in refusals:
      with self.subTest(targets=targets):
        with self.assertRaisesRegex(bd.SettingsError, message):
          bd.check_routing_targets(targets, shape, "x")
    dense = bd.ModelShape(4, None, None, 1000, "dense")
    self.assertIsNone(dense.routing_shape)
    with self.assertRaisesRegex(bd.SettingsError, "describes no MoE"):
      bd.check_routing_targets([1] * 4, dense, "ROUTING=on")

  def test_override_model_config_goes_with_the_shape_keys(self):
    # MaxText refuses a model key overridden on the command line without override_model_config.
    package = self.pyconfig(num_decoder_layers=2, num_experts=8, num_experts_per_tok=2,
                            vocab_size=10)
    pyconfig = __import__(f"{package}.pyconfig", fromlist=["initialize"])
    with mock.patch.object(bd, "maxtext_pyconfig", lambda: pyconfig):
      bd.read_model_shape(
          types.SimpleNamespace(maxtext_model_name="m"),
          {"override_model_config": "true", "base_num_decoder_layers": "2", "megablox": "true"})
    self.assertEqual(pyconfig.SEEN[0][2:],
                     ["model_name=m", "base_num_decoder_layers=2", "override_model_config=true"])

  def test_routing_auto_without_evidence_is_off_for_a_dense_model_only(self):
    settings = bd.parse_settings({"TRAINER_ARGV": "--x 1", "ORCH_ARGV": "--y 1"})
    args = types.SimpleNamespace(maxtext_model_name="m")
    for experts, outcome in ((None, False), (8, "error")):
      with self.subTest(experts=experts):
        package = self.pyconfig(num_decoder_layers=2, num_experts=experts,
                                num_experts_per_tok=2 if experts else None, vocab_size=10)
        pyconfig = __import__(f"{package}.pyconfig", fromlist=["initialize"])
        with mock.patch.object(bd, "maxtext_pyconfig", lambda: pyconfig):
          if outcome == "error":
            with self.assertRaisesRegex(bd.SettingsError, "ROUTING=auto but nothing says"):
              bd.maxtext_stage(settings, args, {}, log=print, strict=True)
            continue
          _, routing, detail = bd.maxtext_stage(settings, args, {}, log=print, strict=True)
        self.assertIs(routing.value, False)
        self.assertIn("the model has no experts", routing.source)
        self.assertIn("routing not replayed", detail)

  def test_without_a_model_name(self):
    package = self.pyconfig()
    pyconfig = __import__(f"{package}.pyconfig", fromlist=["initialize"])
    with mock.patch.object(bd, "maxtext_pyconfig", lambda: pyconfig):
      with self.assertRaisesRegex(bd.TunixMissing, "names no --maxtext_model_name"):
        bd.read_model_shape(types.SimpleNamespace(), {})


class WeightsAndProfilerTest(unittest.TestCase):

  def test_weights(self):
    args = types.SimpleNamespace(maxtext_ckpt_path="")
    random = bd.weights_source(args, [], {}, {})
    self.assertEqual((random["source"], random["path"]), ("random", None))
    given = bd.weights_source(types.SimpleNamespace(maxtext_ckpt_path="gs://c/1"),
                              ["--maxtext_ckpt_path=gs://c/1"], {}, {})
    self.assertEqual((given["source"], given["path"]), ("checkpoint", "gs://c/1"))
    self.assertIn("TRAINER_ARGV --maxtext_ckpt_path", given["why"])
    from_env = bd.weights_source(types.SimpleNamespace(maxtext_ckpt_path="gs://c/2"), [], {},
                                 {"MAXTEXT_CKPT": "gs://c/2"})
    self.assertIn("MAXTEXT_CKPT", from_env["why"])
    self.assertEqual(
        bd.weights_source(args, [], {}, {"MAXTEXT_CKPT": "gs://c/3"})["path"], "gs://c/3")
    for flag in ("load_parameters_path", "load_full_state_path"):
      with self.subTest(flag=flag):
        found = bd.weights_source(args, [], {flag: "gs://c/4"}, {})
        self.assertEqual((found["source"], found["path"]), ("checkpoint", "gs://c/4"))
        self.assertIn(flag, found["why"])

  def test_overrides(self):
    self.assertEqual(bd.maxtext_overrides({"MAXTEXT_EXTRA_FLAGS": "a=1  b=x a=2"}),
                     {"a": "2", "b": "x"})
    self.assertEqual(bd.maxtext_overrides({}), {})
    self.assertEqual(settings_error(self, bd.maxtext_overrides, {"MAXTEXT_EXTRA_FLAGS": "a=1 b"}),
                     "MAXTEXT_EXTRA_FLAGS item 'b' is not key=value")

  def test_one_profiler_only(self):
    quiet = types.SimpleNamespace(profiler_steps=0)
    loud = types.SimpleNamespace(profiler_steps=3)
    self.assertEqual(bd.profiler_owner(None, quiet, {})["by"], "none")
    self.assertEqual(bd.profiler_owner((1, 2), quiet, {})["by"], "driver")
    self.assertEqual(bd.profiler_owner(None, loud, {}),
                     {"by": "trainer", "why": "TRAINER_ARGV --profiler_steps=3"})
    self.assertEqual(bd.profiler_owner(None, quiet, {"profiler": "xplane"})["by"], "trainer")
    self.assertEqual(
        settings_error(self, bd.profiler_owner, (1, 2), loud, {}),
        "PROFILE_WINDOW is set and so is the trainer's own profiler (TRAINER_ARGV "
        "--profiler_steps=3): one profiler only (drop one of them)")
    self.assertIn("MAXTEXT_EXTRA_FLAGS profiler=xplane",
                  settings_error(self, bd.profiler_owner, (1, 2), quiet, {"profiler": "xplane"}))
    # settings: the knob itself parses as before.
    self.assertEqual(bd.parse_settings(base_env(PROFILE_WINDOW="1:2")).profile_window, (1, 2))


if __name__ == "__main__":
  unittest.main()
