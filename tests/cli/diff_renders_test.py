"""CLI tests of diff-renders: runs the built tool on the DRY_RUN fixtures in testdata/, on edited
copies of them and on bench renders that the built render-bench makes of them, and checks stdout,
stderr and exit codes. --expect-bench is checked against a render with every render-bench knob
(each must pass) and against hand-tampered benches (each must fail, naming what was tampered)."""

import json
import os
import pty
import re
import subprocess
import unittest

import yaml

import json_schema
from json_schema import validate

from cli_common import LAUNCH_DRYRUN as FIXTURE
from cli_common import LAUNCH_DRYRUN_V5P as V5P
from cli_common import (BIN, TESTDATA, TempDirTestCase, assert_bad_input, assert_help_and_version,
                        expect_exit, run_tool)

TOOL = os.path.join(BIN, "diff-renders")
RENDER = os.path.join(BIN, "render-bench")
NOT_JOBSET = os.path.join(TESTDATA, "diff_not_jobset.yaml")
CLIENT = "spec.replicatedJobs[proc].template.spec.template.spec.containers[main]"
PROXY = "spec.replicatedJobs[proc].template.spec.template.spec.initContainers[pathways-proxy]"
WORKER = "spec.replicatedJobs[pw-node].template.spec.template.spec.containers[pathways-worker]"
# Real xpk renders at several commits and a `kubectl get -o yaml` built from one (SOURCES.md).
XPK = os.path.join(TESTDATA, "diff_renders")
XPK_254 = os.path.join(XPK, "xpk_pathways_v5p-8_at_254bbe3f.yaml")
XPK_LIVE = os.path.join(XPK, "xpk_pathways_v5p-8_at_254bbe3f_kubectl_get.yaml")
# kubernetes-sigs/jobset's preemption example: one experiment as a high- and a low-priority run, a
# Workload, a PodGroup and a JobSet each, named apart (SOURCES.md).
HIGH = os.path.join(XPK, "jobset_wap_high-priority-jobset_at_c6b198a6.yaml")
LOW = os.path.join(XPK, "jobset_wap_low-priority-jobset_at_c6b198a6.yaml")
# Kueue's sample JobSet (generateName only) and two real `kubectl get jobset -o yaml` outputs from
# Kueue issues: one object, and a List (SOURCES.md).
KUEUE_SAMPLE = os.path.join(XPK, "kueue_sample-jobset_at_3d8443b6.yaml")
LIVE_7649 = os.path.join(XPK, "kueue_issue7649_kubectl_get_jobset.yaml")
LIVE_8101 = os.path.join(XPK, "kueue_issue8101_kubectl_get_jobset.yaml")
# The JobSet Kubeflow Trainer submitted for 8101's TrainJob, reconstructed from the issue.
RENDER_8101 = os.path.join(XPK, "kueue_issue8101_render_reconstructed.yaml")

# The --json document (docs/diff-renders.md, "JSON output"): its JSON Schema in schemas/.
DIFF_SCHEMA = json_schema.load("rtb.diff-renders.1.json")


def run(args, stdin=None, env=None, tool=TOOL):
    return run_tool(tool, args, stdin=stdin, env=env, unset=["NO_COLOR"])


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


