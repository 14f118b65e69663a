"""CLI tests of check-payload: runs the built tool (build, verify, measure, tiles) and checks its
stdout, stderr, exit codes and files, reading the payloads back with NumPy."""

import json
import os
import re
import subprocess
import tempfile
import unittest
import xml.etree.ElementTree as ElementTree
import zipfile

import numpy as np

from cli_common import BIN, PYTHON, TESTDATA, assert_all_checks_pass, assert_bad_input, run_tool

TOOL = os.path.join(BIN, "check-payload")

SMALL = [
    "--rows", "3", "--tokens", "1024", "--layers", "4", "--topk", "2", "--experts", "16", "--vocab",
    "1000", "--real-len", "900", "--segments", "3", "--seed", "5", "--routing-targets", "1,1.5,3,8"
]
SMALL_VERIFY = ["--experts", "16", "--vocab", "1000", "--routing-targets", "1,1.5,3,8"]

SPEC = {
    "completion_ids": ("int32", 2),
    "completion_mask": ("float32", 2),
    "segment_ids": ("int32", 2),
    "segment_positions": ("int32", 2),
    "advantages": ("float32", 2),
    "old_per_token_logps": ("float32", 2),
    "routed_experts": ("int16", 4),
    "prompt_ids": ("int32", 2),
    "prompt_mask": ("float32", 2),
}


def run(args, timeout=120):
    return run_tool(TOOL, args, timeout=timeout)


def max_rss_kib(args):
    """Peak RSS of the tool run with `args`, measured in a fresh wrapper process."""
    code = ("import resource, subprocess, sys\n"
            "r = subprocess.run(sys.argv[1:], capture_output=True)\n"
            "print(r.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n")
    out = subprocess.run([PYTHON, "-c", code, TOOL] + args, capture_output=True, text=True,
                         timeout=300, check=True).stdout.split()
    return int(out[0]), int(out[1])


