"""Cross-check of the two payload builders: the bench driver's NumPy builder
(bench_driver.py --dump-payload) and check-payload's C++ builder, at small shapes for several seeds
and settings (layout v2: a segment is a prompt, then its completion).

Every payload of either builder must pass `check-payload verify FILE` with no options (the file's
payload_settings says how it was built), follow the layout rules structurally, and both must lay
rows out alike: same fields, dtypes and shapes, real length, shift, segments per row, padding rows,
and for every field the same zero/non-zero pattern per token class (padding, prompt, completion,
padding rows). Random values, cut points and prompt lengths differ between the builders."""

import json
import os
import tempfile
import unittest

import numpy as np

from cli_common import BIN, DRIVER, PYTHON, assert_all_checks_pass, run_tool

TOOL = os.path.join(BIN, "check-payload")
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
DEFAULT_TABLE = os.path.join(ROOT, "data", "routing", "qwen3.5-397b-a17b.txt")
SETTINGS = "payload_settings"

# Each case: the shape and settings both builders take, in the driver's spelling; `final` marks
# the last micro-batch of a step (the driver's --final --final-rows F, check-payload's
# --final-rows F); `prompt` is --max-prompt-length (0 when absent: every segment is completion).
CASES = [
    dict(seed=0, rows=2, tokens=2048, layers=4, topk=2, experts=16, vocab=1000,
         targets="1,1.5,3,8"),
    dict(seed=1, rows=3, tokens=4096, layers=3, topk=4, experts=32, vocab=5000, segments=5,
         targets="2,4,6", scale="0.5", pad_position="start", pad_align=128),
    dict(seed=2, rows=4, tokens=1024, layers=2, topk=2, experts=8, vocab=300, segments=2,
         targets="1.2,3.9", final=1, advantages="zero", no_old_logps=True),
    dict(seed=3, rows=2, tokens=96, layers=2, topk=3, experts=6, vocab=50, real_len=70, segments=4,
         targets="1,2"),
    dict(seed=4, rows=2, tokens=1024, layers=60, topk=10, experts=512, vocab=248320,
         targets="@" + DEFAULT_TABLE, pad_position="start", pad_align=64),
    dict(seed=5, rows=1, tokens=65536, layers=1, topk=2, experts=4, vocab=248320, segments=3,
         targets="1.8", pad_position="start"),
    # Layout v2 with prompts.
    dict(seed=6, rows=3, tokens=2048, layers=2, topk=2, experts=8, vocab=1000, segments=4,
         prompt=128, targets="1.5,3"),
    dict(seed=7, rows=4, tokens=4096, layers=3, topk=2, experts=16, vocab=5000, real_len=3000,
         segments=3, prompt=512, targets="1,2,4", pad_position="start", pad_align=512, final=2),
    dict(seed=8, rows=2, tokens=96, layers=1, topk=1, experts=4, vocab=50, real_len=70, segments=5,
         prompt=3, targets="1.5", advantages="zero", no_old_logps=True),
    dict(seed=9, rows=2, tokens=8192, layers=2, topk=2, experts=8, vocab=248320, segments=2,
         prompt=8192, targets="1,2", scale="2", pad_position="start", pad_align=256),
]

# Settings both builders record with the same value for a case.
SHARED_SETTINGS = ("rows", "tokens", "layers", "topk", "experts", "vocab", "pad_id", "real_len",
                   "max_prompt_length", "final_rows", "pad_position", "pad_align", "advantages",
                   "seed", "routing_scale", "old_logps")


def build_args(case, driver):
    args = []
    for key in ("rows", "tokens", "layers", "topk", "experts", "vocab", "seed"):
        args += ["--" + key, str(case[key])]
    prompt = str(case.get("prompt", 0))
    args += ["--routing-targets", case["targets"], "--max-prompt-length", prompt]
    for key, flag in (("segments", "--segments"), ("real_len", "--real-len"),
                      ("scale", "--routing-scale"), ("pad_position", "--pad-position"),
                      ("pad_align", "--pad-align"), ("advantages", "--advantages")):
        if key in case:
            args += [flag, str(case[key])]
    if case.get("no_old_logps"):
        args.append("--no-old-logps")
    if "final" in case:
        args += ["--final-rows", str(case["final"])] + (["--final"] if driver else [])
    return args


def run(command, timeout=300):
    return run_tool(command, timeout=timeout)


def load(path):
    with np.load(path) as data:
        return {name: data[name] for name in data.files}


def settings_of(arrays):
    return json.loads(arrays[SETTINGS].tobytes().decode("utf-8"))


def classify(arrays):
    """Per row: the token class of each position, from segment_ids and completion_mask.

    0 padding, 1 prompt (segment token with mask 0), 2 completion (mask 1); a row without a
    segment token is a padding row."""
    segments, mask = arrays["segment_ids"], arrays["completion_mask"]
    classes = np.where(segments == 0, 0, np.where(mask == 0, 1, 2))
    return classes


