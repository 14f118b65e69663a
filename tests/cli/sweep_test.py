"""examples/sweep/Makefile, run as a user runs it: `make -j2` over the shipped variants on
testdata/launch_dryrun.txt with the built tools, a stub kubectl (written here) that records every
call and serves canned bench-driver logs, then bench-report of the control against each variant."""

import json
import os
import shutil
import stat
import tempfile
import unittest

from cli_common import BIN, PYTHON, run_tool, testdata

SWEEP_MAKEFILE = os.path.join(os.path.dirname(testdata()), "examples", "sweep", "Makefile")

# The shipped variants and the canned client log each one's stub serves (fixtures bench-report
# reads; their run names are the ones the logs carry).
CANNED_LOGS = {
    "ab-ctl": "bench_ctl.log",
    "ab-ctl2": "bench_ctl2.log",
    "ab-rbf": "bench_slow.log",
    "ab-slice": "bench_same.log",
    "ab-vmem": "bench_fast.log",
    "ab-pod": "pod_arms_abba.log",
}
VARIANTS = ["ctl", "ctl2", "rbf", "slice", "vmem"]

# Records its argv (one JSON line per call) and answers apply / wait / logs as kubectl would,
# from the files the Makefile hands it; anything else is exit 1.
STUB_KUBECTL = r'''#!PYTHON
import json, os, re, sys
args = sys.argv[1:]
with open(os.environ["STUB_RECORD"], "a") as record:
    record.write(json.dumps(args) + "\n")
def option(name):
    return args[args.index(name) + 1] if name in args else None
def jobset_name(path):
    match = re.search(r"^metadata:\n  name: (\S+)$", open(path).read(), re.M)
    if not match:
        sys.exit("stub kubectl: no JobSet name in " + path)
    return match.group(1)
verb = args[0] if args else ""
if verb == "apply":
    print("jobset.jobset.x-k8s.io/%s created" % jobset_name(option("-f")))
elif verb == "wait":
    if not any(a.startswith("--for=condition=Completed") for a in args):
        sys.exit("stub kubectl: wait without --for=condition=Completed")
    print("jobset.jobset.x-k8s.io/%s condition met" % jobset_name(option("-f")))
elif verb == "logs":
    jobs = [a for a in args if a.startswith("job/")]
    canned = json.load(open(os.environ["STUB_LOGS"]))
    name = re.sub(r"-proc-0$", "", jobs[0][4:]) if jobs else ""
    if name not in canned:
        sys.exit("stub kubectl: no log for %s" % args)
    sys.stdout.write(open(canned[name]).read())
else:
    sys.exit("stub kubectl: unexpected call %s" % args)
'''