class CheckPayloadTest(unittest.TestCase):

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def path(self, name):
        return os.path.join(self.dir, name)

    def build(self, name="p.npz", extra=()):
        out = self.path(name)
        code, stdout, stderr = run(["build"] + SMALL + list(extra) + ["-o", out])
        self.assertEqual(code, 0, stdout + stderr)
        return out

    def rewrite(self, source, target, **changes):
        """Copies an npz, replacing or dropping (value None) arrays, as numpy.savez writes it."""
        with np.load(source) as data:
            arrays = {name: data[name] for name in data.files}
        for name, value in changes.items():
            if value is None:
                del arrays[name]
            else:
                arrays[name] = value
        np.savez(target, **arrays)
        return target

    # --- build -------------------------------------------------------------------------------

    def test_build_writes_every_field_numpy_reads(self):
        out = self.build()
        with np.load(out) as data:
            # payload_settings: how the file was built (layout v2 adds it to every file).
            self.assertEqual(sorted(data.files), sorted(list(SPEC) + ["payload_settings"]))
            for name, (dtype, ndim) in SPEC.items():
                self.assertEqual(str(data[name].dtype), dtype, name)
                self.assertEqual(data[name].ndim, ndim, name)
            self.assertEqual(data["routed_experts"].shape, (3, 1024, 4, 2))
            self.assertEqual(data["prompt_ids"].shape, (3, 0))
            mask = data["completion_mask"]
            self.assertEqual(int(mask.sum()), 3 * 900)
            routed = data["routed_experts"]
            real = routed[:, :900]
            self.assertTrue((real[..., 0] != real[..., 1]).all())  # distinct experts
            self.assertTrue(((real >= 0) & (real < 16)).all())
            self.assertTrue((routed[:, 900:] == -1).all())
            counts = np.bincount(real[:, :, 3, :].ravel(), minlength=16)
            self.assertAlmostEqual(counts.max() / counts.mean(), 8.0, delta=0.08)
            ids = data["completion_ids"][:, :900]
            self.assertTrue(((ids >= 1) & (ids < 1000)).all())
            self.assertTrue((data["old_per_token_logps"][:, :900] < 0).all())
        with zipfile.ZipFile(out) as archive:
            self.assertIsNone(archive.testzip())  # every CRC matches
            self.assertTrue(all(i.compress_type == zipfile.ZIP_STORED for i in archive.infolist()))

    def test_build_prints_target_vs_achieved_and_checks(self):
        code, stdout, stderr = run(["build"] + SMALL)
        self.assertEqual(code, 0, stderr)
        self.assertIn("payload: 3 rows x 1024 tokens, 4 layers, top-2 of 16 experts", stdout)
        assert_all_checks_pass(self, stdout)
        self.assertRegex(stdout, r"\n\s+3\s+8\.0000\s+8\.0000\s+\+0\.00%")
        self.assertIn("not written", stdout)

    def test_build_is_deterministic_for_a_seed_and_thread_count(self):
        one = self.build("one.npz", ["--threads", "1"])
        three = self.build("three.npz", ["--threads", "3"])
        with open(one, "rb") as a, open(three, "rb") as b:
            self.assertEqual(a.read(), b.read())
        other = self.path("other.npz")
        code, _, _ = run(["build"] + SMALL + ["--seed", "6", "-o", other])
        self.assertEqual(code, 0)
        with np.load(one) as a, np.load(other) as b:
            self.assertFalse((a["routed_experts"] == b["routed_experts"]).all())

    def test_build_json_and_svg(self):
        svg = self.path("loads.svg")
        code, stdout, stderr = run(["build"] + SMALL + ["--json", "--ep", "2", "--svg", svg])
        self.assertEqual(code, 0, stderr)
        report = json.loads(stdout)
        self.assertEqual(report["command"], "build")
        self.assertTrue(report["passed"])
        self.assertEqual(report["targets"], [1, 1.5, 3, 8])
        self.assertEqual(len(report["layers"]), 4)
        self.assertEqual(len(report["layers"][0]["rank_loads"]), 2)
        self.assertEqual([c["name"] for c in report["checks"]][-1], "routing_targets")
        root = ElementTree.parse(svg).getroot()
        self.assertTrue(root.tag.endswith("svg"))
        self.assertGreater(len(root.findall(".//{http://www.w3.org/2000/svg}circle")), 3)

    def test_build_warnings_are_diagnostics_on_stderr_and_in_json(self):
        too_many = ["build"] + SMALL + ["--segments", "1000", "-o", self.path("p.npz")]
        message = "1000 segments do not fit in 900 real tokens; using 900"
        code, stdout, stderr = run(too_many + ["--json"])
        self.assertEqual(code, 0, stderr)
        report = json.loads(stdout)
        self.assertEqual(report["warnings"], [message])
        self.assertEqual(report["diagnostics"],
                         [{"severity": "warning", "where": None, "message": message}])
        self.assertEqual(stderr, "check-payload: warning: " + message + "\n")
        self.assertEqual(run(too_many + ["--json", "-q"])[2], "")

    def test_build_to_stdout_puts_the_report_on_stderr(self):
        proc = subprocess.run([TOOL, "build"] + SMALL + ["-o", "-"], capture_output=True,
                              timeout=60)
        self.assertEqual(proc.returncode, 0)
        self.assertTrue(proc.stdout.startswith(b"PK\x03\x04"))
        assert_all_checks_pass(self, proc.stderr.decode("utf-8"))
        target = self.path("stdout.npz")
        with open(target, "wb") as f:
            f.write(proc.stdout)
        with np.load(target) as data:
            self.assertEqual(data["routed_experts"].shape, (3, 1024, 4, 2))

    def test_default_table_for_sixty_layers(self):
        out = self.path("q.npz")
        code, stdout, stderr = run([
            "build", "--rows", "1", "--tokens", "4096", "--layers", "60", "--topk", "10",
            "--experts", "512", "-o", out
        ])
        self.assertEqual(code, 0, stdout + stderr)
        row = re.search(r"\n\s+0\s+(\S+)\s+(\S+)\s+", stdout)
        assert row is not None, stdout
        self.assertEqual(row.group(1), "3.9452")
        self.assertAlmostEqual(float(row.group(2)), 3.9452, delta=0.0395)
        code, stdout, _ = run(["verify", out])
        self.assertEqual(code, 0, stdout)
        self.assertIn("targets: qwen3.5-397b-a17b.txt (built in)", stdout)
        code, _, stderr = run([
            "build", "--rows", "1", "--tokens", "64", "--layers", "4", "--topk", "2", "--experts",
            "8"
        ])
        self.assertEqual(code, 2)
        self.assertIn("the built-in routing table is for 60 layers", stderr)

    def test_pad_start_final_rows_and_zero_advantages(self):
        out = self.build("s.npz", [
            "--pad-position", "start", "--pad-align", "64", "--final-rows", "2", "--advantages",
            "zero", "--no-old-logps"
        ])
        with np.load(out) as data:
            self.assertNotIn("old_per_token_logps", data.files)
            segments = data["segment_ids"]
            self.assertTrue((segments[0, :64] == 0).all())  # 124 padding tokens: moved by 64
            self.assertEqual(segments[0, 64], 1)
            self.assertTrue((segments[2] == 0).all())  # final micro-batch: row 2 is padding
            self.assertTrue((data["advantages"] == 0).all())
        layout = ["--pad-align", "64", "--pad-position", "start", "--advantages", "zero"]
        code, stdout, _ = run(["verify", out] + layout + SMALL_VERIFY)
        self.assertEqual(code, 0, stdout)
        self.assertIn("padding rows: 1", stdout)
        self.assertIn("pad position: start", stdout)
        code, stdout, _ = run(["verify", out, "--pad-align", "64", "--pad-position", "end"] +
                              SMALL_VERIFY)
        self.assertEqual(code, 1)
        self.assertIn("expected 0 (pad position end)", stdout)

    def test_bad_build_options_exit_2_with_one_line(self):
        for extra, message in [
            (["--pad-align", "100"], "--pad-align must be a positive multiple of the segment"),
            (["--real-len", "2000"], "--real-len must be in 1..1024"),
            (["--routing-scale", "-1"], "routing scale -1 is invalid"),
            (["--routing-targets", "1,2,3"], "3 targets but the model has 4 layers"),
            (["--routing-targets", "1,2,3,9"], "layer 3: routing target 9 cannot be reached"),
        ]:
            code, stdout, stderr = run(["build"] + SMALL + extra)
            self.assertEqual(code, 2, extra)
            self.assertEqual(stdout, "")
            self.assertEqual(len(stderr.strip().splitlines()), 1, stderr)
            self.assertTrue(stderr.startswith("check-payload: "), stderr)
            self.assertIn(message, stderr)
        table = self.path("bad.txt")
        with open(table, "w") as f:
            f.write("# targets\n1.5\n2\nx\n1\n")
        code, _, stderr = run(["build"] + SMALL + ["--routing-targets", table])
        self.assertEqual(code, 2)
        self.assertIn(f"{table}:4: 'x' is not a number", stderr)

    def test_a_long_inline_table_is_read_as_a_table(self):
        # Over 255 characters, the longest file name: asking the file system whether such a
        # string names a file failed with "File name too long" instead of reading the numbers.
        targets = ",".join(["1.0000000001"] * 59 + ["1"])
        self.assertGreater(len(targets), 255)
        out = self.path("long.npz")
        code, stdout, stderr = run([
            "build", "--rows", "1", "--tokens", "256", "--layers", "60", "--topk", "1", "--experts",
            "2", "--routing-targets", targets, "-o", out
        ])
        self.assertEqual(code, 0, stdout + stderr)
        code, stdout, stderr = run(["verify", out, "--routing-targets", targets])
        self.assertEqual(code, 0, stdout + stderr)
        self.assertIn("--routing-targets (inline)", stdout)

    def test_build_records_its_settings_in_the_file(self):
        out = self.build("rec.npz", [
            "--max-prompt-length", "40", "--pad-position", "start", "--pad-align", "64",
            "--final-rows", "2"
        ])
        with np.load(out) as data:
            member = data["payload_settings"]
            self.assertEqual(str(member.dtype), "uint8")
            self.assertEqual(member.ndim, 1)
            settings = json.loads(member.tobytes().decode("utf-8"))
        self.assertEqual(settings["format"], "rtb.payload-settings/1")
        self.assertEqual(settings["builder"], "check-payload")
        self.assertRegex(settings["version"], r"^\d+\.\d+")
        expected = {
            "rows": 3, "tokens": 1024, "layers": 4, "topk": 2, "experts": 16, "vocab": 1000,
            "pad_id": 0, "real_len": 900, "segments": 3, "segments_rule": "option",
            "max_prompt_length": 40, "final_rows": 2, "pad_position": "start", "pad_align": 64,
            "advantages": "random", "seed": 5, "routing_targets": [1, 1.5, 3, 8],
            "routing_scale": 1, "old_logps": True
        }
        for key, value in expected.items():
            self.assertEqual(settings[key], value, key)
        self.assertIn("inline", settings["routing_targets_source"])
        default = self.path("default.npz")
        code, stdout, stderr = run([
            "build", "--rows", "1", "--tokens", "256", "--layers", "1", "--topk", "1", "--experts",
            "2", "--routing-targets", "1", "-o", default
        ])
        self.assertEqual(code, 0, stdout + stderr)
        with np.load(default) as data:
            settings = json.loads(data["payload_settings"].tobytes())
        self.assertEqual((settings["segments"], settings["segments_rule"]), (1, "default"))
        self.assertEqual((settings["max_prompt_length"], settings["final_rows"]), (0, None))

    def test_prompts_lead_each_segment(self):
        out = self.build("prompts.npz", ["--max-prompt-length", "100"])
        with np.load(out) as data:
            mask, segments = data["completion_mask"], data["segment_ids"]
            positions, advantages = data["segment_positions"], data["advantages"]
            logps, routed = data["old_per_token_logps"], data["routed_experts"]
        for row in range(3):
            for segment in range(1, 4):
                where = np.flatnonzero(segments[row] == segment)
                prompt = int((mask[row, where] == 0).sum())
                self.assertGreaterEqual(prompt, 1)
                self.assertLessEqual(prompt, min(100, where.size - 1))
                self.assertTrue((mask[row, where[:prompt]] == 0).all())
                self.assertTrue((mask[row, where[prompt:]] == 1).all())
                self.assertTrue((positions[row, where] == np.arange(where.size)).all())
                self.assertTrue((advantages[row, where[:prompt]] == 0).all())
                self.assertEqual(len(set(advantages[row, where[prompt:]].tolist())), 1)
                self.assertTrue((logps[row, where[:prompt]] == 0).all())
                self.assertTrue((logps[row, where[prompt:]] < 0).all())
                self.assertTrue((routed[row, where] >= 0).all())  # routing on the prompt too
        code, stdout, _ = run(["verify", out])
        self.assertEqual(code, 0, stdout)
        code, stdout, _ = run(["verify", out, "--max-prompt-length", "0"])
        self.assertEqual(code, 1, stdout)
        self.assertIn("mask             FAILED", stdout)
        code, _, stderr = run(["build"] + SMALL + ["--max-prompt-length", "-1"])
        self.assertEqual(code, 2)
        self.assertIn("--max-prompt-length must be at least 0", stderr)

    # --- verify ------------------------------------------------------------------------------

    def test_verify_uses_the_recorded_settings(self):
        # The issue: a file built with --pad-align 512 failed verify unless the options were
        # repeated. Now the file says how it was built.
        out = self.path("align.npz")
        code, stdout, stderr = run([
            "build", "--rows", "2", "--tokens", "4096", "--layers", "2", "--topk", "2", "--experts",
            "8", "--vocab", "1000", "--real-len", "3000", "--routing-targets", "1.5,3",
            "--routing-scale", "0.5", "--pad-position", "start", "--pad-align", "512",
            "--advantages", "zero", "--max-prompt-length", "64", "-o", out
        ])
        self.assertEqual(code, 0, stdout + stderr)
        code, stdout, stderr = run(["verify", out])
        self.assertEqual(code, 0, stdout + stderr)
        assert_all_checks_pass(self, stdout)
        self.assertIn("pad position: start", stdout)
        self.assertIn(
            "settings from the file (payload_settings): experts 8, vocab 1000, "
            "pad_position start, pad_align 512, advantages zero, max_prompt_length 64", stdout)
        self.assertIn("(recorded in payload_settings)", stdout)
        code, stdout, _ = run(["verify", out, "--json"])
        report = json.loads(stdout)
        self.assertEqual(report["settings"]["pad_align"], {"value": "512", "from": "file"})
        self.assertEqual(report["targets"], [1.25, 2])  # recorded scaled
        # Options override the record, and the output says which came from where.
        code, stdout, _ = run(["verify", out, "--pad-position", "end", "--advantages", "random"])
        self.assertEqual(code, 1, stdout)
        self.assertIn("settings from options: pad_position end, advantages random", stdout)
        self.assertIn("expected 0 (pad position end)", stdout)
        code, stdout, _ = run(["verify", out, "--routing-targets", "1.5,3"])
        self.assertEqual(code, 0, stdout)  # the recorded scale 0.5 applies to the given table
        self.assertIn("targets: --routing-targets (inline), scaled by 0.5", stdout)
        code, stdout, _ = run(["verify", out, "--routing-scale", "1"])
        self.assertEqual(code, 1, stdout)  # the recorded table re-scaled to 1: 1.5 and 3
        self.assertIn("routing_targets  FAILED", stdout)

    def test_verify_without_settings_infers_what_it_can(self):
        # An older file (no payload_settings) with uniform routing at 60 layers: no table is
        # applied that nobody asked for, experts come from the ids, pad_align is not required.
        out = self.path("uniform.npz")
        code, stdout, stderr = run([
            "build", "--rows", "1", "--tokens", "2048", "--layers", "60", "--topk", "10",
            "--experts", "512", "--real-len", "1000", "--routing-targets", ",".join(["1"] * 60),
            "--pad-position", "start", "--pad-align", "512", "-o", out
        ])
        self.assertEqual(code, 0, stdout + stderr)
        old = self.rewrite(out, self.path("old.npz"), payload_settings=None)
        code, stdout, stderr = run(["verify", old])
        self.assertEqual(code, 0, stdout + stderr)
        self.assertIn("targets: none checked", stdout)
        self.assertIn("routing_targets  skipped", stdout)
        self.assertIn("experts: 512, inferred from the largest expert id + 1", stdout)
        self.assertIn("settings inferred from the arrays: experts 512", stdout)
        self.assertIn("pad position: start", stdout)
        # The note is a diagnostic in --json, beside `notes`, and logged only with -v.
        code, stdout, stderr = run(["verify", old, "--json"])
        self.assertEqual(code, 0, stderr)
        report = json.loads(stdout)
        self.assertIn(
            "experts: 512, inferred from the largest expert id + 1 (give --experts E "
            "for the model's count; loads and max/mean use this many)", report["notes"])
        self.assertEqual(report["diagnostics"],
                         [{"severity": "note", "where": None, "message": note}
                          for note in report["notes"]])
        self.assertNotIn("inferred", stderr)
        code, _, stderr = run(["verify", old, "-v"])
        self.assertIn("check-payload: info: experts: 512, inferred", stderr)
        # A given table is still checked.
        code, stdout, _ = run(["verify", old, "--routing-targets", ",".join(["2"] * 60)])
        self.assertEqual(code, 1, stdout)
        code, stdout, _ = run(["verify", old, "--pad-align", "4096"])
        self.assertEqual(code, 1, stdout)
        self.assertIn("pad_align 4096", stdout)

    def test_verify_rejects_a_damaged_settings_member(self):
        out = self.build()
        for value, message in [
            (np.frombuffer(b"{not json", np.uint8), "payload_settings is not valid JSON"),
            (np.frombuffer(b'{"format": "x/1"}', np.uint8), "format 'x/1'"),
            (np.zeros((2, 2), np.uint8), "expected a 1-D uint8 array of JSON"),
        ]:
            bad = self.rewrite(out, self.path("bad.npz"), payload_settings=value)
            code, stdout, stderr = run(["verify", bad])
            self.assertEqual(code, 2, stdout + stderr)
            self.assertEqual(len(stderr.strip().splitlines()), 1, stderr)
            self.assertTrue(stderr.startswith("check-payload: "), stderr)
            self.assertIn(message, stderr)

    def test_verify_json_of_a_good_payload(self):
        out = self.build()
        code, stdout, stderr = run(["verify", out, "--json", "--ep", "2"] + SMALL_VERIFY)
        self.assertEqual(code, 0, stderr)
        report = json.loads(stdout)
        self.assertTrue(report["passed"])
        self.assertEqual(report["real_tokens"], 2700)
        self.assertEqual(report["layer_count"], 4)
        self.assertEqual(report["targets_source"], "--routing-targets (inline)")
        self.assertEqual(len(report["checks"]), 12)
        self.assertAlmostEqual(report["layers"][2]["max_over_mean"], 3.0, delta=0.03)

    def test_verify_names_each_failure(self):
        out = self.build()
        with np.load(out) as data:
            routed = data["routed_experts"].copy()
            advantages = data["advantages"].copy()
            ids = data["completion_ids"].copy()
        routed[1, 10, 2, 1] = routed[1, 10, 2, 0]
        routed[2, 20, 0, 0] = 99
        advantages[0, 5] = np.nan
        ids[2, 950] = 7  # a token id on padding
        bad = self.rewrite(out, self.path("bad.npz"), routed_experts=routed, advantages=advantages,
                           completion_ids=ids)
        code, stdout, stderr = run(["verify", bad] + SMALL_VERIFY)
        self.assertEqual(code, 1, stderr)
        self.assertIn("routing          FAILED (2 failures)", stdout)
        self.assertIn("routed_experts[row 1, token 10, layer 2]", stdout)
        self.assertIn("appears twice", stdout)
        self.assertIn("routed_experts[row 2, token 20, layer 0] = [99, ", stdout)
        self.assertIn("advantages[row 0, token 5] = nan", stdout)
        self.assertIn("completion_ids[row 2, token 950] = 7 on padding", stdout)

    def test_verify_missing_field_wrong_dtype_and_shape(self):
        out = self.build()
        with np.load(out) as data:
            ids = data["completion_ids"].astype(np.int64)
        prompt_ids = np.zeros((3, 2), np.int32)
        cases = [
            ({"prompt_mask": None}, "fields           FAILED", "prompt_mask: missing"),
            ({"completion_ids": ids}, "dtypes           FAILED", "completion_ids: int64"),
            ({"prompt_ids": prompt_ids}, "shapes           FAILED",
             "prompt_ids: shape [3, 2], expected [3, 0]"),
        ]
        for changes, line, message in cases:
            bad = self.rewrite(out, self.path("bad.npz"), **changes)
            code, stdout, stderr = run(["verify", bad] + SMALL_VERIFY)
            self.assertEqual(code, 1, stderr)
            self.assertIn(line, stdout)
            self.assertIn(message, stdout)

    def test_unreadable_inputs_exit_2_with_one_line(self):
        out = self.build()
        with open(out, "rb") as f:
            whole = f.read()
        truncated = self.path("truncated.npz")
        with open(truncated, "wb") as f:
            f.write(whole[:len(whole) // 2])
        text = os.path.join(TESTDATA, "routing_qwen3-30b-a3b-base_max_over_mean.csv")
        compressed = os.path.join(TESTDATA, "payload_numpy_compressed.npz")
        for path, message in [
            (truncated, "not a complete zip archive"),
            (text, "not a NumPy .npy or .npz file"),
            (compressed, "member 'i32.npy' is compressed"),
            (self.path("missing.npz"), "cannot open"),
            (self.dir, "is a directory"),
        ]:
            for command in (["verify", path], ["measure", path, "--ep", "1"]):
                code, stdout, stderr = run(command)
                self.assertEqual(code, 2, (command, stdout, stderr))
                self.assertEqual(len(stderr.strip().splitlines()), 1, stderr)
                self.assertIn(message, stderr)

    def test_an_npz_that_is_no_bench_payload_is_bad_input(self):
        """A real npz someone else wrote (testdata/SOURCES.md), without routed_experts: verify
        exits 2 with one line naming the members it has, as measure does, rather than running
        every check (issue 28, item 4)."""
        path = os.path.join(TESTDATA, "npz_tahoma_test.npz")
        members = ("(members: int32_vec, float32_vec, int64_vec, float64_vec, int32_mat, "
                   "float32_mat, int64_mat, float64_mat, int32_tensor, float32_tensor, meta.yml)")
        for command, consequence in [
            (["verify", path], "not a bench payload (docs/payload-spec.md)"),
            (["verify", path, "--json"] + SMALL_VERIFY, "not a bench payload"),
            (["measure", path, "--ep", "1"], "name the routed-experts array with --member"),
        ]:
            with self.subTest(command=command):
                assert_bad_input(
                    self, "check-payload", run(command),
                    f"check-payload: {path}: no member 'routed_experts' {members}; "
                    f"{consequence}")
        # measure reads the member it is told: its int32 [2, 2, 2] array as [N, L, K].
        code, stdout, stderr = run(
            ["measure", path, "--ep", "1", "--experts", "16", "--member", "int32_tensor"])
        self.assertEqual(code, 0, stderr)
        self.assertIn("int32 [2, 2, 2]", stdout)

    # --- measure -----------------------------------------------------------------------------

    def test_measure_writes_a_table_build_reads_back(self):
        out = self.build()
        with np.load(out) as data:
            routed = data["routed_experts"]
        routed_file = self.path("routed.npy")
        np.save(routed_file, routed.reshape(-1, 4, 2).astype(np.int32))  # [N, L, K] int32
        table = self.path("table.txt")
        code, stdout, stderr = run(
            ["measure", routed_file, "--ep", "2", "--experts", "16", "-o", table])
        self.assertEqual(code, 0, stderr)
        self.assertIn("int32 [3072, 4, 2]", stdout)
        self.assertIn(f"target table written to {table}", stdout)
        with open(table) as f:
            lines = [line for line in f if not line.startswith("#")]
        self.assertEqual(len(lines), 4)
        self.assertTrue(lines[3].startswith("3,8"))
        again = self.path("again.npz")
        code, stdout, _ = run(["build"] + SMALL[:-2] + ["--routing-targets", table, "-o", again])
        self.assertEqual(code, 0, stdout)
        code, stdout, _ = run([
            "verify", again, "--experts", "16", "--vocab", "1000", "--routing-targets", "@" + table
        ])
        self.assertEqual(code, 0, stdout)

    def test_measure_takes_experts_from_the_file(self):
        out = self.build()
        code, stdout, stderr = run(["measure", out, "--ep", "2", "--json"])
        self.assertEqual(code, 0, stderr)
        report = json.loads(stdout)
        self.assertEqual((report["experts"], report["experts_from"]), (16, "file"))
        self.assertAlmostEqual(report["targets"][3], 8.0, delta=0.08)
        code, stdout, _ = run(["measure", out, "--ep", "2"])
        self.assertIn("experts: 16, recorded in the file's payload_settings", stdout)
        code, stdout, _ = run(["measure", out, "--ep", "2", "--experts", "32", "--json"])
        self.assertEqual(json.loads(stdout)["experts_from"], "option")

    def test_measure_json_reports_ranks_and_overflow(self):
        routed = np.array([[[0, 1]], [[0, 2]], [[0, 3]], [[-1, -1]]], dtype=np.int16)
        path = self.path("r.npy")
        np.save(path, routed)
        code, stdout, stderr = run(
            ["measure", path, "--ep", "2", "--experts", "4", "--buffer-factor", "1", "--json"])
        self.assertEqual(code, 0, stderr)
        report = json.loads(stdout)
        layer = report["layers"][0]
        self.assertEqual(layer["tokens"], 3)
        self.assertEqual(layer["max_over_mean"], 2.0)
        self.assertEqual(layer["rank_loads"], [4, 2])
        self.assertEqual(layer["overflow"], 1)
        self.assertEqual(report["targets"], [2.0])
        routed[1, 0, 1] = 9
        np.save(path, routed)
        code, _, stderr = run(["measure", path, "--ep", "2", "--experts", "4"])
        self.assertEqual(code, 2)
        self.assertIn("array[token 1, layer 0, slot 1] = 9 is not an expert id", stderr)

    # --- tiles -------------------------------------------------------------------------------

    def test_tiles_reproduce_the_seed_counts(self):
        code, stdout, stderr = run([
            "tiles", "--cp", "4", "--block-q", "1024", "--block-kv", "4096", "--dkv-block-q",
            "2048", "--dkv-block-kv", "2048", "--rows", "2", "--tokens", "65536", "--json"
        ])
        self.assertEqual(code, 0, stderr)
        report = json.loads(stdout)
        self.assertEqual(report["end"]["fwd"], [80, 136, 136, 136])
        self.assertEqual(report["end"]["dkv"], [74, 132, 132, 132])
        self.assertEqual(report["start"]["fwd"], [125, 120, 120, 120])
        self.assertEqual(report["start"]["dkv"], [122, 116, 116, 116])
        code, stdout, _ = run([
            "tiles", "--cp", "4", "--block-q", "1024", "--block-kv", "4096", "--dkv-block-q",
            "2048", "--dkv-block-kv", "2048", "--rows", "1", "--tokens", "65536"
        ])
        self.assertIn("fwd 136 -> 125 (-8.1%), dkv 132 -> 122 (-7.6%)", stdout)

    def test_tiles_warnings_are_diagnostics_on_stderr_and_in_json(self):
        args = [
            "tiles", "--cp", "2", "--block-q", "128", "--block-kv", "256", "--tokens", "1024",
            "--real-len", "3", "--segments", "5"
        ]
        message = "5 segments do not fit in 3 real tokens; using 3"
        code, stdout, stderr = run(args + ["--json"])
        self.assertEqual(code, 0, stderr)
        self.assertEqual(
            json.loads(stdout)["diagnostics"],
            [{"severity": "warning", "where": None, "message": message}])
        self.assertEqual(stderr, "check-payload: warning: " + message + "\n")
        code, stdout, stderr = run(args)
        self.assertEqual(stderr, "check-payload: warning: " + message + "\n")
        self.assertNotIn("segments do not fit", stdout)

    def test_tiles_of_a_file_match_its_layout(self):
        out = self.build("t.npz", ["--pad-position", "start", "--pad-align", "64"])
        args = ["--cp", "2", "--block-q", "128", "--block-kv", "256", "--pad-align", "64", "--json"]
        code, stdout, stderr = run(["tiles", out] + args)
        self.assertEqual(code, 0, stderr)
        from_file = json.loads(stdout)
        code, stdout, _ = run([
            "tiles", "--rows", "3", "--tokens", "1024", "--real-len", "900", "--segments", "3",
            "--seed", "5"
        ] + args)
        from_options = json.loads(stdout)
        for position in ("end", "start"):
            self.assertEqual(from_file[position]["fwd_all_rows"],
                             from_options[position]["fwd_all_rows"])
            self.assertEqual(from_file[position]["dkv"], from_options[position]["dkv"])
        code, _, stderr = run(["tiles", out, "--rows", "2"] + args)
        self.assertEqual(code, 2)
        self.assertIn("--rows describes rows to lay out", stderr)
        code, _, stderr = run(
            ["tiles", "--cp", "3", "--block-q", "64", "--block-kv", "64", "--tokens", "1000"])
        self.assertEqual(code, 2)
        self.assertIn("does not split into 2 x cp = 6 equal chunks", stderr)

    def test_tiles_checks_pad_align_as_build_does(self):
        # One check of pad_align (payload::check_pad_align), one message, for file and layout.
        out = self.build("t.npz", [])
        blocks = ["--cp", "2", "--block-q", "128", "--block-kv", "256"]
        for source in ([out], ["--tokens", "1024"]):
            for bad in ("100", "0"):
                code, stdout, stderr = run(["tiles"] + source + blocks + ["--pad-align", bad])
                self.assertEqual(code, 2, stderr)
                self.assertEqual(stdout, "")
                self.assertEqual(
                    stderr.strip(), "check-payload: --pad-align must be a positive "
                    f"multiple of the segment alignment 64 (got {bad})")

    # --- streaming ---------------------------------------------------------------------------

    def test_verify_and_measure_memory_does_not_grow_with_rows(self):
        shape = [
            "--tokens", "16384", "--layers", "16", "--topk", "8", "--experts", "64",
            "--routing-targets", "2,2,2,2,3,3,3,3,4,4,4,4,1,1,1,1"
        ]
        small, large = self.path("small.npz"), self.path("large.npz")
        for path, rows in ((small, "2"), (large, "48")):
            code, stdout, stderr = run(["build", "--rows", rows, "-q", "-o", path] + shape,
                                       timeout=300)
            self.assertEqual(code, 0, stdout + stderr)
        routing_bytes = 48 * 16384 * 16 * 8 * 2  # 192 MiB of routing in the large file
        self.assertGreater(os.path.getsize(large), routing_bytes)
        verify = ["--experts", "64", "--no-targets"]
        code_small, rss_small = max_rss_kib(["verify", small] + verify)
        code_large, rss_large = max_rss_kib(["verify", large] + verify)
        self.assertEqual((code_small, code_large), (0, 0))
        self.assertLess(rss_large - rss_small, 16 * 1024, (rss_small, rss_large))
        code_small, rss_small = max_rss_kib(["measure", small, "--ep", "2", "--experts", "64"])
        code_large, rss_large = max_rss_kib(["measure", large, "--ep", "2", "--experts", "64"])
        self.assertEqual((code_small, code_large), (0, 0))
        self.assertLess(rss_large - rss_small, 16 * 1024, (rss_small, rss_large))


if __name__ == "__main__":
    unittest.main()