def zero_pattern(arrays):
    """For every field: which token classes are all zero, all non-zero or mixed, with padding
    rows apart. Routing counts as zero where a token's slots are -1 (no expert). Positions are
    left to check_layout_rules: whether a class holds a 0 depends on each builder's draws."""
    classes = classify(arrays)
    padding_rows = ~(arrays["segment_ids"] > 0).any(axis=1)
    pattern = {}
    for name, values in arrays.items():
        if name in (SETTINGS, "segment_positions") or values.ndim < 2 or \
                values.shape[1] != classes.shape[1]:
            continue
        if name == "routed_experts":
            zero = (values == -1).all(axis=(2, 3))
        elif name == "completion_ids":
            zero = values == settings_of(arrays).get("pad_id", 0)
        else:
            zero = values == 0
        for row_class, rows in (("real row", ~padding_rows), ("padding row", padding_rows)):
            for token_class, label in ((0, "padding"), (1, "prompt"), (2, "completion")):
                where = (classes == token_class) & rows[:, None]
                if not where.any():
                    continue
                picked = zero[where]
                state = "zero" if picked.all() else "non-zero" if not picked.any() else "mixed"
                pattern[(name, row_class, label)] = state
    return pattern


def rows_of(arrays):
    """Per row: (first real position, real tokens, segments)."""
    rows = []
    for row in arrays["segment_ids"]:
        real = np.flatnonzero(row > 0)
        rows.append((int(real[0]), int(real.size), int(row.max())) if real.size else (0, 0, 0))
    return rows


def fields_of(arrays):
    """Name, dtype and shape of every field; payload_settings only by name and dtype (its length
    is its JSON text's)."""
    out = {}
    for name, values in arrays.items():
        shape = (values.ndim, ) if name == SETTINGS else values.shape
        out[name] = (str(values.dtype), shape)
    return out


