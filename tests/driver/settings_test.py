"""Tests of the bench driver's environment contract: parsing, defaults and one-line errors."""

import importlib.util
import os
import subprocess
import sys
import tempfile
import types
import unittest




from driver_loader import driver_path, load_driver

bd = load_driver()

TRAINER_ARGV = ("--process_main=tunix.experimental.examples.common.run_trainer_node.main "
                "--discovery_id=trainer --worker_id=bench-trainer --mesh_fsdp=32 --mesh_expert=2 "
                "--maxtext_output_directory=gs://bucket/bench "
                "--optimizer_chain_kwargs=\"{'max_norm': 0.0625}\"")
ORCH_ARGV = ("--process_main=tunix.experimental.examples.deepswe_dist.run_deepswe_dist.main "
             "--batch_size=16 --max_seq_token_per_tpu=65536 --trainer_fsdp=32 --trainer_expert=2")


def base_env(**extra):
  env = {"TRAINER_ARGV": TRAINER_ARGV, "ORCH_ARGV": ORCH_ARGV}
  env.update(extra)
  return env


def settings_error(test, call, *args):
  """The message of the SettingsError that call(*args) raises; a failure of `test` if none."""
  with test.assertRaises(bd.SettingsError) as caught:
    call(*args)
  return str(caught.exception)


class ParseTest(unittest.TestCase):

  def test_defaults(self):
    settings = bd.parse_settings(base_env())
    self.assertEqual(settings.steps, 5)
    self.assertEqual(settings.micro_steps, 9)
    self.assertEqual(settings.seed, 0)
    self.assertIsNone(settings.routing_targets)
    self.assertEqual(settings.routing_scale, 1.0)
    self.assertTrue(settings.logp_gates)
    self.assertEqual(settings.advantages, "random")
    self.assertIsNone(settings.pad_position)  # the e2e orchestrator's, resolved later
    self.assertIsNone(settings.pad_align)
    self.assertEqual(settings.routing, "auto")
    self.assertFalse(settings.allow_fallbacks)
    self.assertIsNone(settings.real_len)
    self.assertIsNone(settings.segments)
    self.assertIsNone(settings.final_rows)
    self.assertIsNone(settings.profile_window)
    self.assertEqual(settings.bench_name, "bench")
    self.assertEqual(settings.trainer_argv[-1], "--optimizer_chain_kwargs={'max_norm': 0.0625}")
    self.assertEqual(settings.orch_argv[1], "--batch_size=16")

  def test_every_knob(self):
    settings = bd.parse_settings(base_env(
        STEPS="3", MICRO_STEPS="12", SEED="-4", ROUTING_TARGETS="1.5, 2,3.25",
        ROUTING_SCALE="0.5", LOGP_GATES="off", ADVANTAGES="zero", PAD_POSITION="start",
        PAD_ALIGN="2048", REAL_LEN="60000", SEGMENTS="8", FINAL_ROWS="17",
        PROFILE_WINDOW="10:4", PROFILE_DIR="gs://bucket/trace", BENCH_NAME="my-bench",
        UNKNOWN_SETTING="ignored"))
    self.assertEqual((settings.steps, settings.micro_steps, settings.seed), (3, 12, -4))
    self.assertEqual(settings.routing_targets, [1.5, 2.0, 3.25])
    self.assertEqual(settings.routing_scale, 0.5)
    self.assertFalse(settings.logp_gates)
    self.assertEqual(settings.advantages, "zero")
    self.assertEqual(settings.pad_position, "start")
    self.assertEqual(settings.pad_align, 2048)
    self.assertEqual((settings.real_len, settings.segments, settings.final_rows), (60000, 8, 17))
    self.assertEqual(settings.profile_window, (10, 4))
    self.assertEqual(settings.profile_dir, "gs://bucket/trace")
    self.assertEqual(settings.bench_name, "my-bench")
    knobs = settings.knobs()
    self.assertEqual(knobs["logp_gates"], "off")
    self.assertEqual(knobs["profile_window"], "10:4")
    self.assertEqual(knobs["routing_targets"], [1.5, 2.0, 3.25])

  def test_bench_name_falls_back_to_the_jobset_name(self):
    self.assertEqual(bd.parse_settings(base_env(JOBSET_NAME="js")).bench_name, "js")

  def test_empty_values_mean_default(self):
    settings = bd.parse_settings(base_env(STEPS="", ROUTING_TARGETS=" "))
    self.assertEqual(settings.steps, 5)
    self.assertIsNone(settings.routing_targets)

  def test_bad_values(self):
    cases = {
        "STEPS": ("0", "must be >= 1"),
        "MICRO_STEPS": ("nine", "not an integer"),
        "SEED": ("1.5", "not an integer"),
        "ROUTING_TARGETS": ("1.5,0.9", "below 1"),
        "ROUTING_SCALE": ("-1", "must be >= 0"),
        "LOGP_GATES": ("maybe", "on|off"),
        "ADVANTAGES": ("normal", "random|zero"),
        "PAD_POSITION": ("middle", "end|start"),
        "PAD_ALIGN": ("100", "multiple of the segment alignment 64"),
        "REAL_LEN": ("0", "must be >= 1"),
        "SEGMENTS": ("-2", "must be >= 1"),
        "FINAL_ROWS": ("x", "not an integer"),
        "PROFILE_WINDOW": ("10", "START:COUNT"),
    }
    for name, (value, fragment) in cases.items():
      with self.subTest(name=name):
        message = settings_error(self, bd.parse_settings, base_env(**{name: value}))
        self.assertIn(name, message)
        self.assertIn(fragment, message)
        self.assertNotIn("\n", message)

  def test_more_bad_values(self):
    for env, fragment in [
        (base_env(ROUTING_SCALE="nan"), "finite"),
        (base_env(ROUTING_TARGETS="1.5,,2"), "not a number"),
        (base_env(ROUTING_TARGETS="inf"), "not finite"),
        (base_env(PROFILE_WINDOW="3:0"), "COUNT must be >= 1"),
        (base_env(PROFILE_WINDOW="-1:2"), "START must be >= 0"),
        (base_env(PAD_ALIGN="0"), "must be >= 1"),
        ({"ORCH_ARGV": ORCH_ARGV}, "TRAINER_ARGV is not set"),
        ({"TRAINER_ARGV": TRAINER_ARGV}, "ORCH_ARGV is not set"),
        (base_env(ORCH_ARGV="--batch_size='16"), "cannot split into shell words"),
    ]:
      with self.subTest(env=env):
        self.assertIn(fragment, settings_error(self, bd.parse_settings, env))


