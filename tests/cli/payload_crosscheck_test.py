"""Cross-check of the two payload builders: the bench driver's NumPy builder
(bench_driver.py --dump-payload) and check-payload's C++ builder, at small shapes for several seeds
and settings. Every payload of either builder must pass `check-payload verify` with the settings it
was built with, and both must lay rows out alike (real length, shift, segments, padding rows)."""

import os
import subprocess
import sys
import tempfile
import unittest

import numpy as np

BIN = os.environ.get("RTB_BIN_DIR", "")
TESTDATA = os.environ.get("RTB_TESTDATA_DIR", "")
PYTHON = os.environ.get("RTB_PYTHON", sys.executable)
TOOL = os.path.join(BIN, "check-payload")
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
DRIVER = os.environ.get("RTB_DRIVER",
                        os.path.join(ROOT, "tools", "render-bench", "driver", "bench_driver.py"))
DEFAULT_TABLE = os.path.join(ROOT, "data", "routing", "qwen3.5-397b-a17b.txt")

# Each case: the shape and settings both builders take, in the driver's spelling; `final` marks
# the last micro-batch of a step (the driver's --final --final-rows F, check-payload's
# --final-rows F).
CASES = [
    dict(seed=0, rows=2, tokens=2048, layers=4, topk=2, experts=16, vocab=1000,
         targets="1,1.5,3,8"),
    dict(seed=1, rows=3, tokens=4096, layers=3, topk=4, experts=32, vocab=5000, segments=5,
         targets="2,4,6", scale="0.5", pad_position="start", pad_align=128),
    dict(seed=2, rows=4, tokens=1024, layers=2, topk=2, experts=8, vocab=300, segments=2,
         targets="1.2,3.9", final=1, advantages="zero", no_old_logps=True),
    dict(seed=3, rows=2, tokens=96, layers=2, topk=3, experts=6, vocab=50, real_len=70,
         segments=4, targets="1,2"),
    dict(seed=4, rows=2, tokens=1024, layers=60, topk=10, experts=512, vocab=248320,
         targets="@" + DEFAULT_TABLE, pad_position="start", pad_align=64),
    dict(seed=5, rows=1, tokens=65536, layers=1, topk=2, experts=4, vocab=248320, segments=3,
         targets="1.8", pad_position="start"),
]


def build_args(case, driver):
    args = ["--rows", str(case["rows"]), "--tokens", str(case["tokens"]),
            "--layers", str(case["layers"]), "--topk", str(case["topk"]),
            "--experts", str(case["experts"]), "--vocab", str(case["vocab"]),
            "--seed", str(case["seed"]), "--routing-targets", case["targets"]]
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


def verify_args(case):
    args = ["--experts", str(case["experts"]), "--vocab", str(case["vocab"]),
            "--routing-targets", case["targets"], "--pad-align", str(case.get("pad_align", 4096)),
            "--pad-position", case.get("pad_position", "end"),
            "--advantages", case.get("advantages", "random")]
    if "scale" in case:
        args += ["--routing-scale", case["scale"]]
    return args


def run(command, timeout=300):
    proc = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    return proc.returncode, proc.stdout, proc.stderr


def layout(path):
    """Per row: (first real position, real tokens, segments), from segment_ids."""
    with np.load(path) as data:
        segments = data["segment_ids"]
        rows = []
        for row in segments:
            real = np.flatnonzero(row > 0)
            if real.size == 0:
                rows.append((0, 0, 0))
            else:
                rows.append((int(real[0]), int(real.size), int(row.max())))
        fields = {name: (str(data[name].dtype), data[name].shape) for name in data.files}
    return rows, fields


@unittest.skipUnless(os.path.exists(DRIVER), f"the bench driver is missing: {DRIVER}")
class PayloadCrossCheckTest(unittest.TestCase):

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.tmp.cleanup()

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

    def verify(self, path, case):
        code, stdout, stderr = run([TOOL, "verify", path] + verify_args(case))
        self.assertEqual(code, 0, f"verify failed for {case} on {path}:\n{stdout}{stderr}")
        self.assertIn("checks: 12 passed, 0 failed, 0 skipped", stdout)

    def test_driver_payloads_pass_verify(self):
        for index, case in enumerate(CASES):
            with self.subTest(case=case):
                self.verify(self.dump_with_driver(case, f"driver{index}.npz"), case)

    def test_cpp_payloads_pass_verify(self):
        for index, case in enumerate(CASES):
            with self.subTest(case=case):
                self.verify(self.build_with_tool(case, f"cpp{index}.npz"), case)

    def test_both_builders_lay_rows_out_alike(self):
        for index, case in enumerate(CASES):
            with self.subTest(case=case):
                driver_rows, driver_fields = layout(self.dump_with_driver(case, f"d{index}.npz"))
                cpp_rows, cpp_fields = layout(self.build_with_tool(case, f"c{index}.npz"))
                self.assertEqual(driver_fields, cpp_fields)
                self.assertEqual(driver_rows, cpp_rows)

    def test_a_broken_driver_payload_fails_verify(self):
        # The cross-check can fail: a driver payload with one expert repeated is caught.
        case = CASES[0]
        path = self.dump_with_driver(case, "broken.npz")
        with np.load(path) as data:
            arrays = {name: data[name] for name in data.files}
        routed = arrays["routed_experts"].copy()
        routed[1, 3, 2, 1] = routed[1, 3, 2, 0]
        arrays["routed_experts"] = routed
        np.savez(path, **arrays)
        code, stdout, _ = run([TOOL, "verify", path] + verify_args(case))
        self.assertEqual(code, 1)
        self.assertIn("routed_experts[row 1, token 3, layer 2]", stdout)


if __name__ == "__main__":
    unittest.main()
