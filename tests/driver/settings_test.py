"""Tests of the bench driver's environment contract (settings.py): parsing, defaults and
one-line errors."""

import json
import unittest

from settings_env import base_env, ORCH_ARGV, settings_error, TRAINER_ARGV
from driver_loader import load_driver

bd = load_driver()


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
    settings = bd.parse_settings(
        base_env(STEPS="3", MICRO_STEPS="12", SEED="-4", ROUTING_TARGETS="1.5, 2,3.25",
                 ROUTING_SCALE="0.5", LOGP_GATES="off", ADVANTAGES="zero", PAD_POSITION="start",
                 PAD_ALIGN="2048", REAL_LEN="60000", SEGMENTS="8", FINAL_ROWS="17",
                 PROFILE_WINDOW="1:2", PROFILE_DIR="gs://bucket/trace", BENCH_NAME="my-bench",
                 UNKNOWN_SETTING="ignored"))
    self.assertEqual((settings.steps, settings.micro_steps, settings.seed), (3, 12, -4))
    self.assertEqual(settings.routing_targets, [1.5, 2.0, 3.25])
    self.assertEqual(settings.routing_scale, 0.5)
    self.assertFalse(settings.logp_gates)
    self.assertEqual(settings.advantages, "zero")
    self.assertEqual(settings.pad_position, "start")
    self.assertEqual(settings.pad_align, 2048)
    self.assertEqual((settings.real_len, settings.segments, settings.final_rows), (60000, 8, 17))
    self.assertEqual(settings.profile_window, (1, 2))
    self.assertEqual(settings.profile_dir, "gs://bucket/trace")
    self.assertEqual(settings.bench_name, "my-bench")
    knobs = settings.knobs()
    self.assertEqual(knobs["logp_gates"], "off")
    self.assertEqual(knobs["profile_window"], "1:2")
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
        # The window counts timed steps: it ends within STEPS (default 5), whatever MICRO_STEPS.
        (base_env(PROFILE_WINDOW="4:2", MICRO_STEPS="9"),
         "PROFILE_WINDOW='4:2': ends after the last timed step (STEPS=5: steps 0..4)"),
        (base_env(PROFILE_WINDOW="3:1", STEPS="3"), "(STEPS=3: steps 0..2)"),
        (base_env(PAD_ALIGN="0"), "must be >= 1"),
        ({"ORCH_ARGV": ORCH_ARGV}, "TRAINER_ARGV is not set"),
        ({"TRAINER_ARGV": TRAINER_ARGV}, "ORCH_ARGV is not set"),
        (base_env(ORCH_ARGV="--batch_size='16"), "cannot split into shell words"),
    ]:
      with self.subTest(env=env):
        self.assertIn(fragment, settings_error(self, bd.parse_settings, env))

  def test_orchestrator_copies_are_kept_as_written(self):
    settings = bd.parse_settings(
        base_env(ORCH_PACK_PAD_ALIGN=" 1024 ", ORCH_PIPELINE_STEP_BOUNDARY="Yes"))
    # Validated now, resolved later: the text is the source BENCH_SUMMARY names.
    self.assertEqual(settings.orch_pack_pad_align, "1024")
    self.assertEqual(settings.orch_pipeline_step_boundary, "Yes")
    self.assertIsNone(settings.orch_stage_next_microbatch)
    self.assertEqual(settings_error(self, bd.parse_settings, base_env(ORCH_PACK_PAD_ALIGN="100")),
                     "ORCH_PACK_PAD_ALIGN='100': must be a multiple of the segment alignment 64")

  def test_the_first_bad_value_in_the_tables_order(self):
    self.assertIn("STEPS", settings_error(self, bd.parse_settings, base_env(ROUTING="x",
                                                                            STEPS="0")))


class PrintSettingsTest(unittest.TestCase):

  def test_every_setting_that_is_set_as_the_driver_reads_it(self):
    text = bd.print_settings(
        base_env(PROFILE_WINDOW="2:1", STEPS="3", LOGP_GATES="off", ROUTING_TARGETS="1.5, 2",
                 ORCH_PACK_PAD_ALIGN="1024", SEED="", JOBSET_NAME="js"))
    printed = json.loads(text)
    self.assertEqual(text, json.dumps(printed, separators=(",", ":")))  # one compact line
    self.assertEqual(list(printed), [
        "TRAINER_ARGV", "ORCH_ARGV", "STEPS", "ROUTING_TARGETS", "LOGP_GATES", "PROFILE_WINDOW",
        "ORCH_PACK_PAD_ALIGN"
    ])  # the table's order; unset and empty ones left out
    self.assertEqual(printed["TRAINER_ARGV"], bd.parse_settings(base_env()).trainer_argv)
    self.assertEqual(printed["STEPS"], 3)
    self.assertEqual(printed["ROUTING_TARGETS"], [1.5, 2.0])
    self.assertEqual(printed["LOGP_GATES"], "off")
    self.assertEqual(printed["PROFILE_WINDOW"], "2:1")
    self.assertEqual(printed["ORCH_PACK_PAD_ALIGN"], 1024)

  def test_a_bad_value_is_refused_as_the_pod_run_would(self):
    self.assertEqual(settings_error(self, bd.print_settings, base_env(STEPS="0")),
                     "STEPS='0': must be >= 1")
    self.assertIn("TRAINER_ARGV is not set", settings_error(self, bd.print_settings, {}))


if __name__ == "__main__":
  unittest.main()
