"""Tests of the bench driver's NumPy payload builder (docs/payload-spec.md) at small sizes."""

import math
import unittest

import numpy as np
from typing import Any, Dict

from driver_loader import load_driver

bd = load_driver()

ROWS, TOKENS, LAYERS, TOPK, EXPERTS, VOCAB = 4, 512, 4, 4, 64, 1000


def build(**overrides: Any) -> Any:
  options: Dict[str,
                Any] = dict(rows=ROWS, tokens=TOKENS, vocab=VOCAB, real_len=476, segments=3,
                            real_rows=ROWS, pad_position="end", pad_align=64,
                            targets=[1.0, 1.5, 3.0,
                                     8.0], experts=EXPERTS, advantages="random", seed=7, pad_id=0)
  layout_options = dict(old_logps=True)
  for key in ("old_logps",):
    if key in overrides:
      layout_options[key] = overrides.pop(key)
  options.update(overrides)
  layers = len(options["targets"]) if options["targets"] is not None else LAYERS
  layout = bd.spec_field_layout(options["rows"], options["tokens"], layers, TOPK, **layout_options)
  return bd.build_payload(layout=layout, **options)


def real_mask(built):
  return built.arrays["segment_ids"] > 0


class TrajectoryLayoutTest(unittest.TestCase):
  """Segments are trajectories, prompt then completion, as Tunix's sequence packer writes them
  (pack_bin: completion_mask, advantages and per-token values on completion positions only)."""

  def test_prompts_are_unmasked_and_carry_no_values(self):
    built = build(max_prompt_length=40, segments=4, pad_position="start", pad_align=64)
    arrays = built.arrays
    seg, pos = arrays["segment_ids"], arrays["segment_positions"]
    mask, adv = arrays["completion_mask"], arrays["advantages"]
    logps, routed = arrays["old_per_token_logps"], arrays["routed_experts"]
    prompts = []
    for row in range(ROWS):
      for segment in range(1, 5):
        where = np.flatnonzero(seg[row] == segment)
        self.assertTrue(where.size > 0)
        self.assertTrue((pos[row, where] == np.arange(where.size)).all())  # restart at 0
        run = mask[row, where]
        prompt = int((run == 0).sum())
        prompts.append(prompt)
        # A prompt run of 0s, then the completion's 1s; at least one completion token.
        self.assertTrue((run[:prompt] == 0).all() and (run[prompt:] == 1).all())
        self.assertTrue(1 <= prompt <= min(40, where.size - 1) or where.size == 1)
        self.assertTrue((adv[row, where[:prompt]] == 0).all())
        self.assertTrue((logps[row, where[:prompt]] == 0).all())
        self.assertTrue((logps[row, where[prompt:]] < 0).all())
        self.assertEqual(len(np.unique(adv[row, where[prompt:]])), 1)  # one per trajectory
        self.assertTrue((routed[row, where] >= 0).all())  # prompts are routed too
    self.assertGreater(len(set(prompts)), 3)  # drawn, not fixed
    self.assertEqual(built.real_tokens, ROWS * 476)  # prompts are real tokens

  def test_no_max_prompt_length_means_whole_completions(self):
    built = build()
    real = real_mask(built)
    self.assertTrue((built.arrays["completion_mask"][real] == 1).all())

  def test_per_row_segment_counts(self):
    built = build(segments=[1, 2, 3, 4])
    seg = built.arrays["segment_ids"]
    self.assertEqual([int(seg[row].max()) for row in range(ROWS)], [1, 2, 3, 4])
    self.assertEqual(built.segments, [1, 2, 3, 4])
    self.assertEqual(build(segments=[2, 2, 2, 2]).segments, 2)
    with self.assertRaises(bd.SettingsError):
      build(segments=[1, 2])

  def test_rollout_logps_can_be_the_old_ones(self):
    layout = bd.spec_field_layout(ROWS, TOKENS, 4, TOPK)
    layout["rollout_per_token_logps"] = ((ROWS, TOKENS), np.dtype(np.float32))
    options = dict(rows=ROWS, tokens=TOKENS, vocab=VOCAB, real_len=476, segments=3, real_rows=ROWS,
                   pad_position="end", pad_align=64, targets=[1.0] * 4, experts=EXPERTS,
                   advantages="random", seed=7)
    same = bd.build_payload(layout=layout, rollout_as_old=True, **options).arrays
    np.testing.assert_array_equal(same["rollout_per_token_logps"], same["old_per_token_logps"])
    apart = bd.build_payload(layout=layout, **options).arrays
    self.assertFalse(np.array_equal(apart["rollout_per_token_logps"], apart["old_per_token_logps"]))


