"""Tests of `bench_driver.py --dump-payload` (dump.py): run as a subprocess with /usr/bin/python3,
and dump_main in-process for its settings record and refusals."""

import contextlib
import io
import json
import os
import subprocess
import sys
import tempfile
import unittest
from typing import Tuple

import numpy as np

from driver_loader import driver_path, load_driver

bd = load_driver()

PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable


class DumpPayloadTest(unittest.TestCase):

  def test_the_file_says_how_it_was_built(self):
    result, arrays = self.dumped("--rows", "2", "--tokens", "256", "--layers", "2", "--topk", "2",
                                 "--experts", "8", "--vocab", "300", "--segments", "3",
                                 "--max-prompt-length", "20", "--pad-position", "start",
                                 "--pad-align", "64", "--routing-targets", "1,3", "--routing-scale",
                                 "0.5", "--seed", "5")
    self.assertEqual(arrays["payload_settings"].dtype, np.uint8)
    settings = json.loads(bytes(arrays["payload_settings"]).decode("utf-8"))
    self.assertEqual(settings["format"], "rtb.payload-settings/1")
    self.assertEqual(settings["builder"], "bench_driver")
    for key, value in dict(rows=2, tokens=256, layers=2, topk=2, experts=8, vocab=300, segments=3,
                           max_prompt_length=20, pad_position="start", pad_align=64,
                           advantages="random", seed=5, routing_scale=0.5,
                           routing_targets=[1.0, 2.0], final_rows=None, old_logps=True, pad_id=0,
                           real_len=238).items():
      self.assertEqual(settings[key], value, key)
    # Prompts: the mask has zeros inside segments.
    real = arrays["segment_ids"] > 0
    self.assertGreater(int((arrays["completion_mask"][real] == 0).sum()), 0)

  def test_a_closed_stdout_ends_quietly(self):
    # 3,000 layers print a table larger than a pipe's buffer; the reader stops after one line.
    command = [
        PYTHON,
        driver_path(), "--dump-payload", self.out, "--rows", "1", "--tokens", "64", "--layers",
        "3000", "--topk", "2", "--experts", "8"
    ]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert process.stdout is not None and process.stderr is not None
    process.stdout.readline()
    process.stdout.close()
    stderr = process.stderr.read().decode()
    process.stderr.close()
    self.assertEqual(process.wait(timeout=60), 0, stderr)
    self.assertNotIn("Traceback", stderr)
    self.assertEqual(stderr, "")
    self.assertTrue(os.path.exists(self.out))

  def setUp(self):
    self.directory = tempfile.TemporaryDirectory()
    self.out = os.path.join(self.directory.name, "payload.npz")

  def tearDown(self):
    self.directory.cleanup()

  def dump(self, *args, out=None):
    command = [PYTHON, driver_path(), "--dump-payload", out or self.out, *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=60)

  def dumped(self, *args):
    """Runs --dump-payload with `args`, which must succeed: (the process, the arrays it wrote)."""
    result = self.dump(*args)
    self.assertEqual(result.returncode, 0, result.stderr)
    return result, self.load()

  def load(self):
    with np.load(self.out) as archive:
      return {name: archive[name] for name in archive.files}

  def test_writes_every_field_of_the_spec(self):
    result, arrays = self.dumped("--rows", "3", "--tokens", "512", "--layers", "3", "--topk", "4",
                                 "--experts", "32", "--vocab", "5000", "--segments", "4",
                                 "--routing-targets", "1,2.5,6", "--seed", "11")
    expected = {
        "completion_ids": ((3, 512), "int32"),
        "completion_mask": ((3, 512), "float32"),
        "segment_ids": ((3, 512), "int32"),
        "segment_positions": ((3, 512), "int32"),
        "advantages": ((3, 512), "float32"),
        "old_per_token_logps": ((3, 512), "float32"),
        "routed_experts": ((3, 512, 3, 4), "int16"),
        "prompt_ids": ((3, 0), "int32"),
        "prompt_mask": ((3, 0), "float32"),
    }
    self.assertEqual(set(arrays), set(expected) | {"payload_settings"})
    for name, (shape, dtype) in expected.items():
      self.assertEqual(arrays[name].shape, shape, name)
      self.assertEqual(arrays[name].dtype.name, dtype, name)
    real = arrays["segment_ids"] > 0
    real_len = 512 - round(512 * 4588 / 65536)  # 476
    self.assertEqual(int(real.sum()), 3 * real_len)
    self.assertTrue(real[:, :real_len].all())
    ids = arrays["completion_ids"][real]
    self.assertTrue(((ids >= 1) & (ids < 5000)).all())
    routed = arrays["routed_experts"][real]
    for layer, target in enumerate([1.0, 2.5, 6.0]):
      loads = np.bincount(routed[:, layer].ravel().astype(np.int64), minlength=32)
      self.assertLessEqual(abs(loads.max() / (routed[:, layer].size / 32) - target), 0.01 * target)
    ordered = np.sort(routed, axis=-1)
    self.assertFalse((ordered[..., 1:] == ordered[..., :-1]).any())
    self.assertTrue((arrays["routed_experts"][~real] == -1).all())
    # The per-layer summary on stdout.
    lines = result.stdout.splitlines()
    self.assertTrue(lines[0].startswith(f"wrote {self.out}: 3 rows x 512 tokens"), lines[0])
    self.assertEqual(lines[1].split(), ["layer", "target", "achieved", "max_load", "mean_load"])
    self.assertEqual(len(lines), 5)
    for layer, target in enumerate([1.0, 2.5, 6.0]):
      fields = lines[2 + layer].split()
      self.assertEqual(int(fields[0]), layer)
      self.assertAlmostEqual(float(fields[1]), target)
      self.assertAlmostEqual(float(fields[2]), target, delta=0.01 * target)

  def test_uncompressed_archive(self):
    self.dumped("--rows", "1", "--tokens", "64", "--layers", "1", "--topk", "1", "--experts", "2")
    import zipfile  # pylint: disable=import-outside-toplevel  # only this test reads zips
    with zipfile.ZipFile(self.out) as archive:
      self.assertTrue(all(info.compress_type == zipfile.ZIP_STORED for info in archive.infolist()))
      self.assertIn("routed_experts.npy", archive.namelist())

  def test_final_micro_batch_and_start_padding(self):
    _, arrays = self.dumped("--rows", "4", "--tokens", "1024", "--layers", "2", "--topk", "2",
                            "--experts", "16", "--real-len", "800", "--final", "--final-rows", "2",
                            "--pad-position", "start", "--pad-align", "128", "--advantages", "zero",
                            "--no-old-logps", "--routing-targets", "1.5,3", "--routing-scale",
                            "0.5")
    self.assertNotIn("old_per_token_logps", arrays)
    real = arrays["segment_ids"] > 0
    self.assertFalse(real[2:].any())
    self.assertTrue(real[:2, 128:928].all())  # 224 padding tokens -> moved by 128
    self.assertFalse(real[:2, :128].any())
    self.assertTrue((arrays["advantages"] == 0).all())
    routed = arrays["routed_experts"][real]
    for layer, target in enumerate([1.25, 2.0]):  # 1 + 0.5 * (t - 1)
      loads = np.bincount(routed[:, layer].ravel().astype(np.int64), minlength=16)
      self.assertLessEqual(abs(loads.max() / (routed[:, layer].size / 16) - target), 0.01 * target)

  def test_routing_table_file(self):
    table = os.path.join(self.directory.name, "table.csv")
    with open(table, "w", encoding="utf-8") as handle:
      handle.write("layer,max_over_mean\n1,4.0\n0,2.0\n")
    result, _ = self.dumped("--rows", "2", "--tokens", "512", "--layers", "2", "--topk", "2",
                            "--experts", "16", "--routing-targets", "@" + table)
    self.assertIn(" 2.0000 ", result.stdout)
    self.assertIn(" 4.0000 ", result.stdout)

  def test_same_seed_same_file(self):
    args = ("--rows", "2", "--tokens", "256", "--layers", "2", "--topk", "2", "--experts", "8",
            "--segments", "3", "--seed", "5")
    other = os.path.join(self.directory.name, "other.npz")
    self.assertEqual(self.dump(*args).returncode, 0)
    self.assertEqual(self.dump(*args, out=other).returncode, 0)
    with np.load(self.out) as first, np.load(other) as second:
      for name in first.files:
        np.testing.assert_array_equal(first[name], second[name], name)

  def test_bad_options_exit_2_with_one_line_and_write_nothing(self):
    base = ["--rows", "2", "--tokens", "256", "--layers", "2", "--topk", "2", "--experts", "8"]
    for args, fragment in [
        (base[2:], "--rows"),
        (base + ["--pad-align", "100"], "multiple of the segment alignment 64"),
        (base + ["--routing-targets", "1,2,3"], "3 values but --layers is 2"),
        (base + ["--routing-targets", "1,4.5"], "cannot be reached"),
        (base[:6] + ["--topk", "9", "--experts", "8"], "exceeds --experts"),
        (base + ["--real-len", "300"], "token budget"),
        (base + ["--segments", "0"], "segments per row"),
        (base + ["--final", "--final-rows", "3"], "--final-rows=3"),
        (base + ["--pad-position", "middle"], "invalid choice"),
        (base + ["--routing-scale", "-0.5"], "must be >= 0"),
    ]:
      with self.subTest(args=args):
        result = self.dump(*args)
        self.assertEqual(result.returncode, 2, result.stdout + result.stderr)
        self.assertEqual(len(result.stderr.splitlines()), 1, result.stderr)
        self.assertTrue(result.stderr.startswith("bench_driver: "), result.stderr)
        self.assertIn(fragment, result.stderr)
        self.assertFalse(os.path.exists(self.out))
        self.assertEqual(os.listdir(self.directory.name), [])

  def test_unwritable_output_exits_2(self):
    result = self.dump("--rows", "1", "--tokens", "64", "--layers", "1", "--topk", "1", "--experts",
                       "2", out="/nonexistent-dir/payload.npz")
    self.assertEqual(result.returncode, 2)
    self.assertIn("cannot write /nonexistent-dir/payload.npz", result.stderr)