class RoutingTableTest(unittest.TestCase):

  def test_forms(self):
    self.assertEqual(bd.parse_routing_table("1.5,2,3", "t"), [1.5, 2.0, 3.0])
    self.assertEqual(bd.parse_routing_table("# header comment\n1.5\n\n2 # two\n3\n", "t"),
                     [1.5, 2.0, 3.0])
    self.assertEqual(bd.parse_routing_table("layer,max_over_mean\n2,3\n0,1.5\n1,2\n", "t"),
                     [1.5, 2.0, 3.0])
    self.assertEqual(bd.parse_routing_table("0,1.25\n", "t"), [1.25])

  def test_errors_name_the_line(self):
    for text, fragment in [
        ("0,1.5\n2,2\n", "layer 1 is missing"),
        ("0,1.5\n0,2\n", "t:2: layer 0 given twice"),
        ("1.5\n0,2\n", "mixes"),
        ("1,2,3\n4,5,6\n", "multi-line"),
        ("1.5\nabc\n", "t:2: 'abc' is not a number"),
        ("x,1.5\ny,2\n", "not a layer index"),
        ("# nothing\n", "empty"),
        ("1.5\n0.5\n", "t:2: routing target '0.5' is below 1"),
    ]:
      with self.subTest(text=text):
        self.assertIn(fragment, settings_error(self, bd.parse_routing_table, text, "t"))

  def test_file_reference(self):
    with tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False) as handle:
      handle.write("layer,max_over_mean\n0,3.9452\n1,5.8123\n")
    try:
      settings = bd.parse_settings(base_env(ROUTING_TARGETS="@" + handle.name))
      self.assertEqual(settings.routing_targets, [3.9452, 5.8123])
    finally:
      os.unlink(handle.name)
    self.assertIn("cannot read /nonexistent/table.csv",
                  settings_error(self, bd.parse_settings,
                                 base_env(ROUTING_TARGETS="@/nonexistent/table.csv")))