class FieldsTest(unittest.TestCase):

  def test_fields_shapes_and_dtypes_are_the_spec(self):
    built = build()
    expected = {
        "completion_ids": ((ROWS, TOKENS), np.int32),
        "completion_mask": ((ROWS, TOKENS), np.float32),
        "segment_ids": ((ROWS, TOKENS), np.int32),
        "segment_positions": ((ROWS, TOKENS), np.int32),
        "advantages": ((ROWS, TOKENS), np.float32),
        "old_per_token_logps": ((ROWS, TOKENS), np.float32),
        "routed_experts": ((ROWS, TOKENS, 4, TOPK), np.int16),
        "prompt_ids": ((ROWS, 0), np.int32),
        "prompt_mask": ((ROWS, 0), np.float32),
    }
    self.assertEqual(set(built.arrays), set(expected))
    for name, (shape, dtype) in expected.items():
      self.assertEqual(built.arrays[name].shape, shape, name)
      self.assertEqual(built.arrays[name].dtype, np.dtype(dtype), name)

  def test_without_old_logps_the_field_is_absent(self):
    built = build(old_logps=False)
    self.assertNotIn("old_per_token_logps", built.arrays)

  def test_real_tokens_and_padding_values(self):
    built = build()
    arrays, real = built.arrays, real_mask(built)
    self.assertEqual(int(real.sum()), ROWS * 476)
    self.assertEqual(built.real_tokens, ROWS * 476)
    ids = arrays["completion_ids"]
    self.assertTrue(((ids[real] >= 1) & (ids[real] < VOCAB)).all())
    self.assertGreater(len(np.unique(ids[real])), 500)  # varied, not one id
    self.assertTrue((ids[~real] == 0).all())
    self.assertTrue((arrays["completion_mask"][real] == 1).all())
    self.assertTrue((arrays["completion_mask"][~real] == 0).all())
    for name in ("segment_positions", "advantages", "old_per_token_logps"):
      self.assertTrue((arrays[name][~real] == 0).all(), name)
    self.assertTrue((arrays["old_per_token_logps"][real] < 0).all())
    self.assertTrue((arrays["routed_experts"][~real] == -1).all())
    self.assertTrue((arrays["routed_experts"][real] >= 0).all())

  def test_real_ids_avoid_the_pad_id(self):
    built = build(vocab=12, pad_id=5)
    ids = built.arrays["completion_ids"][real_mask(built)]
    self.assertFalse((ids == 5).any())
    self.assertTrue((built.arrays["completion_ids"][~real_mask(built)] == 5).all())
    self.assertTrue(((ids >= 1) & (ids < 12)).all())

  def test_extra_per_token_fields_of_a_warmup_layout(self):
    layout = bd.spec_field_layout(2, 128, 1, 2)
    layout["ref_per_token_logps"] = ((2, 128), np.float32)
    layout["sampler_is_weights"] = ((2, 128), np.float32)
    kwargs = dict(rows=2, tokens=128, vocab=50, real_len=100, segments=1, real_rows=2,
                  pad_position="end", pad_align=64, targets=[1.0], experts=4, advantages="zero",
                  seed=0)
    built = bd.build_payload(layout=layout, **kwargs)
    real = real_mask(built)
    self.assertTrue((built.arrays["ref_per_token_logps"][real] < 0).all())
    self.assertTrue((built.arrays["sampler_is_weights"][real] == 1).all())
    self.assertTrue((built.arrays["sampler_is_weights"][~real] == 0).all())
    # A per-token field the builder does not know is an error, not zeros: zeros would train
    # another program than the e2e's.
    layout["mystery"] = ((2, 128), np.float32)
    with self.assertRaisesRegex(
        bd.TunixMissing, r"^the warm-up payload has a per-token field mystery\[2,128\] "
        "float32 the payload builder does not know"):
      bd.build_payload(layout=layout, **kwargs)


