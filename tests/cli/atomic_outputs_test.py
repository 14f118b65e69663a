"""Every tool that writes a file either leaves the old file as it was or replaces it whole.

For each (tool, arguments) that writes OUT:
- a clean run writes OUT and nothing else in its directory;
- a run that fails (bad input or option) over an existing OUT leaves it byte for byte, and no
  temporary file next to it;
- runs interrupted by SIGINT (and SIGKILL) at spread-out moments leave OUT either as it was or
  equal to the clean run's output, and nothing else in the directory (SIGKILL, which cannot be
  held back, may leave the complete new output under a `.tmp.` name).
The outputs are deterministic, so "whole" is checked by comparing bytes with the clean run.
"""

import os
import resource
import shutil
import signal
import subprocess
import tempfile
import time
import unittest

BIN = os.environ.get("RTB_BIN_DIR", "")
TESTDATA = os.environ.get("RTB_TESTDATA_DIR", "")
OLD = b"a good old file\n"


def data(*parts):
    return os.path.join(TESTDATA, *parts)


# (name, tool, arguments with OUT, arguments with OUT that fail with exit 2). A larger payload
# build gives SIGINT a real chance to land in the middle of writing.
# yapf: disable (a table: one case per entry, its two argument lists aligned)
CASES = [
    ("render-bench", "render-bench",
     [data("launch_dryrun.txt"), "--name", "abtest-bench", "-o", "OUT"],
     [data("launch_dryrun.txt"), "--name", "abtest-bench", "--maxtext-replace", "no_such_key=1",
      "-o", "OUT"]),
    ("aot-check script", "aot-check", [data("launch_dryrun.txt"), "-o", "OUT"],
     [data("bad", "not_yaml.txt"), "-o", "OUT"]),
    ("aot-summarize", "aot-summarize", [data("memlog_engine_compile_a.log"), "-o", "OUT"],
     [data("no_such_file.log"), "-o", "OUT"]),
    ("bench-report", "bench-report", [data("bench_logs", "bench_ctl.log"), "-o", "OUT"],
     [data("bench_logs", "bench_ctl.log"), "--no-such-option", "-o", "OUT"]),
    ("bench-report svg", "bench-report",
     [data("bench_logs", "bench_ctl.log"), "--svg", "OUT"],
     [data("no_such_file.log"), "--svg", "OUT"]),
    ("check-payload build", "check-payload",
     ["build", "--rows", "8", "--tokens", "16384", "--layers", "8", "--topk", "4", "--experts",
      "64", "--routing-targets", "1.5,2,2.5,3,3.5,4,4.5,5", "--threads", "1", "-q", "-o", "OUT"],
     ["build", "--rows", "8", "--tokens", "16384", "--layers", "8", "--topk", "4", "--experts",
      "64", "--routing-targets", "1,2", "-q", "-o", "OUT"]),
    ("check-payload build svg", "check-payload",
     ["build", "--rows", "2", "--tokens", "4096", "--layers", "4", "--topk", "2", "--experts",
      "16", "--routing-targets", "1.5,2,4,8", "-q", "--svg", "OUT"],
     ["build", "--rows", "2", "--tokens", "4096", "--layers", "4", "--topk", "2", "--experts",
      "16", "--routing-targets", "1.5,2,4,99", "-q", "--svg", "OUT"]),
    ("hlo-overlap", "hlo-overlap",
     [data("hlo", "handwritten_async_all_to_all.hlo.txt"), "-o", "OUT"],
     [data("bad", "not_yaml.txt"), "-o", "OUT"]),
    ("hlo-overlap svg", "hlo-overlap",
     [data("hlo", "handwritten_while_trip_counts.hlo.txt"), "--svg", "OUT"],
     [data("no_such_file.hlo.txt"), "--svg", "OUT"]),
    ("profile-report", "profile-report",
     [data("profile", "jax0.11.2_h200_bench_driver_profile_window.xplane.pb"), "-o", "OUT"],
     [data("profile", "bad", "truncated.xplane.pb"), "-o", "OUT"]),
    ("profile-report svg", "profile-report",
     [data("profile", "jax0.11.2_h200_bench_driver_profile_window.xplane.pb"), "--svg", "OUT"],
     [data("profile", "bad", "out_of_order.xplane.pb"), "--svg", "OUT"]),
]
# yapf: enable


def with_out(args, out):
    return [out if a == "OUT" else a for a in args]