@unittest.skipUnless(os.path.exists(DRIVER), f"the bench driver is missing: {DRIVER}")
class PayloadCrossCheckTest(unittest.TestCase):

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.tmp.cleanup()

    # --- builders --------------------------------------------------------------------------

    def dump_with_driver(self, case, name):
        out = os.path.join(self.tmp.name, name)
        code, stdout, stderr = run([PYTHON, DRIVER, "--dump-payload", out] +
                                   build_args(case, driver=True))
        self.assertEqual(code, 0, f"driver failed for {case}: {stdout}{stderr}")
        return out

    def build_with_tool(self, case, name):
        out = os.path.join(self.tmp.name, name)
        code, stdout, stderr = run([TOOL, "build", "-q", "-o", out] + build_args(case, False))
        self.assertEqual(code, 0, f"check-payload build failed for {case}: {stdout}{stderr}")
        return out

    # --- what every payload must satisfy ---------------------------------------------------

    def verify_without_options(self, path, case):
        """Settings come from the file's payload_settings: no option is repeated."""
        code, stdout, stderr = run([TOOL, "verify", path])
        self.assertEqual(code, 0, f"verify failed for {case} on {path}:\n{stdout}{stderr}")
        assert_all_checks_pass(self, stdout)
        self.assertIn("settings from the file (payload_settings)", stdout)
        self.assertNotIn("settings from options", stdout)

    def check_settings(self, arrays, case, builder):
        settings = settings_of(arrays)
        self.assertEqual(settings["format"], "rtb.payload-settings/1")
        self.assertEqual(settings["builder"], builder)
        expected = {
            "rows": case["rows"],
            "tokens": case["tokens"],
            "layers": case["layers"],
            "topk": case["topk"],
            "experts": case["experts"],
            "vocab": case["vocab"],
            "max_prompt_length": case.get("prompt", 0),
            "pad_position": case.get("pad_position", "end"),
            "advantages": case.get("advantages", "random"),
            "seed": case["seed"],
            "old_logps": not case.get("no_old_logps", False),
            "final_rows": case.get("final"),
        }
        if "pad_align" in case:
            expected["pad_align"] = case["pad_align"]
        if "real_len" in case:
            expected["real_len"] = case["real_len"]
        for key, value in expected.items():
            self.assertEqual(settings[key], value, f"{builder}: {key}")
        # segments: an int for every row, or one per row; either way the rows' counts.
        segments = settings["segments"]
        counts = [row[2] for row in rows_of(arrays) if row[1] > 0]
        if isinstance(segments, list):
            self.assertEqual([n for n in segments[:len(counts)]], counts, builder)
        else:
            self.assertTrue(all(n == segments for n in counts), (builder, segments, counts))
        self.assertIn(settings["segments_rule"], ("option", "default"))
        targets = settings["routing_targets"]
        self.assertIsNotNone(targets, builder)
        self.assertEqual(len(targets), case["layers"], builder)
        self.assertTrue(all(t >= 1 for t in targets), builder)

    def check_layout_rules(self, arrays, case, builder):
        """The layout v2 rules, structurally (prompt lengths are each builder's own draws)."""
        limit = case.get("prompt", 0)
        mask, segments = arrays["completion_mask"], arrays["segment_ids"]
        positions, advantages = arrays["segment_positions"], arrays["advantages"]
        logps = arrays.get("old_per_token_logps")
        routed = arrays["routed_experts"]
        for row in range(segments.shape[0]):
            for segment in range(1, int(segments[row].max()) + 1):
                where = np.flatnonzero(segments[row] == segment)
                what = f"{builder} {case['seed']}: row {row}, segment {segment}"
                self.assertEqual(where[-1] - where[0] + 1, where.size, what)  # one run
                self.assertTrue((positions[row, where] == np.arange(where.size)).all(), what)
                prompt = int(np.argmax(mask[row, where] != 0)) if mask[row, where].any() else -1
                self.assertGreaterEqual(prompt, 0, f"{what}: no completion token")
                self.assertTrue((mask[row, where[:prompt]] == 0).all(), what)
                self.assertTrue((mask[row, where[prompt:]] == 1).all(), what)
                if limit == 0 or where.size == 1:
                    self.assertEqual(prompt, 0, what)
                else:
                    self.assertGreaterEqual(prompt, 1, what)
                    self.assertLessEqual(prompt, min(limit, where.size - 1), what)
                self.assertTrue((advantages[row, where[:prompt]] == 0).all(), what)
                self.assertEqual(np.unique(advantages[row, where[prompt:]]).size, 1, what)
                if logps is not None:
                    self.assertTrue((logps[row, where[:prompt]] == 0).all(), what)
                    self.assertTrue((logps[row, where[prompt:]] < 0).all(), what)
                self.assertTrue((routed[row, where] >= 0).all(), what)  # prompt tokens routed
        padding = segments == 0
        self.assertTrue((mask[padding] == 0).all(), builder)
        self.assertTrue((routed[padding] == -1).all(), builder)

    def check_payload(self, path, case, builder):
        self.verify_without_options(path, case)
        arrays = load(path)
        self.check_settings(arrays, case, builder)
        self.check_layout_rules(arrays, case, builder)
        return arrays

    # --- tests -----------------------------------------------------------------------------

    def test_cpp_payloads_follow_the_layout_and_verify_without_options(self):
        for index, case in enumerate(CASES):
            with self.subTest(case=case):
                self.check_payload(self.build_with_tool(case, f"cpp{index}.npz"), case,
                                   "check-payload")

    def test_driver_payloads_follow_the_layout_and_verify_without_options(self):
        # Needs the driver's --max-prompt-length and its payload_settings member.
        for index, case in enumerate(CASES):
            with self.subTest(case=case):
                self.check_payload(self.dump_with_driver(case, f"driver{index}.npz"), case,
                                   "bench_driver")

    def test_both_builders_lay_rows_out_alike(self):
        for index, case in enumerate(CASES):
            with self.subTest(case=case):
                driver = load(self.dump_with_driver(case, f"d{index}.npz"))
                cpp = load(self.build_with_tool(case, f"c{index}.npz"))
                self.assertEqual(fields_of(driver), fields_of(cpp))
                self.assertEqual(rows_of(driver), rows_of(cpp))
                # Same zero/non-zero pattern of every field per token class: mask zero exactly
                # on prompt and padding, values only on completions, routing on every segment
                # token, and so on.
                self.assertEqual(zero_pattern(driver), zero_pattern(cpp))
                recorded_driver, recorded_cpp = settings_of(driver), settings_of(cpp)
                for key in SHARED_SETTINGS:
                    self.assertEqual(recorded_driver[key], recorded_cpp[key], key)
                np.testing.assert_allclose(recorded_driver["routing_targets"],
                                           recorded_cpp["routing_targets"], rtol=1e-12)

    def test_a_broken_driver_payload_fails_verify(self):
        # The cross-check can fail: a driver payload with one expert repeated is caught.
        case = CASES[0]
        path = self.dump_with_driver(case, "broken.npz")
        arrays = load(path)
        routed = arrays["routed_experts"].copy()
        routed[1, 3, 2, 1] = routed[1, 3, 2, 0]
        arrays["routed_experts"] = routed
        np.savez(path, **arrays)
        code, stdout, _ = run([TOOL, "verify", path])
        self.assertEqual(code, 1)
        self.assertIn("routed_experts[row 1, token 3, layer 2]", stdout)

    def test_a_prompt_token_with_loss_fails_verify(self):
        # The layout rules can fail too: a C++ payload whose prompt token carries an advantage.
        case = CASES[6]
        path = self.build_with_tool(case, "prompt.npz")
        arrays = load(path)
        advantages = arrays["advantages"].copy()
        advantages[0, 0] = 0.5  # row 0 starts with segment 1's prompt
        arrays["advantages"] = advantages
        np.savez(path, **arrays)
        code, stdout, _ = run([TOOL, "verify", path])
        self.assertEqual(code, 1, stdout)
        self.assertIn("advantages[row 0, token 0] = 0.5 on a prompt token", stdout)


if __name__ == "__main__":
    unittest.main()