class SameIdsAsTheE2eTest(unittest.TestCase):
  """Issue 25 item 8: real ids never read as pad or eos; no completion longer than
  --max_response_length."""

  def test_ids_are_never_pad_or_eos(self):
    layout = bd.spec_field_layout(4, 512, 1, 2, routing=False)
    for pad, eos in ((3, 4), (4, 3), (1, 1), (5, 0), (9, 9)):
      with self.subTest(pad=pad, eos=eos):
        built = bd.build_payload(rows=4, tokens=512, layout=layout, vocab=10, real_len=400,
                                 segments=3, real_rows=4, pad_position="end", pad_align=64,
                                 targets=None, experts=None, advantages="zero", seed=1, pad_id=pad,
                                 eos_id=eos)
        ids = built.arrays["completion_ids"][real_mask(built)]
        self.assertFalse(np.isin(ids, [pad, eos]).any())
        self.assertTrue(((ids >= 1) & (ids < 10)).all())
    with self.assertRaisesRegex(bd.SettingsError, "no id left besides the pad and eos ids"):
      bd.build_payload(rows=1, tokens=64, layout=bd.spec_field_layout(1, 64, 1, 2,
                                                                      routing=False), vocab=3,
                       real_len=10, segments=1, real_rows=1, pad_position="end", pad_align=64,
                       targets=None, experts=None, advantages="zero", seed=1, pad_id=1, eos_id=2)

  def test_no_completion_exceeds_the_response_length(self):
    layout = bd.spec_field_layout(4, 2048, 1, 2, routing=False)

    def completions(max_response_length: int, segments: int = 6) -> Any:
      built = bd.build_payload(rows=4, tokens=2048, layout=layout, vocab=100, real_len=2000,
                               segments=segments, real_rows=4, pad_position="end", pad_align=64,
                               targets=None, experts=None, advantages="zero", seed=2,
                               max_prompt_length=256, max_response_length=max_response_length)
      segment_ids = built.arrays["segment_ids"]
      mask = built.arrays["completion_mask"]
      lengths = [
          int(mask[row][segment_ids[row] == seg].sum())
          for row in range(4)
          for seg in range(1,
                           int(segment_ids[row].max()) + 1)
      ]
      return lengths, built.notes

    unbounded, _ = completions(0)
    self.assertGreater(max(unbounded), 512)  # without the bound, some would be longer
    bounded, notes = completions(512)
    self.assertLessEqual(max(bounded), 512)
    self.assertGreater(min(bounded), 0)
    # A segment longer than prompt + response: the prompt takes the rest, and a note says so.
    bounded, notes = completions(64, segments=2)
    self.assertLessEqual(max(bounded), 64)
    self.assertTrue(
        any("longer than --max_prompt_length 256 + --max_response_length 64" in note
            for note in notes), notes)


