"""Tests of the bench in the pod (pod.py).

In-process: resolve_plan_inputs, which checks the settings against the shapes Tunix reports.
"""

import types
import unittest

from settings_env import base_env, settings_error
from driver_loader import load_driver

bd = load_driver()


class ResolvePlanInputsTest(unittest.TestCase):
  """The checks that need the shapes Tunix reports (a stand-in for TunixSetup)."""

  def setup(self, **overrides):
    values = dict(rows=64,
                  tokens=65536,
                  num_segments=17,
                  max_segments_per_row=16,
                  routing_shape=(60, 10),
                  experts=512,
                  warmup_segment_counts=None,
                  max_prompt_length=None,
                  max_response_length=None)
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
    # A concrete warm-up payload: each row's own count (the seed's rule).
    counted = self.setup(warmup_segment_counts=[3, 1] * 32)
    resolved = bd.resolve_plan_inputs(self.settings(), counted)
    self.assertEqual(resolved["segments"], [3, 1] * 32)
    self.assertIn("warm-up", resolved["segments_rule"])
    # SEGMENTS wins.
    resolved = bd.resolve_plan_inputs(self.settings(SEGMENTS="5"), seed)
    self.assertEqual((resolved["segments"], resolved["segments_rule"]), (5, "SEGMENTS"))

  def test_defaults_resolve_from_the_shapes(self):
    resolved = bd.resolve_plan_inputs(self.settings(ROUTING_SCALE="0.5"), self.setup())
    self.assertEqual(resolved["real_len"], 60948)
    self.assertEqual(resolved["segments"], 16)
    self.assertEqual(resolved["final_rows"], 64)
    self.assertEqual(resolved["targets"], [1.5] * 60)

  def test_errors(self):
    for env, setup, fragment in [
        ({
            "ROUTING_TARGETS": "2,2"
        }, {}, "ROUTING_TARGETS has 2 values but the model has 60"),
        ({
            "REAL_LEN": "70000"
        }, {}, "exceeds the token budget T=65536"),
        ({
            "SEGMENTS": "17"
        }, {}, "the 16 segments a row may hold"),
        ({
            "SEGMENTS": "9",
            "REAL_LEN": "8"
        }, {}, "exceeds REAL_LEN=8"),
        ({
            "FINAL_ROWS": "65"
        }, {}, "exceeds the rows per micro-batch R=64"),
    ]:
      with self.subTest(env=env):
        self.assertIn(
            fragment,
            settings_error(self, bd.resolve_plan_inputs, self.settings(**env), self.setup(**setup)))
    settings = bd.parse_settings(base_env())
    self.assertIn("ROUTING_TARGETS is required",
                  settings_error(self, bd.resolve_plan_inputs, settings, self.setup()))

  def test_no_routing_shape_needs_no_targets(self):
    resolved = bd.resolve_plan_inputs(bd.parse_settings(base_env()),
                                      self.setup(routing_shape=None, experts=None))
    self.assertIsNone(resolved["targets"])


if __name__ == "__main__":
  unittest.main()