class SweepTest(unittest.TestCase):

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="rtb-sweep-")
        self.addCleanup(shutil.rmtree, self.dir)
        # The user's copy of the example, next to the DRY_RUN.
        shutil.copy(SWEEP_MAKEFILE, os.path.join(self.dir, "Makefile"))
        shutil.copy(testdata("launch_dryrun.txt"), os.path.join(self.dir, "dryrun.txt"))
        self.kubectl = os.path.join(self.dir, "kubectl-stub")
        with open(self.kubectl, "w") as f:
            f.write(STUB_KUBECTL.replace("PYTHON", PYTHON, 1))
        os.chmod(self.kubectl, os.stat(self.kubectl).st_mode | stat.S_IXUSR)
        self.record = os.path.join(self.dir, "kubectl-calls.jsonl")
        logs = os.path.join(self.dir, "canned-logs.json")
        with open(logs, "w") as f:
            json.dump({k: testdata("bench_logs", v) for k, v in CANNED_LOGS.items()}, f)
        self.env = {"STUB_RECORD": self.record, "STUB_LOGS": logs}

    def make(self, *args):
        command = ["make", "-C", self.dir, "-j2", "RTB_BIN=" + BIN, "KUBECTL=" + self.kubectl]
        return run_tool(command + list(args), env=self.env, timeout=300)

    def out(self, *parts):
        return os.path.join(self.dir, "out", *parts)

    def calls(self):
        if not os.path.exists(self.record):
            return []
        with open(self.record) as f:
            return [json.loads(line) for line in f]

    def test_profiles_reports_each_trace_and_its_change_against_the_control(self):
        real = testdata("profile", "jax0.11.2_h200_bench_driver_profile_window.xplane.pb")
        cut = os.path.join(os.path.dirname(testdata()), "fuzz", "seeds", "profile",
                           "h200_device_plane_cut_40_events_per_line.xplane.pb")
        for variant, capture in (("ctl", real), ("vmem", cut)):
            os.makedirs(self.out(variant + ".profile", "plugins", "profile", "run"))
            shutil.copy(
                capture,
                self.out(variant + ".profile", "plugins", "profile", "run", "host.xplane.pb"))
        code, stdout, stderr = self.make("profiles")
        self.assertEqual(code, 0, stdout + stderr)
        self.assertIn("steps: 6 from executions of jit_work", stdout)
        with open(self.out("vmem.vs-control.txt")) as f:
            self.assertIn("something moved beyond its spread", f.read())
        self.assertFalse(os.path.exists(self.out("ctl.vs-control.txt")))
        self.assertFalse(os.path.exists(self.out("rbf.profile.txt")))
        self.assertEqual(self.calls(), [])

    def test_whole_sweep_reports_every_variant_against_the_control(self):
        code, stdout, stderr = self.make("report")
        self.assertEqual(code, 0, stdout + stderr)
        for variant in VARIANTS:
            self.assertTrue(os.path.isfile(self.out(variant + ".yaml")), variant)
            with open(self.out(variant + ".yaml")) as f:
                self.assertIn("name: ab-%s\n" % variant, f.read())
        calls = self.calls()
        for variant in VARIANTS:
            yaml_path = os.path.join("out", variant + ".yaml")
            applies = [c for c in calls if c[:1] == ["apply"] and yaml_path in c]
            waits = [c for c in calls if c[:1] == ["wait"] and yaml_path in c]
            logs = [c for c in calls if c[:1] == ["logs"] and "job/ab-%s-proc-0" % variant in c]
            self.assertEqual((len(applies), len(waits), len(logs)), (1, 1, 1), (variant, calls))
            # The namespace comes from the render (the e2e's), the container is the client's.
            self.assertEqual(logs[0][logs[0].index("-n") + 1], "bench-ns")
            self.assertEqual(logs[0][logs[0].index("-c") + 1], "main")
        # Every apply came before its wait, every wait before its logs.
        order = [(c[0], next(a for a in c if "ab-" in a or a.endswith(".yaml"))) for c in calls]
        for variant in VARIANTS:
            steps = [
                verb for verb, target in order
                if "/%s.yaml" % variant in target or target == "job/ab-%s-proc-0" % variant
            ]
            self.assertEqual(steps, ["apply", "wait", "logs"], variant)

        with open(self.out("report.json")) as f:
            report = json.load(f)
        self.assertEqual(report["schema"], "rtb.bench-report/1")
        # The control first, then every variant but the pair's second control.
        self.assertEqual([r["name"] for r in report["runs"]],
                         ["ab-ctl", "ab-slow", "ab-same", "ab-fast"])
        self.assertEqual([c["verdict"] for c in report["comparisons"]],
                         ["slower", "no_change", "faster"])
        self.assertEqual(report["noise_floor"]["control_b"], "ab-ctl2")
        self.assertIsNone(report["fail_if_slower"])
        with open(self.out("report.txt")) as f:
            table = f.read()
        self.assertIn("ab-ctl (control)", table)
        self.assertIn("A/A noise floor (ab-ctl vs ab-ctl2)", table)
        self.assertIn("ab-ctl (control)", stdout)  # the table is printed too

        # Done steps are not redone: a second report calls kubectl no more.
        code, stdout, stderr = self.make("report")
        self.assertEqual(code, 0, stdout + stderr)
        self.assertEqual(len(self.calls()), len(calls))

    def test_pod_form_runs_the_arms_in_one_jobset_and_reports_their_pairs(self):
        rc, out, err = self.make("pod-report")
        self.assertEqual(rc, 0, out + err)
        with open(self.out("pod.yaml")) as f:
            render = f.read()
        # One JobSet holds both arms' programs and runs them in abba order, 4 runs each.
        self.assertIn("name: ab-pod", render)
        self.assertIn("bench_run bench_arm_1 pad 2", render)
        self.assertIn("bench_run bench_arm_0 base 8", render)
        applied = [call for call in self.calls() if call[0] == "apply"]
        self.assertEqual(len(applied), 1)
        with open(self.out("pod-report.json")) as f:
            report = json.load(f)
        self.assertEqual(report["schema"], "rtb.bench-report.arms/1")
        self.assertEqual(report["pods"][0]["comparisons"][0]["verdict"], "faster")
        self.assertIn("pad vs base:", out)

    def test_fail_if_slower_fails_the_report_and_still_writes_it(self):
        code, stdout, stderr = self.make("report", "FAIL_IF_SLOWER=0.5")
        self.assertNotEqual(code, 0, stdout + stderr)
        self.assertIn("ab-slow: s/step +0.54% slower than ab-ctl (--fail-if-slower 0.5)", stderr)
        with open(self.out("report.json")) as f:
            report = json.load(f)
        self.assertTrue(report["fail_if_slower"]["tripped"])
        self.assertEqual(report["exit_code"], 1)
        self.assertTrue(os.path.isfile(self.out("report.txt")))
        # Under the limit the same runs pass.
        code, stdout, stderr = self.make("report", "FAIL_IF_SLOWER=5")
        self.assertEqual(code, 0, stdout + stderr)

    def test_renders_touch_no_cluster_and_follow_knob_edits(self):
        code, stdout, stderr = self.make("renders")
        self.assertEqual(code, 0, stdout + stderr)
        self.assertEqual(self.calls(), [])  # renders never touch the cluster
        self.assertIn("abtest-train -> ab-vmem", stderr)  # render-bench --summary
        # Editing one variant's knobs re-renders that variant only.
        before = {v: os.stat(self.out(v + ".yaml")).st_mtime_ns for v in VARIANTS}
        code, stdout, stderr = self.make(
            "renders", "KNOBS_vmem=--libtpu-flag=--xla_tpu_scoped_vmem_limit_kib=32768")
        self.assertEqual(code, 0, stdout + stderr)
        changed = [v for v in VARIANTS if os.stat(self.out(v + ".yaml")).st_mtime_ns != before[v]]
        self.assertEqual(changed, ["vmem"])
        with open(self.out("vmem.yaml")) as f:
            self.assertIn("--xla_tpu_scoped_vmem_limit_kib=32768", f.read())

    def test_a_render_that_fails_its_check_is_not_kept(self):
        # RTB_BIN holds the real tools, but a render-bench that also changes the client image,
        # which render-bench never does: diff-renders --expect-bench must fail the variant and
        # make must delete its render.
        tools = os.path.join(self.dir, "tools")
        os.mkdir(tools)
        for name in os.listdir(BIN):
            os.symlink(os.path.join(BIN, name), os.path.join(tools, name))
        os.remove(os.path.join(tools, "render-bench"))
        with open(os.path.join(tools, "render-bench"), "w") as f:
            f.write('#!/bin/sh\nset -e\n"%s" "$@"\n' % os.path.join(BIN, "render-bench") +
                    'for a in "$@"; do out=$a; done\n'  # -o FILE is last
                    'sed -i "s|^\\( *image: \\).*|\\1evil/image:latest|" "$out"\n')
        os.chmod(os.path.join(tools, "render-bench"), 0o755)
        code, stdout, stderr = run_tool([
            "make", "-C", self.dir, "-j2", "RTB_BIN=" + tools, "KUBECTL=" + self.kubectl,
            "out/vmem.yaml"
        ], env=self.env)
        self.assertNotEqual(code, 0, stdout + stderr)
        self.assertIn("evil/image:latest", stdout)  # diff-renders names the difference
        self.assertFalse(os.path.exists(self.out("vmem.yaml")))

    def test_a_knob_render_bench_refuses_leaves_no_render(self):
        code, stdout, stderr = self.make("renders", "KNOBS_vmem=--trainer-main no.such.main")
        self.assertNotEqual(code, 0)
        self.assertIn("render-bench:", stderr)
        self.assertFalse(os.path.exists(self.out("vmem.yaml")))

    def test_aot_writes_each_script_and_stops_at_the_first_failure(self):
        code, stdout, stderr = self.make("aot")
        self.assertEqual(code, 0, stdout + stderr)
        for variant in VARIANTS:
            with open(self.out(variant + ".aot.sh")) as f:
                script = f.read()
            self.assertTrue(script.startswith("#!/usr/bin/env bash"), variant)
            self.assertIn("run_name=ab-%s" % variant, script)
        with open(self.out("slice.aot.sh")) as f:
            self.assertIn("compile_topology=tpu7x-128", f.read())
        # AOT_RUN=1 with a Python that has no MaxText: the control's compile fails (exit 2),
        # and no later variant is tried.
        code, stdout, stderr = self.make("aot", "AOT_RUN=1", "AOT_FLAGS=--python " + PYTHON)
        self.assertNotEqual(code, 0)
        self.assertIn("cannot import maxtext", stderr)
        self.assertIn("aot: ctl does not fit or failed (exit 2)", stderr)
        self.assertEqual(stdout.count("aot-check "), 1, stdout)


if __name__ == "__main__":
    unittest.main()