class PaddingTest(unittest.TestCase):

  def test_end_padding_sits_after_the_real_tokens(self):
    built = build()
    real = real_mask(built)
    self.assertTrue(real[:, :476].all())
    self.assertFalse(real[:, 476:].any())
    self.assertEqual(built.shift, 0)

  def test_start_moves_every_array_by_the_rounded_trailing_padding(self):
    end = build(pad_position="end", real_len=300, pad_align=64)
    start = build(pad_position="start", real_len=300, pad_align=64)
    shift = (TOKENS - 300) // 64 * 64  # 212 padding tokens -> 192
    self.assertEqual(shift, 192)
    self.assertEqual(start.shift, shift)
    for name, array in end.arrays.items():
      if array.shape[1] == 0:
        continue
      np.testing.assert_array_equal(np.roll(array, shift, axis=1), start.arrays[name], name)
    real = real_mask(start)
    self.assertFalse(real[:, :shift].any())
    self.assertTrue(real[:, shift:shift + 300].all())
    self.assertFalse(real[:, shift + 300:].any())

  def test_pad_align_rounds_down(self):
    start = build(pad_position="start", real_len=300, pad_align=128)
    self.assertEqual(start.shift, 128)
    self.assertTrue(real_mask(start)[:, 128:428].all())

  def test_rows_with_less_padding_than_pad_align_do_not_move(self):
    end = build(pad_position="end", real_len=476, pad_align=64)  # 36 tokens of padding
    start = build(pad_position="start", real_len=476, pad_align=64)
    self.assertEqual(start.shift, 0)
    for name in end.arrays:
      np.testing.assert_array_equal(end.arrays[name], start.arrays[name], name)

  def test_default_real_len_follows_the_regular_padding(self):
    self.assertEqual(bd.default_real_len(65536), 60948)
    self.assertEqual(bd.default_real_len(32768), 32768 - 2294)
    self.assertEqual(bd.default_real_len(1), 1)
    self.assertEqual(bd.start_shift(65536, 60948, "start", 4096), 4096)
    self.assertEqual(bd.start_shift(65536, 60948, "end", 4096), 0)
    self.assertEqual(bd.start_shift(65536, 63000, "start", 4096), 0)


class FinalRowsTest(unittest.TestCase):

  def test_rows_beyond_final_rows_are_all_padding(self):
    regular = build()
    final = build(real_rows=1)
    self.assertEqual(final.real_tokens, 476)
    self.assertFalse(real_mask(final)[1:].any())
    self.assertTrue((final.arrays["routed_experts"][1:] == -1).all())
    self.assertTrue((final.arrays["completion_ids"][1:] == 0).all())
    for name in ("completion_ids", "segment_ids", "segment_positions", "advantages"):
      np.testing.assert_array_equal(final.arrays[name][:1], regular.arrays[name][:1], name)

  def test_final_micro_batch_routing_is_calibrated_on_its_own_tokens(self):
    final = build(real_rows=2)
    routed = final.arrays["routed_experts"][real_mask(final)]
    for layer, target in enumerate([1.0, 1.5, 3.0, 8.0]):
      loads = np.bincount(routed[:, layer, :].ravel(), minlength=EXPERTS)
      self.assertAlmostEqual(loads.max() / (2 * 476 * TOPK / EXPERTS), target, delta=0.01 * target)

  def test_zero_real_rows_is_all_padding(self):
    built = build(real_rows=0)
    self.assertFalse(real_mask(built).any())
    self.assertTrue((built.arrays["routed_experts"] == -1).all())
    self.assertTrue(all(entry.achieved is None for entry in built.routing))


