"""The bench driver as the pod gets it: render a bench, let the client command write the driver
the way the pod's shell does (gzip + base64 in the arguments after the script, unpacked by the
script), and run the file it wrote: --help, --print-settings and --dump-payload."""

import json
import os
import shlex
import stat
import subprocess
import tempfile
import unittest

import numpy as np
import yaml

from cli_common import BIN, DRIVER, PYTHON, run_tool

TOOL = os.path.join(BIN, "render-bench")
POD_PATH = "/tmp/bench_driver.py"


def client_command(jobset):
    for job in jobset["spec"]["replicatedJobs"]:
        for container in job["template"]["spec"]["template"]["spec"]["containers"]:
            if container["name"] == "main":
                return container["command"]
    raise AssertionError("no client container")


class DriverArtifactTest(unittest.TestCase):

    def run_client(self, tmp, stub_body):
        """Runs the rendered client command in `tmp`, with the driver written to tmp instead of
        /tmp and `python3` a stub that runs `stub_body` (sh) with the driver's path as $1."""
        rc, out, err = run_tool(TOOL, ["--demo", "--name", "artifact-bench", "--steps", "3"])
        self.assertEqual(rc, 0, err)
        command = client_command(yaml.safe_load(out))
        script = command[2]
        target = os.path.join(tmp, "bench_driver.py")
        self.assertIn(f"base64 -d > {POD_PATH}.gz", script)
        script = script.replace(POD_PATH, target).replace("\n  sleep 5\n", "\n  sleep 0.1\n")
        bindir = os.path.join(tmp, "bin")
        os.makedirs(bindir)
        stub = os.path.join(bindir, "python3")
        with open(stub, "w", encoding="utf-8") as f:
            f.write("#!/bin/sh\nREAL=" + shlex.quote(PYTHON) + "\n" + stub_body)
        os.chmod(stub, os.stat(stub).st_mode | stat.S_IEXEC)
        env = {"PATH": bindir + ":/usr/bin:/bin", "HOME": tmp}
        proc = subprocess.run(["bash", "-c", script, *command[3:]], env=env, cwd=tmp,
                              capture_output=True, text=True, timeout=120)
        return proc, target

    def test_the_written_driver_is_the_built_one_and_runs(self):
        with tempfile.TemporaryDirectory() as tmp:
            npz = os.path.join(tmp, "p.npz")
            body = ('"$REAL" "$1" --help > help.txt || exit 3\n'
                    '"$REAL" "$1" --print-settings > settings.json || exit 4\n'
                    '"$REAL" "$1" --dump-payload ' + shlex.quote(npz) +
                    " --rows 2 --tokens 256 --layers 2 --topk 2 --experts 8 > dump.txt || exit 5\n")
            proc, target = self.run_client(tmp, body)
            self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
            self.assertIn("EXIT_CODE=0", proc.stdout)
            with open(target, encoding="utf-8") as f, open(DRIVER, encoding="utf-8") as g:
                self.assertEqual(f.read(), g.read(),
                                 "the pod writes the built driver byte for byte")
            with open(os.path.join(tmp, "help.txt"), encoding="utf-8") as f:
                help_text = f.read()
            self.assertIn("Environment contract", help_text)
            self.assertIn("MICRO_STEPS", help_text)
            with open(os.path.join(tmp, "settings.json"), encoding="utf-8") as f:
                settings = json.load(f)
            # The settings render-bench wrote, as the driver in the pod reads them.
            self.assertEqual(settings["STEPS"], 3)
            self.assertEqual(settings["BENCH_NAME"], "artifact-bench")
            self.assertEqual(settings["STAGE_BOUNDARY"], "auto")
            self.assertIsInstance(settings["ROUTING_TARGETS"], list)
            with open(os.path.join(tmp, "dump.txt"), encoding="utf-8") as f:
                self.assertIn("wrote " + npz, f.read())
            with np.load(npz) as payload:
                self.assertEqual(payload["completion_ids"].shape, (2, 256))
                self.assertEqual(payload["routed_experts"].shape, (2, 256, 2, 2))


if __name__ == "__main__":
    unittest.main()