class ResolveTest(unittest.TestCase):
  """The checks that need the shapes Tunix reports (a stand-in for TunixSetup)."""

  def setup(self, **overrides):
    values = dict(rows=64, tokens=65536, num_segments=17, max_segments_per_row=16,
                  routing_shape=(60, 10), experts=512, warmup_segment_counts=None,
                  max_prompt_length=None, max_response_length=None)
    values.update(overrides)
    return types.SimpleNamespace(**values)

  def settings(self, **env):
    defaults = {"ROUTING_TARGETS": ",".join(["2"] * 60)}
    defaults.update(env)
    return bd.parse_settings(base_env(**defaults))

  def test_segments_follow_the_e2e_packing(self):
    # The seed's rows: 8,192 + 57,344 = 65,536-token trajectories, one per 60,948-token row.
    seed = self.setup(max_prompt_length=8192, max_response_length=57344)
    resolved = bd.resolve_plan_inputs(self.settings(), seed)
    self.assertEqual(resolved["segments"], 1)
    self.assertIn("max-length trajectories", resolved["segments_rule"])
    self.assertEqual(resolved["max_prompt_length"], 8192)
    # Short trajectories: as many as fit on the 64-token grid, capped by the packer.
    short = self.setup(max_prompt_length=1000, max_response_length=2000)  # 3,008 per segment
    self.assertEqual(bd.resolve_plan_inputs(self.settings(), short)["segments"], 16)
    self.assertEqual(bd.trajectory_segments(60948, 1000, 2000), 20)
    self.assertEqual(bd.trajectory_segments(3000, 1000, 2000), 1)
    self.assertEqual(bd.trajectory_segments(6016, 1000, 2000), 2)
    self.assertIsNone(bd.trajectory_segments(6016, None, 2000))
    # A concrete warm-up payload: each row's own count (the seed's rule).
    counted = self.setup(warmup_segment_counts=[3, 1] * 32)
    resolved = bd.resolve_plan_inputs(self.settings(), counted)
    self.assertEqual(resolved["segments"], [3, 1] * 32)
    self.assertIn("warm-up", resolved["segments_rule"])
    # SEGMENTS wins.
    resolved = bd.resolve_plan_inputs(self.settings(SEGMENTS="5"), seed)
    self.assertEqual((resolved["segments"], resolved["segments_rule"]), (5, "SEGMENTS"))

  def test_padding_follows_the_orchestrator(self):

    def resolve(orch="--x", **env):
      settings = bd.parse_settings(base_env(ORCH_ARGV=orch, **env))
      position, align = bd.resolve_padding(settings)
      return position.value, align.value, position.source, align.source

    self.assertEqual(resolve()[:2], ("end", 4096))
    self.assertEqual(resolve("--pack_pad_position=start --pack_pad_align 512")[:2],
                     ("start", 512))
    self.assertEqual(resolve(ORCH_PACK_PAD_POSITION="start", ORCH_PACK_PAD_ALIGN="1024")[:2],
                     ("start", 1024))
    # The flag outranks the environment; the knob outranks both.
    position, align, source, _ = resolve("--pack_pad_position=end", ORCH_PACK_PAD_POSITION="start",
                                         PAD_POSITION="start", PAD_ALIGN="128")
    self.assertEqual((position, align), ("start", 128))
    self.assertIn("knob", source)
    self.assertIn("ORCH_ARGV", resolve("--pack_pad_position=end",
                                       ORCH_PACK_PAD_POSITION="start")[2])
    with self.assertRaises(bd.SettingsError):
      resolve("--pack_pad_align=100")
    with self.assertRaises(bd.SettingsError):
      bd.parse_settings(base_env(ORCH_PACK_PAD_POSITION="middle"))

  def test_routing_follows_the_orchestrator(self):

    def resolve(orch="--x", **env):
      return bd.resolve_routing(bd.parse_settings(base_env(ORCH_ARGV=orch, **env)))

    self.assertTrue(resolve().value)
    self.assertIn("as the seed always did", resolve().source)
    self.assertFalse(resolve("--no-return_routed_experts").value)
    self.assertTrue(resolve("--return_routed_experts=true").value)
    self.assertFalse(resolve(ORCH_RETURN_ROUTED_EXPERTS="false").value)
    self.assertFalse(resolve("--return_routed_experts", ROUTING="off").value)
    with self.assertRaises(bd.SettingsError):
      bd.parse_settings(base_env(ROUTING="sometimes"))

  def test_rollout_logps_follow_the_program(self):
    args = types.SimpleNamespace(use_rollout_logps=False, seq_logprob_error_threshold=None,
                                 truncated_importance_sampling_type=None,
                                 sampler_is_length_buckets=None)
    self.assertFalse(bd.rollout_logps_requested(args).value)
    args.truncated_importance_sampling_type = "seq-mask-tis"
    choice = bd.rollout_logps_requested(args)
    self.assertTrue(choice.value)
    self.assertIn("truncated_importance_sampling_type", choice.source)

  def test_defaults_resolve_from_the_shapes(self):
    resolved = bd.resolve_plan_inputs(self.settings(ROUTING_SCALE="0.5"), self.setup())
    self.assertEqual(resolved["real_len"], 60948)
    self.assertEqual(resolved["segments"], 16)
    self.assertEqual(resolved["final_rows"], 64)
    self.assertEqual(resolved["targets"], [1.5] * 60)

  def test_errors(self):
    for env, setup, fragment in [
        ({"ROUTING_TARGETS": "2,2"}, {}, "ROUTING_TARGETS has 2 values but the model has 60"),
        ({"REAL_LEN": "70000"}, {}, "exceeds the token budget T=65536"),
        ({"SEGMENTS": "17"}, {}, "the 16 segments a row may hold"),
        ({"SEGMENTS": "9", "REAL_LEN": "8"}, {}, "exceeds REAL_LEN=8"),
        ({"FINAL_ROWS": "65"}, {}, "exceeds the rows per micro-batch R=64"),
    ]:
      with self.subTest(env=env):
        self.assertIn(fragment, settings_error(self, bd.resolve_plan_inputs,
                                               self.settings(**env), self.setup(**setup)))
    settings = bd.parse_settings(base_env())
    self.assertIn("ROUTING_TARGETS is required",
                  settings_error(self, bd.resolve_plan_inputs, settings, self.setup()))

  def test_no_routing_shape_needs_no_targets(self):
    resolved = bd.resolve_plan_inputs(bd.parse_settings(base_env()),
                                      self.setup(routing_shape=None, experts=None))
    self.assertIsNone(resolved["targets"])