class DiffRendersTest(TempDirTestCase):

    def edited(self, name, *replacements, source=FIXTURE):
        text = read(source)
        for old, new in replacements:
            self.assertTrue(old in text, old)
            text = text.replace(old, new, 1)
        return self.write(name, text)

    def bench(self, name, *knobs, source=FIXTURE, bench_name="abtest-bench"):
        path = os.path.join(self.tmp.name, name)
        rc, _, err = run([source, "--name", bench_name, "-o", path, *knobs], tool=RENDER)
        self.assertEqual(rc, 0, err)
        return path

    def diff(self, *args, rc=None, stdin=None, env=None):
        return expect_exit(self, rc, TOOL, args, stdin=stdin, env=env, unset=["NO_COLOR"])

    # --- plain diffs -----------------------------------------------------------------------
    def test_identical_inputs_exit_0_and_print_nothing(self):
        same = ([FIXTURE, FIXTURE], [V5P, V5P], ["--json", FIXTURE, FIXTURE], ["--stat", V5P, V5P])
        for args in same:
            out, err = self.diff(*args, rc=0)
            self.assertEqual(err, "")
            if "--json" in args:
                self.assertEqual(json.loads(out)["result"], "same")
            else:
                self.assertEqual(out, "")
        with open(FIXTURE, encoding="utf-8") as f:
            out, _ = self.diff("-", FIXTURE, rc=0, stdin=f.read())
        self.assertEqual(out, "")

    def test_each_kind_of_change_is_found_once_with_its_path(self):
        b = self.edited(
            "kinds.txt",
            ("ragged_buffer_factor=2.0", "ragged_buffer_factor=2.5"),  # changed flag
            (" use_gdn_kernel=true", ""),  # removed flag
            ("- --sidecar_name=external", "- --sidecar_name=external\n"
             "              - \"--xla_brand_new=3\""),  # added flag
            ("        completions: 32", "        completions: \"32\""),  # type change
            ("cloud.google.com/reservation-name: example-reservation",
             "cloud.google.com/reservation-name: other-reservation"))  # changed field
        out, err = self.diff(FIXTURE, b, rc=1)
        self.assertEqual(err, "")
        lines = out.splitlines()
        expected = [
            f"~ abtest-train:{CLIENT}.startup.env.MAXTEXT_EXTRA_FLAGS[ragged_buffer_factor]: 2.0 -> 2.5",
            f"- abtest-train:{CLIENT}.startup.env.MAXTEXT_EXTRA_FLAGS[use_gdn_kernel]: use_gdn_kernel=true",
            f"+ abtest-train:{PROXY}.args[--xla_brand_new]: --xla_brand_new=3",
            "! abtest-train:spec.replicatedJobs[pw-node].template.spec.completions: 32 -> \"32\"",
            "~ abtest-train:spec.replicatedJobs[pw-node].template.spec.template.spec.nodeSelector"
            "[cloud.google.com/reservation-name]: example-reservation -> other-reservation",
        ]
        self.assertEqual(sorted(lines), sorted(expected), out)

    def test_changed_flags_inside_long_startup_lines_are_reported_as_flags(self):
        b = self.edited("flags.txt", ("--mesh_fsdp=32 ", "--mesh_fsdp=16 "),
                        ("--xla_tpu_dvfs_p_state=7'", "--xla_tpu_dvfs_p_state=5'"),
                        ('ORCHESTRATOR_ID="abtest-orch"', 'ORCHESTRATOR_ID="abtest-orch-2"'))
        out, _ = self.diff(FIXTURE, b, rc=1)
        self.assertEqual(out.splitlines(), [
            f"~ abtest-orch:{CLIENT}.startup.env.ORCHESTRATOR_ID: abtest-orch -> abtest-orch-2",
            f"~ abtest-train:{CLIENT}.startup.env.LIBTPU_INIT_ARGS[--xla_tpu_dvfs_p_state]: 7 -> 5",
            f"~ abtest-train:{CLIENT}.startup.argv[--mesh_fsdp]: 32 -> 16",
        ])
        self.assertLess(max(len(line) for line in out.splitlines()), 200,
                        "no 4,000-character lines")

    def test_documents_by_name_by_role_and_renamed(self):
        bench = self.bench("plain.yaml")
        out, _ = self.diff(FIXTURE, bench, rc=1)
        # The only trainer on each side: paired, said in one line, the name a difference.
        self.assertTrue(
            out.startswith(f"(paired JobSet abtest-train ({FIXTURE}:269) with abtest-bench "
                           f"({bench}:1): the only trainer JobSet on each side)\n"), out)
        self.assertIn("~ abtest-train:metadata.name: abtest-train -> abtest-bench\n", out)
        self.assertIn("- abtest-orch: only in", out)
        self.assertNotIn("+ abtest-bench: only in", out)
        out, _ = self.diff("--by-role", FIXTURE, bench, rc=1)
        self.assertIn("~ trainer:metadata.name: abtest-train -> abtest-bench", out)
        self.assertIn("- orchestrator: only in", out)
        self.assertIn("- rollout: only in", out)
        self.assertIn(f"~ trainer:{CLIENT}.startup.argv[--worker_id]: abtest-train -> abtest-bench",
                      out)
        # Two bench variants of a sweep, named apart: --rename makes the names equal.
        a = self.bench("sweep-a.yaml", "--maxtext-flag", "ragged_buffer_factor=2.5",
                       bench_name="sweep-a")
        b = self.bench("sweep-b.yaml", "--maxtext-flag", "ragged_buffer_factor=3.0",
                       bench_name="sweep-b")
        out, _ = self.diff(a, b, "--rename", "sweep-a=sweep-b", rc=1)
        self.assertEqual(
            out, f"~ sweep-a:{CLIENT}.startup.env.MAXTEXT_EXTRA_FLAGS[ragged_buffer_factor]: "
            "2.5 -> 3.0\n")

    def test_two_runs_of_one_experiment_named_apart_are_paired(self):
        out, _ = self.diff(HIGH, LOW, rc=1)
        lines = out.splitlines()
        self.assertEqual(lines[:3], [
            f"(paired Workload hp-abc ({HIGH}:2) with lp-abc ({LOW}:2): the only Workload on "
            "each side)",
            f"(paired PodGroup hp-abc-workers-def ({HIGH}:17) with lp-abc-workers-def ({LOW}:17):"
            " the only PodGroup on each side)",
            f"(paired JobSet hp-js ({HIGH}:33) with lp-js ({LOW}:33): the only JobSet on each "
            "side)",
        ])
        self.assertIn("~ hp-js:metadata.name: hp-js -> lp-js", lines)
        self.assertIn(
            "~ hp-js:spec.replicatedJobs[rj].template.spec.template.spec.priorityClassName: "
            "high-priority -> low-priority", lines)
        self.assertEqual(len(lines), 3 + 8, out)
        # The names equated, inside values too: what is left is the experiment's variable.
        out, _ = self.diff(HIGH, LOW, "--rename", "hp-js=lp-js", "--rename", "hp-abc=lp-abc",
                           "--rename", "hp-abc-workers-def=lp-abc-workers-def", rc=1)
        self.assertEqual(
            out, "~ PodGroup/hp-abc-workers-def:spec.priorityClassName: high-priority -> "
            "low-priority\n~ hp-js:spec.replicatedJobs[rj].template.spec.template.spec."
            "priorityClassName: high-priority -> low-priority\n")
        # Only the names differ: still different (exit 1), and --ignore of them makes it same.
        low_named = self.write("low-named.yaml", read(HIGH).replace("hp-", "lp-"))
        out, _ = self.diff(HIGH, low_named, rc=1)
        self.assertEqual(len(out.splitlines()), 3 + 6, out)
        out, _ = self.diff(HIGH, low_named, "--ignore", "*", rc=0)
        self.assertEqual(len(out.splitlines()), 3, "the pairing lines stay")
        doc = json.loads(self.diff("--json", HIGH, LOW, rc=1)[0])
        validate(DIFF_SCHEMA, doc)
        self.assertEqual([d["paired_by"] for d in doc["documents"]], ["only-one"] * 3)
        self.assertEqual(doc["documents"][2]["b_name"], "lp-js")
        out, _ = self.diff("--stat", HIGH, LOW, rc=1)
        self.assertTrue(out.endswith("; 3 pairs of the only document of a kind\n"), out)
        # Two JobSets on one side: which is the other's cannot be told, so neither is paired.
        both = self.write("both.yaml", read(HIGH) + read(LOW))
        out, _ = self.diff(HIGH, both, rc=1)
        self.assertNotIn("(paired JobSet", out)
        self.assertIn("+ lp-js: only in", out)

    def test_ignore_only_and_ignore_file(self):
        b = self.edited("ign.txt", ("ragged_buffer_factor=2.0", "ragged_buffer_factor=2.5"),
                        ("--mesh_fsdp=32 ", "--mesh_fsdp=16 "))
        out, _ = self.diff(FIXTURE, b, "--ignore", "*MAXTEXT_EXTRA_FLAGS[ragged_buffer_factor]",
                           rc=1)
        self.assertEqual(out, f"~ abtest-train:{CLIENT}.startup.argv[--mesh_fsdp]: 32 -> 16\n")
        out, _ = self.diff(FIXTURE, b, "--only", "abtest-train:*.startup.env.MAXTEXT_EXTRA_FLAGS",
                           rc=1)
        self.assertEqual(out.count("\n"), 1)
        self.assertIn("ragged_buffer_factor", out)
        ignore = self.write(
            "accepted.txt", "# accepted\n*.startup.argv[--mesh_fsdp]\n\n"
            "*.startup.env.MAXTEXT_EXTRA_FLAGS\n")
        out, err = self.diff(FIXTURE, b, "--ignore-file", ignore, rc=0)
        self.assertEqual(out, "")
        out, _ = self.diff(FIXTURE, b, "--ignore-file", ignore, "--json", rc=0)
        self.assertEqual(json.loads(out)["summary"]["ignored"], 2)
        out, _ = self.diff(FIXTURE, b, "--ignore-file", ignore, "--stat", rc=0)
        self.assertIn("2 ignored", out)
        _, err = self.diff(FIXTURE, b, "--ignore-file", os.path.join(self.tmp.name, "none.txt"),
                           rc=2)
        self.assertIn("none.txt: cannot open", err)

    def test_stat(self):
        out, _ = self.diff(FIXTURE, V5P, "--stat", rc=1)
        lines = out.splitlines()
        self.assertRegex(
            lines[-1], r"^\d+ differences in 3 documents: \d+ added, \d+ removed, \d+ changed, "
            r"0 type-changed$")
        flags_row = (r"abtest-train +replicatedJobs\[proc\]\.containers\[main\]\.startup\.env\."
                     r"MAXTEXT_EXTRA_FLAGS +\d+ +\(\+\d+ -\d+ ~\d+ !0\)$")
        self.assertTrue(any(re.match(flags_row, l) for l in lines), out)
        total = int(lines[-1].split()[0])
        self.assertEqual(total, sum(int(re.split(r" {2,}", l.strip())[2]) for l in lines[:-1]))
        text, _ = self.diff(FIXTURE, V5P, rc=1)
        # One line per difference; indented lines below one (leaves, line diffs) belong to it.
        self.assertEqual(total, len([l for l in text.splitlines() if not l.startswith(" ")]))

    def test_json_schema(self):
        bench = self.bench("json.yaml", "--trainer-slice", "tpu7x:4x4x4")
        cases = (
            [FIXTURE, V5P],
            [FIXTURE, FIXTURE],
            ["--by-role", FIXTURE, bench],
            ["--expect-bench", FIXTURE, bench],
        )
        for args in cases:
            out, _ = self.diff("--json", *args)
            doc = json.loads(out)
            validate(DIFF_SCHEMA, doc)
            self.assertEqual(doc["summary"]["total"], len(doc["differences"]))
        self.assertEqual(doc["mode"], "expect-bench")
        self.assertEqual(doc["result"], "pass")
        self.assertTrue(all(d["allowed"] for d in doc["differences"]))
        slice_paths = [d["path"] for d in doc["differences"] if d["change"] == "trainer-slice"]
        self.assertIn("spec.replicatedJobs[pw-node].template.spec.completions", slice_paths)
        out, _ = self.diff("--json", FIXTURE, V5P, rc=1)
        doc = json.loads(out)
        added = [d for d in doc["differences"] if d["kind"] == "added"]
        self.assertTrue(added and all(d["old"] is None for d in added))

    def test_json_lists_what_reading_each_side_noted(self):
        # The v5p fixture repeats a key in its orchestrator: a note per side, A's then B's.
        out, err = self.diff("--json", V5P, V5P, rc=0)
        self.assertEqual(err, "", "notes are info: hidden without -v")
        notes = json.loads(out)["diagnostics"]
        self.assertEqual(len(notes), 2, notes)
        self.assertEqual(notes[0], notes[1])
        self.assertEqual(notes[0]["severity"], "note")
        self.assertRegex(notes[0]["where"], r"launch_dryrun_v5p\.txt:\d+$")
        _, err = self.diff("-v", V5P, V5P, rc=0)
        said = [line for line in err.splitlines() if notes[0]["where"] in line]
        self.assertEqual(
            said, ["diff-renders: info: " + notes[0]["where"] + ": " + notes[0]["message"]] * 2)

    def test_colour_only_on_a_terminal_and_not_with_no_color(self):
        b = self.edited("colour.txt", ("ragged_buffer_factor=2.0", "ragged_buffer_factor=2.5"))
        out, _ = self.diff(FIXTURE, b, rc=1)
        self.assertNotIn("\033[", out, "a pipe gets no colour")
        out, _ = self.diff(FIXTURE, b, "--color", "always", rc=1)
        self.assertTrue(out.startswith("\033[33m~ ") and out.endswith("\033[0m\n"), repr(out))

        def on_terminal(env):
            master, slave = pty.openpty()
            full_env = dict(os.environ)
            full_env.pop("NO_COLOR", None)
            full_env.update(env)
            proc = subprocess.Popen([TOOL, FIXTURE, b], stdout=slave, stderr=subprocess.PIPE,
                                    env=full_env)
            os.close(slave)
            chunks = []
            while True:
                try:
                    data = os.read(master, 65536)
                except OSError:
                    break
                if not data:
                    break
                chunks.append(data)
            proc.wait(timeout=60)
            assert proc.stderr is not None  # stderr=PIPE
            proc.stderr.close()
            os.close(master)
            return proc.returncode, b"".join(chunks).decode()

        rc, out = on_terminal({})
        self.assertEqual(rc, 1)
        self.assertIn("\033[33m~ ", out)
        rc, out = on_terminal({"NO_COLOR": "1"})
        self.assertEqual(rc, 1)
        self.assertNotIn("\033[", out)
        self.assertIn("~ abtest-train:", out)

    # --- --expect-bench ----------------------------------------------------------------------
    KNOBS: dict[str, list[str]] = {
        "defaults": [],
        "maxtext-flag": [
            "--maxtext-flag", "ragged_buffer_factor=2.75", "--maxtext-flag", "brand_new=1"
        ],
        "maxtext-replace": ["--maxtext-replace", "sa_block_q=2048"],
        "libtpu-flag": [
            "--libtpu-flag=--xla_tpu_scoped_vmem_limit_kib=65536", "--libtpu-flag", "--xla_new=3"
        ],
        "trainer-arg": [
            "--trainer-arg=--compute_logps_chunk_size=1024", "--trainer-arg=--new_flag"
        ],
        "trainer-arg-remove": ["--trainer-arg-remove=--profiler_steps"],
        "orch-arg": ["--orch-arg=--max_steps=3"],
        "trainer-slice 4x4x4": ["--trainer-slice", "tpu7x:4x4x4"],
        "trainer-slice 8x8x8": ["--trainer-slice", "tpu7x:8x8x8"],
        "trainer-slice 2x2x2": ["--trainer-slice", "tpu7x:2x2x2"],
        "logps-chunk": ["--logps-chunk", "4096"],
        "profile-window": ["--profile-window", "3:2"],
        "dump-hlo": ["--dump-hlo", "--output-prefix", "gs://b/bench"],
        "driver settings": [
            "--steps", "4", "--micro-steps", "7", "--seed", "11", "--routing-scale", "0.5",
            "--logp-gates", "off", "--advantages", "zero", "--pad-position", "start", "--pad-align",
            "2048", "--driver-env", "REAL_LEN=1000"
        ],
        "namespace image output-prefix": [
            "--namespace", "other-ns", "--image", "example/other:2", "--output-prefix",
            "gs://b/bench"
        ],
        "everything": [
            "--maxtext-flag", "ragged_buffer_factor=2.75", "--libtpu-flag=--xla_x=1",
            "--trainer-arg=--k=v", "--orch-arg=--max_steps=3", "--trainer-slice", "tpu7x:4x4x4",
            "--logps-chunk", "1024", "--profile-window", "1:1", "--dump-hlo", "--namespace", "n2"
        ],
    }

    def test_expect_bench_passes_for_every_knob(self):
        for knob, args in self.KNOBS.items():
            with self.subTest(knob=knob):
                bench = self.bench("knob-" + re.sub(r"\W+", "-", knob) + ".yaml", *args)
                out, err = self.diff("--expect-bench", FIXTURE, bench, rc=0)
                self.assertEqual(out, "")
                out, _ = self.diff("--expect-bench", "--show-allowed", FIXTURE, bench, rc=0)
                self.assertNotIn("[unexpected", out)
                self.assertIn("[allowed: client-script]", out)
                if knob.startswith("trainer-slice"):
                    self.assertIn("[allowed: trainer-slice]", out)
                if knob == "libtpu-flag":
                    self.assertEqual(out.count("[--xla_new]: --xla_new=3  [allowed: libtpu-flag]"),
                                     3, out)
        no_proxy = os.path.join(TESTDATA, "trainer_no_proxy.txt")
        for source, args in ((V5P, ["--trainer-slice", "v5p:4x4x8", "--libtpu-flag=--xla_y=2"]),
                             (no_proxy, ["--libtpu-flag=--xla_y=2"])):
            with self.subTest(source=source):
                bench = self.bench(os.path.basename(source) + ".yaml", *args, source=source)
                self.diff("--expect-bench", source, bench, rc=0)

    def test_expect_bench_accepts_new_driver_settings_and_orchestrator_copies(self):
        # ORCH_* copies appear only when the orchestrator sets them; they and ROUTING & co. live
        # under startup.driver, which --expect-bench allows.
        anchor = 'ORCHESTRATOR_ID="abtest-orch"'
        source = self.edited("packed-e2e.txt",
                             (anchor, "PACK_PAD_POSITION=start RETURN_ROUTED_EXPERTS=1 " + anchor))
        bench = self.bench("packed-bench.yaml", "--routing", "on", "--allow-fallbacks",
                           "--logps-pass", "off", "--pad-position", "end", "--pad-align", "512",
                           source=source)
        self.diff("--expect-bench", source, bench, rc=0)
        out, _ = self.diff("--expect-bench", "--show-allowed", source, bench, rc=0)
        self.assertNotIn("[unexpected", out)
        self.assertIn(f"{CLIENT}.startup.driver: ", out)
        out, _ = self.diff("--expect-bench", "--json", source, bench, rc=0)
        (driver, ) = [
            d for d in json.loads(out)["differences"] if d["path"] == f"{CLIENT}.startup.driver"
        ]
        self.assertEqual((driver["allowed"], driver["change"]), (True, "driver-settings"))
        settings = yaml.safe_load(driver["new"])
        expected = {
            "ROUTING": "on", "ALLOW_FALLBACKS": "1", "LOGPS_PASS": "off", "PAD_POSITION": "end",
            "PAD_ALIGN": "512", "ORCH_PACK_PAD_POSITION": "start", "ORCH_RETURN_ROUTED_EXPERTS": "1"
        }
        for name, value in expected.items():
            self.assertEqual(settings[name], value, name)

    def test_expect_bench_accepts_dropped_checkpoints_and_trainer_profiler(self):
        # --weights random (the default) drops the checkpoint in its three places, and
        # --profile-window turns the trainer's own profiler off: changes render-bench makes.
        source = os.path.join(TESTDATA, "launch_dryrun_weights_profiler.txt")
        bench = self.bench("weights.yaml", "--profile-window", "3:2", source=source)
        self.diff("--expect-bench", source, bench, rc=0)
        out, _ = self.diff("--expect-bench", "--json", source, bench, rc=0)
        changes = {d["path"]: d["change"] for d in json.loads(out)["differences"]}
        self.assertEqual(changes[f"{CLIENT}.startup.argv[--maxtext_ckpt_path]"], "weights")
        self.assertEqual(changes[f"{CLIENT}.startup.env.MAXTEXT_CKPT"], "weights")
        self.assertEqual(changes[f"{CLIENT}.startup.env.MAXTEXT_EXTRA_FLAGS[load_parameters_path]"],
                         "weights")
        self.assertEqual(changes[f"{CLIENT}.startup.env.MAXTEXT_EXTRA_FLAGS[profiler]"], "profiler")
        self.assertEqual(changes[f"{CLIENT}.startup.argv[--profiler_steps]"], "profiler")
        # --weights checkpoint: the e2e's checkpoint stays, so no weights change at all.
        kept = self.bench("kept.yaml", "--weights", "checkpoint", source=source)
        out, _ = self.diff("--expect-bench", "--json", source, kept, rc=0)
        self.assertNotIn("weights", [d["change"] for d in json.loads(out)["differences"]])

    def test_expect_bench_fails_for_a_hand_tampered_bench(self):
        bench = read(
            self.bench("tamper-base.yaml", "--trainer-slice", "tpu7x:4x4x4",
                       "--libtpu-flag=--xla_tpu_scoped_vmem_limit_kib=65536"))
        cases = [
            ("terminationGracePeriodSeconds: 360", "terminationGracePeriodSeconds: 30",
             "spec.replicatedJobs[proc].template.spec.template.spec.terminationGracePeriodSeconds: 360 -> 30"
             "  [unexpected: not something render-bench changes]"),
            ("completions: 16", "completions: 8",
             "spec.replicatedJobs[pw-node].template.spec.completions: 32 -> 8  [unexpected: the bench slice "
             "tpu7x:4x4x4 (pathways-rm --instance_type) gives 16 here]"),
            ('- "--xla_tpu_scoped_vmem_limit_kib=65536"',
             '- "--xla_tpu_scoped_vmem_limit_kib=65000"',
             f"{PROXY}.args[--xla_tpu_scoped_vmem_limit_kib]: 65472 -> 65000  [unexpected: the client's "
             "LIBTPU_INIT_ARGS has --xla_tpu_scoped_vmem_limit_kib=65536 where this has "
             "--xla_tpu_scoped_vmem_limit_kib=65000]"),
            ("effect: NoSchedule", "effect: NoExecute", "tolerations"),
            ("maxRestarts: 0", "maxRestarts: 1", "spec.failurePolicy.maxRestarts: 3 -> 1"),
        ]
        for old, new, expected in cases:
            with self.subTest(tamper=new):
                self.assertTrue(old in bench, old)
                path = self.write("tampered.yaml", bench.replace(old, new, 1))
                out, err = self.diff("--expect-bench", FIXTURE, path, rc=1)
                self.assertEqual(err, "")
                lines = out.splitlines()
                # A libtpu flag that differs between its places makes the client and the proxy
                # unexpected; the workers, which hold the client's value, are allowed
                # (libtpu-workers: they run the client's whole libtpu set).
                count = 2 if "LIBTPU" in expected else 1
                self.assertEqual(len(lines), count, out)
                self.assertTrue(any(expected in line for line in lines), out)
                self.assertTrue(all("[unexpected: " in line for line in lines), out)
                out, _ = self.diff("--expect-bench", "--json", FIXTURE, path, rc=1)
                doc = json.loads(out)
                self.assertEqual((doc["result"], doc["summary"]["unexpected"]), ("fail", count))
        # The tampered difference, once accepted, passes.
        tampered = bench.replace("terminationGracePeriodSeconds: 360",
                                 "terminationGracePeriodSeconds: 30", 1)
        path = self.write("tampered.yaml", tampered)
        self.diff("--expect-bench", FIXTURE, path, "--ignore", "*terminationGracePeriodSeconds",
                  rc=0)

    # --- errors ------------------------------------------------------------------------------
    def assert_error(self, args, expected, stdin=None):
        assert_bad_input(self, "diff-renders", run(args, stdin=stdin), expected)

    def test_bad_inputs(self):
        missing = os.path.join(TESTDATA, "bad", "missing.txt")
        self.assert_error([missing, FIXTURE], f"diff-renders: {missing}: cannot open")
        self.assert_error([FIXTURE, NOT_JOBSET],
                          f"{NOT_JOBSET}:1: not a JobSet: the input holds Deployment 'web'")
        self.assert_error([os.path.join(TESTDATA, "bad", "not_yaml.txt"), FIXTURE],
                          "no JobSet in the input")
        self.assert_error([os.path.join(TESTDATA, "bad", "empty.txt"), FIXTURE],
                          "no JobSet in the input")
        broken = self.write(
            "broken.yaml", "apiVersion: jobset.x-k8s.io/v1alpha2\nkind: JobSet\n"
            "metadata:\n  name: [unclosed\n")
        self.assert_error([FIXTURE, broken], f"{broken}:")
        self.assert_error(["-", FIXTURE], "<stdin>", stdin="")
        self.assert_error(["-", "-"], "only one of A and B")
        self.assert_error([FIXTURE], "B")
        self.assert_error([FIXTURE, FIXTURE, "--rename", "novalue"], "OLD=NEW")
        self.assert_error([FIXTURE, FIXTURE, "--json", "--stat"], "--stat")
        self.assert_error(["--expect-bench", "--by-role", FIXTURE, FIXTURE], "--expect-bench")
        no_trainer = os.path.join(TESTDATA, "bad", "no_trainer.txt")
        self.assert_error(["--expect-bench", no_trainer, FIXTURE], "no trainer JobSet")

    # --- issue 16: real renders ------------------------------------------------------------------

    def test_added_subtree_shows_its_leaves(self):
        # xpk 254bbe3f added a tolerations list to the worker of 678d7a9f.
        out, _ = self.diff(os.path.join(XPK, "xpk_pathways_v5p-8_at_678d7a9f.yaml"), XPK_254, rc=1)
        self.assertEqual(
            out, "+ golden-workload:spec.replicatedJobs[worker].template.spec.template"
            ".spec.tolerations:\n"
            "    [0].operator: Exists\n"
            "    [0].key: google.com/tpu\n")
        # 84e22e26 moved an annotation between template levels: removed here, added there.
        out, _ = self.diff(os.path.join(XPK, "xpk_pathways_v5p-8_at_678d7a9f.yaml"),
                           os.path.join(XPK, "xpk_pathways_v5p-8_at_84e22e26.yaml"), rc=1)
        self.assertIn(
            "- golden-workload:spec.replicatedJobs[pathways-head].template.metadata:\n"
            "    annotations[alpha.jobset.sigs.k8s.io/exclusive-topology]: "
            "kubernetes.io/hostname\n", out)
        self.assertNotIn("...", out)

    def test_whole_containers_list_leaves_and_long_lists_are_cut(self):
        old = os.path.join(XPK, "xpk_super-slicing_at_bcbe4479.yaml")
        new = os.path.join(XPK, "xpk_super-slicing_at_254bbe3f.yaml")
        out, _ = self.diff(old, new, rc=1)
        self.assertIn("    command[2]: echo XPK Start: $(date);... (16 lines)\n", out)
        self.assertRegex(out,
                         r"\n    onExitCodes\.values: \[42, 127, [^\n]*, \.\.\.\] \(130 items\)\n")
        # --json keeps whole values (the subtree as YAML).
        doc = json.loads(self.diff(old, new, "--json", rc=1)[0])
        added = [d for d in doc["differences"] if d["path"].endswith("containers[jax-tpu-2]")]
        self.assertEqual(len(added), 1)
        self.assertIn("exit $EXIT_CODE", added[0]["new"])

    def test_null_mapping_against_a_mapping_is_its_entries(self):
        out, _ = self.diff(os.path.join(XPK, "xpk_non-pathways_v5p-8_at_84e22e26.yaml"),
                           os.path.join(XPK, "xpk_sub-slicing_at_254bbe3f.yaml"), rc=1)
        self.assertNotIn("!", out)
        self.assertIn(
            "- golden-workload:metadata.annotations[alpha.jobset.sigs.k8s.io/exclusive-topology]: "
            "cloud.google.com/gke-nodepool\n", out)
        self.assertIn(
            "+ golden-workload:spec.replicatedJobs[slice-job].template.spec.template.metadata"
            ".annotations[cloud.google.com/gke-tpu-slice-topology]: 2x4\n", out)

    def test_changed_script_is_a_line_diff(self):
        source = os.path.join(XPK, "xpk_super-slicing_at_254bbe3f.yaml")
        text = read(source).replace("(bash hello)", "(bash hello --steps=20)")
        edited = self.write("xpk_script_edited.yaml", text)
        out, _ = self.diff(source, edited, rc=1)
        path = ("golden-workload:spec.replicatedJobs[slice-job].template.spec.template.spec"
                ".containers[jax-tpu-1].command[2]")
        self.assertIn(
            f"~ {path}: 16 lines -> 16 lines\n"
            "    @@ -3,5 +3,5 @@\n"
            "      trap _sigterm SIGTERM;\n", out)
        self.assertIn("    - (bash hello) & PID=$!;\n    + (bash hello --steps=20) & PID=$!;\n",
                      out)
        self.assertNotIn("(16 lines)", out)
        doc = json.loads(self.diff(source, edited, "--json", rc=1)[0])
        self.assertEqual(len(doc["differences"]), 2)
        self.assertIn("exit $EXIT_CODE", doc["differences"][0]["old"])
        self.assertIn("(bash hello --steps=20)", doc["differences"][0]["new"])

    def test_flag_in_any_command_line_string(self):
        # An env value (not a known flag variable) and a container's bash -c args: one flag each.
        source = os.path.join(XPK, "xpk_super-slicing_at_254bbe3f.yaml")
        text = read(source)
        flags = " ".join(f"--xla_knob_{i}=true" for i in range(40))
        env = ("                env:\n                - name: TRAIN_CMD\n"
               "                  value: \"python3 -m maxtext.train base.yml steps=10 --lr 0.1 "
               f"{flags}\"\n")
        anchor = "                env: \n"  # xpk writes an empty env (null), trailing blank
        self.assertEqual(text.count(anchor), 2)
        old = self.write("cmd_a.yaml", text.replace(anchor, env, 1))
        new_env = env.replace("--lr 0.1", "--lr 0.2").replace("steps=10", "steps=12")
        new = self.write("cmd_b.yaml", text.replace(anchor, new_env, 1))
        out, _ = self.diff(old, new, rc=1)
        prefix = ("~ golden-workload:spec.replicatedJobs[slice-job].template.spec.template.spec"
                  ".containers[jax-tpu-1].env[TRAIN_CMD].value")
        self.assertEqual(out, f"{prefix}[steps]: 10 -> 12\n{prefix}[--lr]: 0.1 -> 0.2\n")

    def test_kubectl_get_of_the_applied_render(self):
        out, _ = self.diff(XPK_254, XPK_LIVE, rc=0)
        self.assertEqual(out.count("\n"), 1, out)
        self.assertTrue(
            out.startswith("(8 server-populated fields not compared, --server-fields "
                           "shows them: golden-workload:metadata.creationTimestamp, "), out)
        self.assertIn("golden-workload:status", out)
        out, _ = self.diff(XPK_254, XPK_LIVE, "--server-fields", rc=1)
        server_fields = (
            "metadata.uid",
            "metadata.resourceVersion",
            "metadata.generation",
            "metadata.creationTimestamp",
            "metadata.managedFields",
            "status",
            "metadata.namespace",
            "metadata.annotations:\n    [kubectl.kubernetes.io/last-applied-configuration]",
        )
        for field in server_fields:
            self.assertIn(f"+ golden-workload:{field}", out)
        self.assertNotIn("not compared", out)
        # A real change against the live object is still found, the server fields still hidden.
        out, _ = self.diff(os.path.join(XPK, "xpk_pathways_v5p-8_at_678d7a9f.yaml"), XPK_LIVE, rc=1)
        self.assertTrue(
            out.startswith("+ golden-workload:spec.replicatedJobs[worker].template.spec"
                           ".template.spec.tolerations:\n"), out)
        self.assertIn("(8 server-populated fields not compared", out)
        doc = json.loads(self.diff(XPK_254, XPK_LIVE, "--json", rc=0)[0])
        validate(DIFF_SCHEMA, doc)
        self.assertEqual(doc["summary"]["server_fields_hidden"], 8)
        self.assertEqual(doc["summary"]["defaults_hidden"], 0)
        self.assertEqual(len(doc["hidden_fields"]), 8)
        self.assertEqual(doc["summary"]["total"], 0)
        out, _ = self.diff(XPK_254, XPK_LIVE, "--stat", rc=0)
        self.assertIn("; 8 server-populated hidden", out)

    def test_kubectl_lists_and_generated_names(self):
        # A List's items are the documents, each at its own line.
        out, _ = self.diff(LIVE_7649, LIVE_8101, rc=1)
        self.assertTrue(
            out.startswith(f"(paired JobSet sleep-job-x5ffx ({LIVE_7649}:1) with test-tas "
                           f"({LIVE_8101}:3): the only JobSet on each side)\n"), out)
        self.assertIn("~ sleep-job-x5ffx:metadata.name: sleep-job-x5ffx -> test-tas\n", out)
        out, _ = self.diff(LIVE_8101, LIVE_8101, rc=0)
        self.assertEqual(out, "")
        # A render named by generateName only: the server's made-up name is no difference.
        out, _ = self.diff(KUEUE_SAMPLE, LIVE_7649, rc=1)
        self.assertTrue(
            out.startswith(f"(paired JobSet sleep-job- ({KUEUE_SAMPLE}:1) with "
                           f"sleep-job-x5ffx ({LIVE_7649}:1): "), out)
        self.assertNotIn(":metadata.name:", out)
        self.assertIn(", sleep-job-:metadata.name)\n", out)
        empty = self.write("empty-list.yaml", "apiVersion: v1\nkind: List\nitems: []\n")
        self.assert_error(
            [empty, LIVE_8101],
            f"diff-renders: {empty}:1: not a JobSet: the input holds List '' (line 1)")

    def test_a_render_against_its_real_live_object_folds_defaults(self):
        out, _ = self.diff(KUEUE_SAMPLE, LIVE_7649, rc=1)
        lines = out.splitlines()
        # What the reporter changed stays: the queue label dropped, args and the quoted cpu.
        self.assertEqual([l for l in lines if l[:1] in "~+-!"], [
            "- sleep-job-:metadata.labels:",
            "! sleep-job-:spec.replicatedJobs[workers].template.spec.template.spec.containers"
            "[sleep].resources.requests.cpu: 1 -> \"1\"",
            "~ sleep-job-:spec.replicatedJobs[workers].template.spec.template.spec.containers"
            "[sleep].args[#0]: 100s -> 10s",
            "! sleep-job-:spec.replicatedJobs[driver].template.spec.template.spec.containers"
            "[sleep].resources.requests.cpu: 2 -> \"2\"",
            "~ sleep-job-:spec.replicatedJobs[driver].template.spec.template.spec.containers"
            "[sleep].args[#0]: 100s -> 10s",
        ])
        self.assertTrue(
            lines[-1].startswith("(15 fields the live object has from API defaults or admission "
                                 "not compared, --server-fields shows them: sleep-job-:spec."
                                 "successPolicy.operator, "), lines[-1])
        self.assertIn("sleep-job-:spec.replicatedJobs[driver].replicas, ", lines[-1])
        self.assertTrue(lines[-2].startswith("(7 server-populated fields not compared"), out)
        # --server-fields compares them all.
        out, _ = self.diff(KUEUE_SAMPLE, LIVE_7649, "--server-fields", rc=1)
        self.assertIn(
            "+ sleep-job-:spec.replicatedJobs[workers].template.spec.completionMode: "
            "Indexed\n", out)
        self.assertIn("+ sleep-job-:spec.suspend: false\n", out)
        self.assertNotIn("not compared", out)
        doc = json.loads(self.diff(KUEUE_SAMPLE, LIVE_7649, "--json", rc=1)[0])
        validate(DIFF_SCHEMA, doc)
        self.assertEqual(doc["summary"]["defaults_hidden"], 15)
        self.assertEqual(doc["summary"]["server_fields_hidden"], 7)
        hidden = doc["hidden_fields"]
        self.assertEqual([h["source"] for h in hidden], ["server"] * 7 + ["default"] * 15)
        self.assertEqual(
            hidden[7], {
                "document": "sleep-job-", "path": "spec.successPolicy.operator",
                "source": "default",
                "reason": "JobSet webhook: without a successPolicy a JobSet succeeds when all its "
                "jobs do"
            })
        out, _ = self.diff(KUEUE_SAMPLE, LIVE_7649, "--stat", rc=1)
        self.assertTrue(out.endswith("; 7 server-populated hidden; 15 defaulted hidden\n"), out)

    def test_kueue_admission_fields_fold_but_a_changed_toleration_stays(self):
        out, _ = self.diff(RENDER_8101, LIVE_8101, rc=1)
        pod = "test-tas:spec.replicatedJobs[node].template.spec.template.spec"
        self.assertEqual(out.splitlines()[:2], [
            f"~ {pod}.tolerations[0].operator: Equal -> Exists",
            f"- {pod}.tolerations[0].value: true",
        ])
        self.assertIn("(14 fields the live object has from API defaults or admission", out)
        self.assertIn(f"{pod}.nodeSelector[nvidia.com/gpu.present])\n", out)
        # The other way round: the live object as A, the render as B.
        out, _ = self.diff(LIVE_8101, RENDER_8101, rc=1)
        self.assertIn("(14 fields the live object has", out)
        # Two live objects: nothing of the sort is folded.
        out, _ = self.diff(LIVE_7649, LIVE_8101, rc=1)
        self.assertNotIn("from API defaults", out)
        # A pod template Kueue did not admit: a toleration the render lacks is the user's change.
        out, _ = self.diff(os.path.join(XPK, "xpk_pathways_v5p-8_at_678d7a9f.yaml"), XPK_LIVE, rc=1)
        self.assertIn(".template.spec.template.spec.tolerations:\n", out)

    def test_invalid_real_render_is_one_line_error(self):
        bad = os.path.join(XPK, "xpk_pathways_v5p-8_at_989ba245_invalid.yaml")
        self.assert_error([XPK_254, bad], f"diff-renders: {bad}:171: invalid YAML")

    def test_help_and_version(self):
        assert_help_and_version(self, "diff-renders", "--expect-bench")


if __name__ == "__main__":
    unittest.main()