class SegmentsTest(unittest.TestCase):

  def check_segments(self, built, expected_segments, on_grid):
    ids, positions = built.arrays["segment_ids"], built.arrays["segment_positions"]
    for row in range(ids.shape[0]):
      real = np.flatnonzero(ids[row] > 0)
      if real.size == 0:
        continue
      row_ids, row_pos = ids[row, real], positions[row, real]
      self.assertEqual(sorted(np.unique(row_ids)), list(range(1, expected_segments + 1)))
      self.assertTrue((np.diff(row_ids) >= 0).all())  # segments are contiguous, in order
      starts = real[row_pos == 0] - built.shift
      self.assertEqual(len(starts), expected_segments)
      self.assertEqual(starts[0], 0)
      if on_grid:
        self.assertTrue((starts % bd.SEGMENT_ALIGN == 0).all(), starts)
      # positions count up from 0 inside each segment
      for segment in range(1, expected_segments + 1):
        seg_pos = row_pos[row_ids == segment]
        np.testing.assert_array_equal(seg_pos, np.arange(seg_pos.size))

  def test_segment_starts_are_on_the_64_token_grid(self):
    built = build(real_len=476, segments=5)
    self.check_segments(built, 5, on_grid=True)

  def test_segments_differ_between_rows(self):
    built = build(real_len=476, segments=4)
    starts = [
        tuple(np.flatnonzero(built.arrays["segment_positions"][row] == 0)[:4])
        for row in range(ROWS)
    ]
    self.assertGreater(len(set(starts)), 1)

  def test_small_shape_falls_back_to_any_distinct_cut_points(self):
    built = build(tokens=128, real_len=100, segments=6, targets=[1.0], pad_align=64)
    self.check_segments(built, 6, on_grid=False)

  def test_one_token_segments(self):
    built = build(tokens=8, real_len=5, segments=5, targets=[1.0], experts=8)
    self.check_segments(built, 5, on_grid=False)

  def test_segment_cuts_never_oversample(self):
    rng = np.random.default_rng(0)
    for real_len in range(1, 200, 7):
      for segments in (1, 2, 3, real_len):
        cuts = bd.segment_cuts(rng, real_len, min(segments, real_len))
        self.assertEqual(len(np.unique(cuts)), len(cuts))
        self.assertTrue(((cuts > 0) & (cuts < real_len)).all())

  def test_default_segments(self):
    self.assertEqual(bd.default_segments(17, 16, 60948), 16)
    self.assertEqual(bd.default_segments(9, 16, 60948), 8)
    self.assertEqual(bd.default_segments(65537, None, 60948), 952)  # unbounded: grid slots
    self.assertEqual(bd.default_segments(None, None, 100), 1)
    self.assertEqual(bd.default_segments(4, 3, 2), 2)  # never more than the real tokens

  def test_too_many_segments_is_an_error(self):
    with self.assertRaises(bd.SettingsError):
      build(tokens=16, real_len=4, segments=5, targets=[1.0])


class AdvantagesTest(unittest.TestCase):

  def test_one_seeded_value_per_segment(self):
    built = build(segments=4)
    ids, advantages = built.arrays["segment_ids"], built.arrays["advantages"]
    values = []
    for row in range(ROWS):
      for segment in range(1, 5):
        inside = advantages[row][ids[row] == segment]
        self.assertEqual(len(np.unique(inside)), 1)
        values.append(float(inside[0]))
    self.assertEqual(len(set(values)), len(values))  # random normal: all different
    self.assertTrue(any(value < 0 for value in values) and any(value > 0 for value in values))

  def test_zero_advantages(self):
    built = build(advantages="zero")
    self.assertTrue((built.arrays["advantages"] == 0).all())