class InProcessTest(unittest.TestCase):
  """dump_main and the settings record, called in-process."""

  BASE = ["--rows", "2", "--tokens", "128", "--layers", "1", "--topk", "2", "--experts", "8"]

  def setUp(self):
    self.directory = tempfile.TemporaryDirectory()
    self.addCleanup(self.directory.cleanup)
    self.out = os.path.join(self.directory.name, "p.npz")

  def dump(self, *args: str) -> Tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
      code = bd.dump_main(["--dump-payload", self.out, *self.BASE, *args])
    return code, out.getvalue(), err.getvalue()

  def test_the_settings_record(self):
    code, _, err = self.dump("--final-rows", "1", "--routing-targets", "1.1234567891234")
    self.assertEqual((code, err),
                     (0, "bench_driver: note: --final-rows takes effect with --final\n"))
    with np.load(self.out) as archive:
      member = archive[bd.SETTINGS_MEMBER]
    self.assertEqual((member.dtype, member.ndim), (np.dtype(np.uint8), 1))
    record = json.loads(bytes(member).decode("utf-8"))
    self.assertEqual(
        record,
        {
            "format": "rtb.payload-settings/1",
            "builder": "bench_driver",
            "version": bd.DRIVER_VERSION,
            "rows": 2,
            "tokens": 128,
            "layers": 1,
            "topk": 2,
            "experts": 8,
            "vocab": bd.DEFAULT_VOCAB,
            "pad_id": 0,
            "real_len": bd.default_real_len(128),
            "segments": 1,
            "segments_rule": "option",
            "max_prompt_length": 0,
            "final_rows": None,  # --final-rows without --final
            "pad_position": "end",
            "pad_align": 4096,
            "advantages": "random",
            "seed": 0,
            "routing_targets": [1.123456789],
            "routing_scale": 1.0,
            "routing_targets_source": "--routing-targets",
            "old_logps": True,
        })
    self.assertEqual(json.loads(bytes(bd.settings_array({"a": [1, "é"]})).decode("utf-8")),
                     {"a": [1, "é"]})

  def test_refusals_write_nothing(self):
    for args, message in [
        (["--topk", "9"], "--topk=9 exceeds --experts=8 (each token needs distinct experts)"),
        (["--pad-id", str(bd.DEFAULT_VOCAB)], f"--pad-id={bd.DEFAULT_VOCAB}: must be in [0, "
         f"vocab={bd.DEFAULT_VOCAB})"),
        (["--rows", "0"], "--rows=0: must be >= 1"),
        (["--max-prompt-length", "-1"], "--max-prompt-length=-1: must be >= 0"),
        (["--final", "--final-rows", "0"], "--final-rows=0: must be between 1 and --rows=2"),
    ]:
      with self.subTest(args=args):
        with self.assertRaises(bd.SettingsError) as caught:
          self.dump(*args)
        self.assertEqual(str(caught.exception), message)
        self.assertEqual(os.listdir(self.directory.name), [])


if __name__ == "__main__":
  unittest.main()