class AtomicOutputs(unittest.TestCase):

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="rtb_atomic_")
        self.addCleanup(shutil.rmtree, self.tmp, ignore_errors=True)

    def fresh_dir(self, name):
        path = os.path.join(self.tmp, name.replace(" ", "_"))
        shutil.rmtree(path, ignore_errors=True)
        os.makedirs(path)
        return path

    def assert_only(self, directory, name, msg):
        self.assertEqual(sorted(os.listdir(directory)), [name], msg)

    def clean_output(self, name, tool, args):
        directory = self.fresh_dir(name + "_clean")
        out = os.path.join(directory, "out")
        proc = subprocess.run([os.path.join(BIN, tool)] + with_out(args, out), capture_output=True,
                              timeout=120)
        self.assertEqual(proc.returncode, 0, proc.stderr.decode(errors="replace"))
        self.assert_only(directory, "out", "a clean run leaves only its output")
        with open(out, "rb") as f:
            content = f.read()
        self.assertGreater(len(content), 0)
        return content

    def test_failures_leave_the_old_file(self):
        for name, tool, _, bad_args in CASES:
            with self.subTest(case=name):
                directory = self.fresh_dir(name + "_fail")
                out = os.path.join(directory, "out")
                with open(out, "wb") as f:
                    f.write(OLD)
                proc = subprocess.run([os.path.join(BIN, tool)] + with_out(bad_args, out),
                                      capture_output=True, timeout=120)
                self.assertEqual(proc.returncode, 2, proc.stderr.decode(errors="replace"))
                with open(out, "rb") as f:
                    self.assertEqual(f.read(), OLD)
                self.assert_only(directory, "out", "a failed run leaves no temporary file")

    def test_a_write_that_fails_midway_leaves_the_old_file(self):
        # The failures above stop before an output is opened. Here the output is open and half
        # written when the write fails: the file size limit (RLIMIT_FSIZE, SIGXFSZ ignored, so
        # write() returns EFBIG) lets the tool write half of what it writes on a clean run.
        for name, tool, args, _ in CASES:
            with self.subTest(case=name):
                size = len(self.clean_output(name, tool, args))
                directory = self.fresh_dir(name + "_efbig")
                out = os.path.join(directory, "out")
                with open(out, "wb") as f:
                    f.write(OLD)
                limit = max(len(OLD) + 1, size // 2)

                def limit_file_size(limit=limit):
                    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
                    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

                proc = subprocess.run([os.path.join(BIN, tool)] + with_out(args, out),
                                      capture_output=True, timeout=120, preexec_fn=limit_file_size)
                stderr = proc.stderr.decode(errors="replace")
                self.assertEqual(proc.returncode, 2, stderr)
                self.assertNotIn("Traceback", stderr)
                self.assertIn(tool + ":", stderr)
                with open(out, "rb") as survivor:
                    self.assertEqual(survivor.read(), OLD, "the old file survives a failed write")
                self.assert_only(directory, "out", "a failed write leaves no temporary file")

    def test_interrupted_runs_leave_the_old_file_or_the_whole_new_one(self):
        for name, tool, args, _ in CASES:
            with self.subTest(case=name):
                expected = self.clean_output(name, tool, args)
                # Time a run, then interrupt others at fractions of that time (and at once).
                directory = self.fresh_dir(name + "_int")
                out = os.path.join(directory, "out")
                started = time.monotonic()
                subprocess.run([os.path.join(BIN, tool)] + with_out(args, out), capture_output=True,
                               timeout=120)
                duration = time.monotonic() - started
                for i, fraction in enumerate([0.0, 0.1, 0.3, 0.5, 0.7, 0.85, 0.95]):
                    sig = signal.SIGKILL if i % 3 == 2 else signal.SIGINT
                    with open(out, "wb") as f:
                        f.write(OLD)
                    proc = subprocess.Popen([os.path.join(BIN, tool)] + with_out(args, out),
                                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                    time.sleep(duration * fraction)
                    proc.send_signal(sig)
                    proc.wait(timeout=120)
                    with open(out, "rb") as f:
                        content = f.read()
                    self.assertIn(
                        content, (OLD, expected),
                        f"{name}: signal {sig} at {fraction:.2f} of the run left a "
                        f"partial file ({len(content)} bytes)")
                    others = sorted(set(os.listdir(directory)) - {"out"})
                    if sig == signal.SIGINT:
                        self.assertEqual(others, [], f"{name}: SIGINT at {fraction:.2f} left a "
                                         "stray file")
                    else:
                        # SIGKILL cannot be held back: between link and rename (microseconds)
                        # it may leave the complete new file under a temporary name.
                        for other in others:
                            self.assertTrue(other.startswith("out.tmp."), other)
                            with open(os.path.join(directory, other), "rb") as f:
                                self.assertEqual(f.read(), expected)
                            os.unlink(os.path.join(directory, other))


if __name__ == "__main__":
    unittest.main()