class RoutingTest(unittest.TestCase):

  def measured(self, built, layer):
    routed = built.arrays["routed_experts"][real_mask(built)][:, layer, :].astype(np.int64)
    loads = np.bincount(routed.ravel(), minlength=EXPERTS)
    return loads, loads.max() / (routed.size / EXPERTS)

  def check_distinct(self, built):
    routed = built.arrays["routed_experts"][real_mask(built)]
    self.assertTrue(((routed >= 0) & (routed < EXPERTS)).all())
    ordered = np.sort(routed, axis=-1)
    self.assertFalse((ordered[..., 1:] == ordered[..., :-1]).any(), "a token repeats an expert")

  def test_targets_are_hit_within_one_percent(self):
    tables = {
        "uniform": [1.0, 1.0, 1.0, 1.0],
        "mild": [1.2, 1.5, 1.8, 2.1],
        "large imbalance": [1.0, 4.0, 10.0, 16.0],  # 16 = experts / topk, the most possible
    }
    for label, table in tables.items():
      built = build(targets=table)
      self.check_distinct(built)
      for layer, target in enumerate(table):
        loads, achieved = self.measured(built, layer)
        self.assertLessEqual(abs(achieved - target), 0.01 * target, f"{label} layer {layer}")
        self.assertAlmostEqual(built.routing[layer].achieved, achieved, places=9)
        self.assertEqual(built.routing[layer].target, target)
      self.assertEqual(built.misses(), [])

  def test_uniform_target_gives_a_flat_load(self):
    built = build(targets=[1.0])
    loads, _ = self.measured(built, 0)
    self.assertLessEqual(loads.max() - loads.min(), 1)

  def test_load_profile_is_smooth_and_decreasing(self):
    built = build(targets=[3.0])
    loads, _ = self.measured(built, 0)
    ordered = np.sort(loads)[::-1]
    self.assertGreater(ordered[1], 0.5 * ordered[0])  # not one hot expert and a flat rest
    self.assertGreater(len(np.unique(ordered)), 10)

  def test_every_row_sees_every_busy_expert(self):
    built = build(targets=[4.0])
    routed = built.arrays["routed_experts"][:, :, 0, :]
    loads, _ = self.measured(built, 0)
    hot = int(np.argmax(loads))
    per_row = [(routed[row] == hot).any(axis=-1).sum() for row in range(ROWS)]
    expected = loads[hot] / ROWS
    for count in per_row:
      self.assertLess(abs(count - expected), 6 * math.sqrt(expected))

  def test_routing_scale(self):
    table = [1.0, 2.0, 5.0, 9.0]
    for scale in (0.0, 0.5, 1.0, 1.5):
      scaled = bd.scale_targets(table, scale)
      self.assertEqual(scaled, [1.0 + scale * (t - 1.0) for t in table])
      built = build(targets=scaled)
      for layer, target in enumerate(scaled):
        _, achieved = self.measured(built, layer)
        self.assertLessEqual(abs(achieved - target), 0.01 * target)
    self.assertEqual(bd.scale_targets(table, 0.0), [1.0] * 4)

  def test_unreachable_target_is_an_error(self):
    with self.assertRaises(bd.SettingsError) as caught:
      build(targets=[1.0, 1.0, 1.0, 16.5])
    self.assertIn("cannot be reached", str(caught.exception))

  def test_target_count_must_match_the_layers(self):
    layout = bd.spec_field_layout(ROWS, TOKENS, 4, TOPK)
    with self.assertRaises(bd.SettingsError) as caught:
      bd.build_payload(rows=ROWS, tokens=TOKENS, layout=layout, vocab=VOCAB, real_len=476,
                       segments=1, real_rows=ROWS, pad_position="end", pad_align=64,
                       targets=[1.0, 2.0], experts=EXPERTS, advantages="random", seed=0)
    self.assertIn("2 values", str(caught.exception))
    self.assertIn("4 decoder layers", str(caught.exception))

  def test_solve_expert_loads(self):
    cases = [(7616, 64, 1904, 1.0), (7616, 64, 1904, 8.0), (7616, 64, 1904, 16.0),
             (100, 8, 50, 1.0), (21, 7, 3, 1.0), (10, 3, 5, 1.2), (5, 1, 5, 1.0)]
    for total, experts, cap, target in cases:
      counts = bd.solve_expert_loads(total, experts, cap, target)
      self.assertEqual(int(counts.sum()), total)
      self.assertLessEqual(int(counts.max()), cap)
      self.assertGreaterEqual(int(counts.min()), 0)
      self.assertEqual(int(counts[0]), int(counts.max()))
      mean = total / experts
      self.assertLessEqual(abs(counts.max() / mean - target),
                           max(0.5 / mean, 0.01 * target) + (math.ceil(mean) - mean) / mean)


class DeterminismTest(unittest.TestCase):

  def test_same_seed_same_payload(self):
    first, second = build(seed=3), build(seed=3)
    for name in first.arrays:
      np.testing.assert_array_equal(first.arrays[name], second.arrays[name], name)

  def test_other_seed_other_payload(self):
    first, second = build(seed=3), build(seed=4)
    for name in ("completion_ids", "routed_experts", "advantages", "segment_ids"):
      self.assertFalse(np.array_equal(first.arrays[name], second.arrays[name]), name)

  def test_a_knob_does_not_reshuffle_the_rest(self):
    random, zero = build(advantages="random"), build(advantages="zero")
    for name in ("completion_ids", "routed_experts", "segment_ids"):
      np.testing.assert_array_equal(random.arrays[name], zero.arrays[name], name)


if __name__ == "__main__":
  unittest.main()