class MainTest(unittest.TestCase):
  """The driver run as the pod runs it: python3 bench_driver.py with the environment."""

  def run_driver(self, env, *args):
    full_env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    full_env.update(env)
    return subprocess.run([sys.executable, driver_path(), *args], env=full_env,
                          capture_output=True, text=True, timeout=60)

  def test_bad_setting_exits_2_with_one_line(self):
    result = self.run_driver(base_env(STEPS="0"))
    self.assertEqual(result.returncode, 2)
    self.assertEqual(result.stdout, "")
    self.assertEqual(result.stderr, "bench_driver: STEPS='0': must be >= 1\n")

  def test_missing_argv_exits_2(self):
    result = self.run_driver({"ORCH_ARGV": ORCH_ARGV})
    self.assertEqual(result.returncode, 2)
    self.assertEqual(len(result.stderr.splitlines()), 1)
    self.assertIn("TRAINER_ARGV is not set", result.stderr)

  def test_unexpected_arguments_exit_2(self):
    result = self.run_driver(base_env(), "--steps=3")
    self.assertEqual(result.returncode, 2)
    self.assertIn("unexpected arguments", result.stderr)

  def test_help(self):
    result = self.run_driver({}, "--help")
    self.assertEqual(result.returncode, 0)
    for name in ("TRAINER_ARGV", "ORCH_ARGV", "STEPS", "MICRO_STEPS", "ROUTING_TARGETS",
                 "PROFILE_WINDOW", "BENCH_SUMMARY", "TRAINER_STEP_TIMING", "--dump-payload"):
      self.assertIn(name, result.stdout)

  @unittest.skipIf(importlib.util.find_spec("tunix") is not None, "Tunix is installed here")
  def test_without_tunix_exits_1_naming_the_module(self):
    result = self.run_driver(base_env(BENCH_NAME="b1", ROUTING_TARGETS="2"))
    self.assertEqual(result.returncode, 1, result.stderr)
    self.assertTrue(result.stdout.startswith("[TrainerBench] b1: bench driver starting"),
                    result.stdout)
    lines = result.stderr.splitlines()
    self.assertEqual(len(lines), 1, result.stderr)
    self.assertIn("cannot import tunix.experimental.examples.common.run_trainer_node", lines[0])


if __name__ == "__main__":
  unittest.main()
