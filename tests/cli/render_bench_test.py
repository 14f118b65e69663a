"""CLI tests of render-bench: runs the built tool on the fixtures in testdata/ and checks the bench
JobSet it writes, its client script (parsed by bash and executed with a stub python3), its errors
and its exit codes."""

import base64
import gzip
import json
import os
import re
import shlex
import stat
import subprocess
import tempfile
import unittest

import yaml

from cli_common import BAD_INPUTS as BAD
from cli_common import LAUNCH_DRYRUN as FIXTURE
from cli_common import LAUNCH_DRYRUN_V5P as V5P
from cli_common import BIN, DRIVER, TESTDATA, assert_bad_input, assert_help_and_version, run_tool
from cli_common import command_of, without_packed_driver
from cli_common import container, containers, script_of, startup_env, startup_words

TOOL = os.path.join(BIN, "render-bench")
NO_PROXY = os.path.join(TESTDATA, "trainer_no_proxy.txt")
# The main fixture with a checkpoint in three places, the trainer's own profiler on, and a rollout
# that sets RETURN_ROUTED_EXPERTS=false in its environment (testdata/SOURCES.md).
WEIGHTS = os.path.join(TESTDATA, "launch_dryrun_weights_profiler.txt")
DRIVER_PATH = "/tmp/bench_driver.py"
DRIVER_SOURCE = DRIVER
# The driver in a client command: verbatim in the script's heredoc, or, when verbatim it would not
# fit in the script's one command argument (the embedded driver does not), gzip + base64 in the
# arguments after the script, which the script joins and unpacks.
DRIVER_BLOCK = re.compile(r"(?s)cat > /tmp/bench_driver\.py <<'(\w+)'.*?\n\s*\1\n")
PACKED_DRIVER = "printf '%s' \"$@\" | base64 -d > /tmp/bench_driver.py.gz || "


def hostile_knobs(marker, flags):
    """The HOSTILE values (naming `marker`) and the knobs that carry each one into a render: argv,
    driver environment and, with `flags`, MaxText and libtpu flags where a value can be one."""
    values = [v.replace("{marker}", marker) for v in HOSTILE]
    args = []
    for i, value in enumerate(values):
        args += [
            f"--trainer-arg=--hostile_{i}={value}", f"--orch-arg=--hostile_{i}={value}",
            f"--driver-env=HOSTILE_{i}={value}"
        ]
        if flags and not re.search(r"\s", value) and value:
            args += [
                f"--maxtext-flag=hostile_{i}={value}", f"--libtpu-flag=--xla_hostile_{i}={value}"
            ]
    return values, args


def driver_of(command):
    """The driver a client command (bash, -c, script, arguments...) writes, decoded when it is
    packed into the arguments."""
    script = command[2]
    if PACKED_DRIVER in script:
        return gzip.decompress(base64.b64decode("".join(command[4:]))).decode("utf-8")
    verbatim = re.search(r"(?s)cat > /tmp/bench_driver\.py <<'(\w+)'\n(.*?\n)\1\n", script)
    return verbatim.group(2) if verbatim else None


HOSTILE = [
    "$(touch {marker})",
    "`touch {marker}`",
    "a'b\"c",
    "line1\nline2",
    "back\\slash\\",
    "d\u00e9j\u00e0 vu \u2713",
    "; touch {marker} #",
    "$HOME ${PATH} $((1+1))",
    "-leading-dash",
    "",
]


def driver_text():
    with open(DRIVER, encoding="utf-8") as f:
        return "".join(" " * 22 + line if line.strip() else line for line in f)


def run(args, stdin=None):
    return run_tool(TOOL, args, stdin=stdin, timeout=60)


def load_documents(path):
    """The YAML documents of a DRY_RUN file, as the launcher separates them."""
    with open(path, encoding="utf-8") as f:
        chunks = re.split(r"(?m)^---\n", f.read())
    docs = []
    for chunk in chunks:
        try:
            doc = yaml.safe_load(chunk)
        except yaml.YAMLError:
            continue
        if isinstance(doc, dict) and doc.get("kind") == "JobSet":
            docs.append(doc)
    return docs


def e2e_trainer(path=FIXTURE):
    for doc in load_documents(path):
        if "run_trainer_node.main" in json.dumps(doc):
            return doc
    raise AssertionError("fixture has no trainer")


class RenderBenchTest(unittest.TestCase):

    def render(self, *extra, path=FIXTURE, name="abtest-bench", stdin=None):
        rc, out, err = run([path, "--name", name, *extra], stdin=stdin)
        self.assertEqual(rc, 0, err)
        return yaml.safe_load(out), out, err

    def render_env(self, *extra, **render_args):
        """The trainer's startup environment in a render (as render()), and the tool's stderr."""
        bench, _, err = self.render(*extra, **render_args)
        return startup_env(script_of(bench)), err

    # --- what changes and what stays -----------------------------------------------------------
    def test_names_gang_id_and_max_restarts(self):
        bench, text, err = self.render()
        self.assertEqual(err, "", "without --explain the tool is quiet")
        self.assertEqual(text.count("\n---"), 0, "exactly one document")
        self.assertEqual(bench["metadata"]["name"], "abtest-bench")
        self.assertEqual(bench["metadata"]["labels"]["scheduling.x-k8s.io/gang-id"], "abtest-bench")
        self.assertEqual(bench["spec"]["failurePolicy"]["maxRestarts"], 0)
        e2e = e2e_trainer()
        self.assertEqual(bench["spec"]["failurePolicy"]["rules"],
                         e2e["spec"]["failurePolicy"]["rules"])
        self.assertNotIn("abtest-train", text.replace(driver_text(), ""))
        argv = shlex.split(startup_env(script_of(bench))["TRAINER_ARGV"])
        self.assertIn("--worker_id=abtest-bench", argv)

    def test_everything_else_is_kept(self):
        bench, _, _ = self.render()
        e2e = e2e_trainer()
        self.assertEqual(bench["metadata"]["namespace"], e2e["metadata"]["namespace"])
        for key in ("coordinator", "network", "startupPolicy", "successPolicy"):
            self.assertEqual(bench["spec"].get(key), e2e["spec"].get(key), key)
        for bench_job, e2e_job in zip(bench["spec"]["replicatedJobs"],
                                      e2e["spec"]["replicatedJobs"]):
            self.assertEqual(bench_job["name"], e2e_job["name"])
            b = bench_job["template"]["spec"]["template"]
            e = e2e_job["template"]["spec"]["template"]
            self.assertEqual(b["metadata"], e["metadata"])
            for key in ("nodeSelector", "tolerations", "affinity", "priorityClassName", "volumes",
                        "serviceAccountName", "hostNetwork", "dnsPolicy",
                        "terminationGracePeriodSeconds"):
                self.assertEqual(b["spec"].get(key), e["spec"].get(key), key)
        for (job, b), (_, e) in zip(containers(bench), containers(e2e_trainer())):
            for key in set(b) | set(e):
                if b["name"] == "main" and key == "command":
                    continue
                if b["name"] == "pathways-worker" and key == "env":
                    # Its LIBTPU_INIT_ARGS becomes the client's set plus the worker-only flags
                    # (test_workers_run_the_clients_libtpu_set_plus_their_extras); the rest stays.
                    self.assertEqual([x for x in b[key] if x["name"] != "LIBTPU_INIT_ARGS"],
                                     [x for x in e[key] if x["name"] != "LIBTPU_INIT_ARGS"])
                    continue
                self.assertEqual(b.get(key), e.get(key), f"{job}/{b['name']}.{key}")

    def test_quoted_strings_stay_strings(self):
        _, text, _ = self.render()
        node = yaml.compose(text)

        def scalars(n, path=""):
            if isinstance(n, yaml.MappingNode):
                for k, v in n.value:
                    yield from scalars(v, f"{path}.{k.value}")
            elif isinstance(n, yaml.SequenceNode):
                for i, v in enumerate(n.value):
                    yield from scalars(v, f"{path}[{i}]")
            else:
                yield path, n

        found = {p: n for p, n in scalars(node)}
        quoted = [p for p, n in found.items() if n.style in ('"', "'", "|")]
        for suffix in ("gke-tpu-slice-topology", "skip-tpu-webhook-check", "podset-slice-size",
                       "google.com/tpu"):
            hits = [p for p in found if p.endswith(suffix)]
            self.assertTrue(hits, suffix)
            for p in hits:
                self.assertIn(p, quoted, f"{p} must stay a quoted string")
        self.assertEqual(
            found[".spec.replicatedJobs[0].template.spec.template.spec.containers[0].command[2]"].
            style, "|")
        bench = yaml.safe_load(text)
        annotations = bench["spec"]["replicatedJobs"][1]["template"]["spec"]["template"][
            "metadata"]["annotations"]
        for value in annotations.values():
            self.assertIsInstance(value, str)

    # --- the client script ---------------------------------------------------------------------
    def test_client_script_passes_bash_n_and_carries_the_driver(self):
        bench, _, _ = self.render()
        script = script_of(bench)
        subprocess.run(["bash", "-n"], input=script, text=True, check=True)
        # The embedded driver is too large to go in verbatim: gzip + base64 in the arguments after
        # the script ($0 names it), each well under what one argument may hold, unpacked by it.
        command = command_of(bench)
        self.assertEqual(command[:2], ["bash", "-c"])
        self.assertEqual(command[3], "bench-client")
        self.assertGreaterEqual(len(command), 5)
        self.assertTrue(all(len(word.encode()) < 128 * 1024 for word in command))
        self.assertIn(PACKED_DRIVER, script)
        self.assertIn(f"gzip -dc {DRIVER_PATH}.gz > {DRIVER_PATH} || ", script)
        with open(DRIVER_SOURCE, encoding="utf-8") as f:
            self.assertEqual(driver_of(command), f.read())
        env = startup_env(script)
        e2e_env = startup_env(script_of(e2e_trainer()))
        keys = list(env)
        self.assertEqual(keys[:len(e2e_env)], list(e2e_env),
                         "the trainer's own environment comes first")
        for key, value in e2e_env.items():
            self.assertEqual(env[key], value, key)
        driver_keys = keys[len(e2e_env):]
        self.assertEqual(driver_keys[0], "BENCH_NAME")
        for key in ("STEPS", "MICRO_STEPS", "SEED", "ROUTING_TARGETS", "ROUTING_SCALE",
                    "LOGP_GATES", "ADVANTAGES", "STAGE_BOUNDARY", "TRAINER_ARGV", "ORCH_ARGV"):
            self.assertIn(key, driver_keys)
        # Unset, the driver follows the e2e orchestrator's packing and its own defaults.
        for key in ("PAD_POSITION", "PAD_ALIGN", "ROUTING", "ALLOW_FALLBACKS", "LOGPS_PASS"):
            self.assertNotIn(key, driver_keys)
        self.assertEqual(startup_words(script)[-2:], ["python3", DRIVER_PATH])
        e2e_words = startup_words(script_of(e2e_trainer()))
        first_flag = next(i for i, w in enumerate(e2e_words) if w.startswith("--"))
        # The e2e's argv with the bench's name, less the checkpoint (--weights random, the default).
        e2e_argv = [
            w.replace("abtest-train", "abtest-bench") for w in e2e_words[first_flag:]
            if not w.startswith("--maxtext_ckpt_path=")
        ]
        self.assertEqual(shlex.split(env["TRAINER_ARGV"]), e2e_argv)

    def with_quick_poll(self, script):
        """`script` with its wait loop polling every 0.1 s instead of every 5 s: the scripts' runs
        here take a second instead of five, and the loop is otherwise the one the pod runs (one per
        arm in a same-pod A/B's script)."""
        self.assertGreaterEqual(script.count("\n  sleep 5\n"), 1, "the wait loop's poll")
        return script.replace("\n  sleep 5\n", "\n  sleep 0.1\n")

    def execute_client(self, bench, tmp):
        """Runs the client command with a stub python3 that records its environment; returns it."""
        return self.execute_command(command_of(bench), tmp)

    def execute_command(self, command, tmp):
        """Runs a driver command (bench client or preflight: bash, -c, script, arguments) as the pod
        does, with the driver written into `tmp` and a stub python3 that records its argv and
        environment; returns (record, script)."""
        script = command[2]
        target = os.path.join(tmp, "bench_driver.py")
        script = script.replace(f"cat > {DRIVER_PATH} <<", f"cat > {target} <<", 1)
        script = script.replace(f"base64 -d > {DRIVER_PATH}.gz ||", f"base64 -d > {target}.gz ||",
                                1)
        script = script.replace(f"gzip -dc {DRIVER_PATH}.gz > {DRIVER_PATH} ||",
                                f"gzip -dc {target}.gz > {target} ||", 1)
        # The driver's own text may name its path too: only the startup block's command changes.
        head, launch, tail = script.rpartition(f"python3 {DRIVER_PATH}")
        self.assertTrue(launch, "no driver command")
        script = self.with_quick_poll(head + f"python3 {target}" + tail)
        bindir = os.path.join(tmp, "bin")
        os.makedirs(bindir, exist_ok=True)
        stub = os.path.join(bindir, "python3")
        record = os.path.join(tmp, "record.json")
        with open(stub, "w", encoding="utf-8") as f:
            code = "import json,os,sys; json.dump({'argv': sys.argv[1:], 'env': dict(os.environ)}, open(%r, 'w'))" % record
            f.write(
                "#!/bin/sh\nexec %s -c %s \"$@\"\n" %
                (shlex.quote(os.environ.get("RTB_PYTHON", "/usr/bin/python3")), shlex.quote(code)))
        os.chmod(stub, os.stat(stub).st_mode | stat.S_IEXEC)
        env = {"PATH": bindir + ":/usr/bin:/bin", "HOME": tmp}
        proc = subprocess.run(["bash", "-c", script, *command[3:]], env=env, cwd=tmp,
                              capture_output=True, text=True, timeout=60)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("EXIT_CODE=0", proc.stdout)
        with open(record, encoding="utf-8") as f:
            return json.load(f), script

    def test_hostile_values_reach_the_driver_verbatim_and_nothing_else_runs(self):
        with tempfile.TemporaryDirectory() as tmp:
            marker = os.path.join(tmp, "PWNED")
            values, args = hostile_knobs(marker, flags=True)
            args += ["--output-prefix", f"gs://b/{values[0]}"]
            bench, _, _ = self.render(*args)
            subprocess.run(["bash", "-n"], input=script_of(bench), text=True, check=True)
            record, script = self.execute_client(bench, tmp)
            self.assertFalse(os.path.exists(marker), "a value was executed")
            env = record["env"]
            self.assertEqual(record["argv"], [os.path.join(tmp, "bench_driver.py")])
            trainer_argv = shlex.split(env["TRAINER_ARGV"])
            orch_argv = shlex.split(env["ORCH_ARGV"])
            maxtext = env["MAXTEXT_EXTRA_FLAGS"].split()
            libtpu = env["LIBTPU_INIT_ARGS"].split()
            for i, value in enumerate(values):
                self.assertIn(f"--hostile_{i}={value}", trainer_argv)
                self.assertIn(f"--hostile_{i}={value}", orch_argv)
                self.assertEqual(env[f"HOSTILE_{i}"], value)
                if not re.search(r"\s", value) and value:
                    self.assertIn(f"hostile_{i}={value}", maxtext)
                    self.assertIn(f"--xla_hostile_{i}={value}", libtpu)
            self.assertIn(f"--maxtext_output_directory=gs://b/{values[0]}/abtest-bench",
                          trainer_argv)

    def test_an_arms_render_runs_each_arm_with_its_hostile_values_verbatim(self):
        # A same-pod A/B whose second arm carries the hostile values: the pod's script runs both
        # arms (interleave, one run each: the second arm's run is the last, whose environment the
        # stub keeps), executes nothing it carries, and the arm's values reach its driver as given.
        with tempfile.TemporaryDirectory() as tmp:
            marker = os.path.join(tmp, "PWNED")
            values, knobs = hostile_knobs(marker, flags=False)
            arms = ["--arm", "base"] + [a for k in knobs for a in ("--arm", "h:" + k)]
            bench, _, _ = self.render(*arms, "--arm-order", "interleave", "--arm-repeats", "1")
            subprocess.run(["bash", "-n"], input=script_of(bench), text=True, check=True)
            record, _ = self.execute_client(bench, tmp)
            self.assertFalse(os.path.exists(marker), "a value was executed")
            env = record["env"]
            self.assertEqual((env["BENCH_ARM"], env["BENCH_RUN"]), ("h", "2"))
            trainer_argv = shlex.split(env["TRAINER_ARGV"])
            for i, value in enumerate(values):
                self.assertIn(f"--hostile_{i}={value}", trainer_argv)
                self.assertEqual(env[f"HOSTILE_{i}"], value)

    def test_a_dozen_arms_fit_in_the_pods_command_and_run(self):
        # The packed driver goes in the command's arguments, not in the script's one argument of at
        # most 128 KiB, where it left room for three arms of this fixture.
        arms = ["--arm", "base"]
        for i in range(1, 12):
            arms += ["--arm", f"v{i}", "--arm", f"v{i}:--maxtext-flag=sa_block_q={256 * i}"]
        bench, _, _ = self.render(*arms, "--arm-order", "blocks", "--arm-repeats", "1")
        command = command_of(bench)
        self.assertTrue(all(len(word.encode()) < 128 * 1024 for word in command))
        self.assertEqual(script_of(bench).count("\nbench_run bench_arm_"), 12)
        with tempfile.TemporaryDirectory() as tmp:
            record, _ = self.execute_client(bench, tmp)
            with open(os.path.join(tmp, "bench_driver.py"),
                      encoding="utf-8") as f, open(DRIVER_SOURCE, encoding="utf-8") as g:
                self.assertEqual(f.read(), g.read())
        self.assertEqual((record["env"]["BENCH_ARM"], record["env"]["BENCH_RUN"]), ("v11", "12"))
        self.assertIn("sa_block_q=2816", record["env"]["MAXTEXT_EXTRA_FLAGS"].split())

    def test_an_arm_knob_one_pod_cannot_change_is_refused_with_the_alternative(self):
        rc, out, err = run(
            [FIXTURE, "--name", "ab", "--arm", "a", "--arm", "b:--trainer-slice=tpu7x:4x4x4"])
        self.assertEqual(rc, 2)
        self.assertEqual(out, "")
        self.assertEqual(len(err.strip().splitlines()), 1, err)
        self.assertIn(
            "--arm b:--trainer-slice=tpu7x:4x4x4: --trainer-slice cannot change inside one pod",
            err)
        self.assertIn("--arm-mode jobsets", err)
        rc, out, err = run([
            FIXTURE, "--name", "ab", "--arm", "a", "--arm", "b:--trainer-slice=tpu7x:4x4x4",
            "--arm-mode", "jobsets"
        ])
        self.assertEqual(rc, 0, err)
        names = [doc["metadata"]["name"] for doc in yaml.safe_load_all(out)]
        self.assertEqual(names, ["ab-a", "ab-b"])

    def test_sigterm_reaches_the_driver_and_its_exit_code_is_kept(self):
        bench, _, _ = self.render()
        with tempfile.TemporaryDirectory() as tmp:
            target = os.path.join(tmp, "bench_driver.py")
            script = script_of(bench).replace(f"cat > {DRIVER_PATH} <<", f"cat > {target} <<")
            script = script.replace(f"> {DRIVER_PATH}.gz ||", f"> {target}.gz ||")
            script = script.replace(f"gzip -dc {DRIVER_PATH}.gz > {DRIVER_PATH} ||",
                                    f"gzip -dc {target}.gz > {target} ||")
            script = self.with_quick_poll(
                script.replace(f"python3 {DRIVER_PATH}\n", f"python3 {target}\n"))
            bindir = os.path.join(tmp, "bin")
            os.makedirs(bindir)
            marker = os.path.join(tmp, "got-term")
            stub = os.path.join(bindir, "python3")
            with open(stub, "w", encoding="utf-8") as f:
                f.write("#!/bin/bash\ntrap 'echo term > %s; exit 7' TERM\ntouch %s.started\n"
                        "while true; do sleep 0.1; done\n" %
                        (shlex.quote(marker), shlex.quote(marker)))
            os.chmod(stub, 0o755)
            env = {"PATH": bindir + ":/usr/bin:/bin", "HOME": tmp}
            proc = subprocess.Popen(["bash", "-c", script, *command_of(bench)[3:]], env=env,
                                    cwd=tmp, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    text=True)
            for _ in range(200):
                if os.path.exists(marker + ".started"):
                    break
                subprocess.run(["sleep", "0.05"])
            proc.terminate()
            out, err = proc.communicate(timeout=30)
            self.assertTrue(os.path.exists(marker), "the driver got SIGTERM")
            self.assertEqual(proc.returncode, 7, out + err)
            self.assertIn("EXIT_CODE=7", out)

    def test_namespace_and_image(self):
        bench, _, _ = self.render("--namespace", "other-ns", "--image",
                                  "registry.example/img:tag@sha256:0")
        self.assertEqual(bench["metadata"]["namespace"], "other-ns")
        self.assertEqual(container(bench, "main")["image"], "registry.example/img:tag@sha256:0")
        self.assertEqual(
            container(bench, "pathways-proxy")["image"],
            container(e2e_trainer(), "pathways-proxy")["image"])
        self.assert_fails([FIXTURE, "--name", "x", "--namespace", "Bad Namespace"], "--namespace")

    def test_driver_override_and_heredoc_terminator_that_occurs_in_it(self):
        with tempfile.TemporaryDirectory() as tmp:
            driver = os.path.join(tmp, "driver.py")
            body = "print('hi')\nBENCH_DRIVER_EOF\n'''$(touch %s)'''\n" % os.path.join(tmp, "PWNED")
            with open(driver, "w", encoding="utf-8") as f:
                f.write(body)
            bench, _, _ = self.render("--driver", driver)
            script = script_of(bench)
            self.assertIn("<<'BENCH_DRIVER_EOF_1'", script)
            self.execute_client(bench, tmp)
            with open(os.path.join(tmp, "bench_driver.py"), encoding="utf-8") as f:
                self.assertEqual(f.read(), body)
            self.assertFalse(os.path.exists(os.path.join(tmp, "PWNED")))

    def test_embedded_driver_is_written_verbatim(self):
        source = DRIVER_SOURCE
        with tempfile.TemporaryDirectory() as tmp:
            bench, _, _ = self.render()
            self.execute_client(bench, tmp)
            with open(os.path.join(tmp, "bench_driver.py"),
                      encoding="utf-8") as f, open(source, encoding="utf-8") as g:
                self.assertEqual(f.read(), g.read())

    # --- the preflight Job ---------------------------------------------------------------------
    def preflight(self, *extra, path=FIXTURE, name="abtest-bench"):
        rc, out, err = run([path, "--name", name, "--preflight", *extra])
        self.assertEqual(rc, 0, err)
        docs = list(yaml.safe_load_all(out))
        self.assertEqual(len(docs), 1, "exactly one document")
        return docs[0], out

    def test_preflight_is_a_cpu_job_in_the_trainer_image(self):
        job, text = self.preflight("--namespace", "other-ns", "--image",
                                   "registry.example/img:tag@sha256:0")
        self.assertEqual((job["apiVersion"], job["kind"]), ("batch/v1", "Job"))
        self.assertEqual(job["metadata"]["name"], "abtest-bench-preflight")
        self.assertEqual(job["metadata"]["namespace"], "other-ns")
        self.assertEqual(job["metadata"]["labels"]["rl-trainer-bench/bench"], "abtest-bench")
        self.assertEqual(job["spec"]["backoffLimit"], 0)
        pod = job["spec"]["template"]
        self.assertEqual(pod["metadata"]["labels"]["rl-trainer-bench/bench"], "abtest-bench")
        e2e_pod = e2e_trainer()["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
        self.assertEqual(pod["spec"]["restartPolicy"], "Never")
        self.assertEqual(pod["spec"]["serviceAccountName"], e2e_pod["serviceAccountName"])
        for key in ("nodeSelector", "tolerations", "affinity", "hostNetwork", "initContainers",
                    "volumes"):
            self.assertNotIn(key, pod["spec"], key)
        driverless = DRIVER_BLOCK.sub("", without_packed_driver(text))
        self.assertNotIn("google.com/tpu", driverless)
        self.assertNotIn("gke-tpu", driverless)
        (c, ) = pod["spec"]["containers"]
        self.assertEqual(c["image"], "registry.example/img:tag@sha256:0")
        self.assertNotIn("limits", c["resources"])
        self.assertEqual(set(c["resources"]["requests"]), {"cpu", "memory"})
        # The client's env list, JAX_PLATFORMS=cpu in place of its platform.
        env = [(e["name"], e.get("value")) for e in c["env"]]
        e2e_env = [(e["name"], e.get("value")) for e in container(e2e_trainer(), "main")["env"]]
        self.assertEqual(env, [(k, "cpu" if k == "JAX_PLATFORMS" else v) for k, v in e2e_env])
        self.assertEqual(c["command"][:2], ["bash", "-c"])

    def test_preflight_script_is_the_bench_clients_with_jax_on_cpu(self):
        knobs = [
            "--routing", "on", "--pad-position", "start", "--logps-pass", "off", "--steps", "3",
            "--orch-arg=--max_steps=3"
        ]
        job, _ = self.preflight(*knobs)
        script = job["spec"]["template"]["spec"]["containers"][0]["command"][2]
        subprocess.run(["bash", "-n"], input=script, text=True, check=True)
        self.assertEqual(driver_of(job["spec"]["template"]["spec"]["containers"][0]["command"]),
                         driver_of(command_of(self.render()[0])))
        self.assertEqual(startup_words(script)[-3:], ["python3", DRIVER_PATH, "--preflight"])
        bench, _, _ = self.render(*knobs)
        client = startup_env(script_of(bench))
        preflight = startup_env(script)
        self.assertEqual(preflight.pop("JAX_PLATFORMS"), "cpu")
        self.assertEqual(preflight, client, "the same environment and driver settings")
        self.assertEqual(list(preflight), list(client), "in the same order")
        for key, value in (("ROUTING", "on"), ("PAD_POSITION", "start"), ("LOGPS_PASS", "off"),
                           ("STEPS", "3")):
            self.assertEqual(preflight[key], value, key)

    def test_preflight_passes_hostile_values_verbatim_and_nothing_else_runs(self):
        with tempfile.TemporaryDirectory() as tmp:
            marker = os.path.join(tmp, "PWNED")
            values, args = hostile_knobs(marker, flags=False)
            job, _ = self.preflight(*args, "--routing", "off", "--allow-fallbacks")
            record, _ = self.execute_command(
                job["spec"]["template"]["spec"]["containers"][0]["command"], tmp)
            self.assertFalse(os.path.exists(marker), "a value was executed")
            self.assertEqual(record["argv"], [os.path.join(tmp, "bench_driver.py"), "--preflight"])
            env = record["env"]
            self.assertEqual(env["JAX_PLATFORMS"], "cpu")
            self.assertEqual((env["ROUTING"], env["ALLOW_FALLBACKS"]), ("off", "1"))
            trainer_argv = shlex.split(env["TRAINER_ARGV"])
            orch_argv = shlex.split(env["ORCH_ARGV"])
            for i, value in enumerate(values):
                self.assertIn(f"--hostile_{i}={value}", trainer_argv)
                self.assertIn(f"--hostile_{i}={value}", orch_argv)
                self.assertEqual(env[f"HOSTILE_{i}"], value)
            with open(os.path.join(tmp, "bench_driver.py"),
                      encoding="utf-8") as f, open(DRIVER_SOURCE, encoding="utf-8") as g:
                self.assertEqual(f.read(), g.read())

    def test_numerics_preflight_runs_the_numerics_checks_with_the_same_settings(self):
        job, _ = self.preflight("--numerics", "--logp-gates", "off")
        self.assertEqual(job["metadata"]["name"], "abtest-bench-numerics")
        script = job["spec"]["template"]["spec"]["containers"][0]["command"][2]
        with tempfile.TemporaryDirectory() as tmp:
            record, _ = self.execute_command(
                job["spec"]["template"]["spec"]["containers"][0]["command"], tmp)
        self.assertEqual(record["argv"],
                         [os.path.join(tmp, "bench_driver.py"), "--preflight", "--numerics"])
        self.assertEqual((record["env"]["JAX_PLATFORMS"], record["env"]["LOGP_GATES"]),
                         ("cpu", "off"))
        plain, _ = self.preflight("--logp-gates", "off")
        plain_script = plain["spec"]["template"]["spec"]["containers"][0]["command"][2]
        self.assertEqual(startup_env(script), startup_env(plain_script))
        self.assert_fails([FIXTURE, "--name", "x", "--numerics"], "--preflight")

    def test_preflight_errors_leave_the_output_untouched(self):
        self.assert_fails([FIXTURE, "--name", "x", "--preflight", "--pad-align", "100"], "multiple")
        self.assert_fails([FIXTURE, "--name", "x", "--preflight", "--driver-env", "ROUTING=on"],
                          "its own option")
        self.assert_fails([FIXTURE, "--preflight"], "--name")
        self.assert_fails([FIXTURE, "--name", "x", "--preflight", "--print-driver"],
                          "--print-driver")

    def test_print_driver(self):
        with open(DRIVER_SOURCE, encoding="utf-8") as f:
            embedded = f.read()
        rc, out, err = run(["--print-driver"])
        self.assertEqual((rc, err), (0, ""))
        self.assertEqual(out, embedded)
        with tempfile.TemporaryDirectory() as tmp:
            driver = os.path.join(tmp, "driver.py")
            with open(driver, "w", encoding="utf-8") as f:
                f.write("print('mine')\n")
            out_path = os.path.join(tmp, "out.py")
            rc, out, err = run(["--print-driver", "--driver", driver, "-o", out_path])
            self.assertEqual((rc, out, err), (0, "", ""))
            with open(out_path, encoding="utf-8") as f:
                self.assertEqual(f.read(), "print('mine')\n")
        self.assert_fails([FIXTURE, "--print-driver"], "--print-driver")

    # --- knobs ------------------------------------------------------------------------------------
    def test_libtpu_flag_in_all_three_places(self):
        bench, _, _ = self.render("--libtpu-flag=--xla_tpu_scoped_vmem_limit_kib=65536",
                                  "--libtpu-flag", "--xla_brand_new=3")
        client = startup_env(script_of(bench))["LIBTPU_INIT_ARGS"].split()
        e2e_client = startup_env(script_of(e2e_trainer()))["LIBTPU_INIT_ARGS"].split()
        at = e2e_client.index("--xla_tpu_scoped_vmem_limit_kib=65472")
        self.assertEqual(client[at], "--xla_tpu_scoped_vmem_limit_kib=65536",
                         "replaced where it stands")
        self.assertEqual(client[-1], "--xla_brand_new=3", "appended")
        self.assertEqual(len(client), len(e2e_client) + 1)
        proxy = container(bench, "pathways-proxy")["args"]
        e2e_proxy = container(e2e_trainer(), "pathways-proxy")["args"]
        self.assertEqual(proxy[e2e_proxy.index("--xla_tpu_scoped_vmem_limit_kib=65472")],
                         "--xla_tpu_scoped_vmem_limit_kib=65536")
        last_xla = max(i for i, a in enumerate(e2e_proxy) if a.startswith("--xla"))
        self.assertEqual(proxy[last_xla + 1], "--xla_brand_new=3",
                         "new proxy flag after the last --xla")
        self.assertEqual(proxy[-1], e2e_proxy[-1])
        worker_env = {e["name"]: e.get("value") for e in container(bench, "pathways-worker")["env"]}
        worker = worker_env["LIBTPU_INIT_ARGS"].split()
        self.assertIn("--xla_tpu_scoped_vmem_limit_kib=65536", worker)
        self.assertNotIn("--xla_tpu_scoped_vmem_limit_kib=65472", worker)
        self.assertIn("--xla_brand_new=3", worker)
        # The workers run the client's whole set, then their own extras (the seed's rule).
        self.assertEqual(worker, client + ["--megascale_port=-1", "--xprof_compress_jftrace=true"])

    def test_workers_run_the_clients_libtpu_set_plus_their_extras(self):
        """Without any knob, the workers get the client's flags they lack or set otherwise (here the
        DANGEROUS flag the e2e workers do not have) and keep their worker-only flags."""
        bench, text, err = self.render("--explain")
        client = startup_env(script_of(bench))["LIBTPU_INIT_ARGS"].split()
        e2e_worker_env = {
            e["name"]: e.get("value")
            for e in container(e2e_trainer(), "pathways-worker")["env"]
        }
        e2e_worker = e2e_worker_env["LIBTPU_INIT_ARGS"].split()
        self.assertNotIn("--DANGEROUS_tpu_runtime_abi_verification_disabled=true", e2e_worker)
        worker_env = {e["name"]: e.get("value") for e in container(bench, "pathways-worker")["env"]}
        worker = worker_env["LIBTPU_INIT_ARGS"].split()
        extras = [
            f for f in e2e_worker if f.split("=", 1)[0] not in {c.split("=", 1)[0]
                                                                for c in client}
        ]
        self.assertEqual(extras, ["--megascale_port=-1", "--xprof_compress_jftrace=true"])
        self.assertEqual(worker, client + extras)
        # --explain names the change and why (the libtpu-workers knob).
        self.assertIn(
            "libtpu-workers: spec.replicatedJobs[pw-node].template.spec.template.spec.containers"
            "[pathways-worker].env[LIBTPU_INIT_ARGS].value[--DANGEROUS_tpu_runtime_abi_verification_disabled]:"
            " (absent) -> --DANGEROUS_tpu_runtime_abi_verification_disabled=true", err)
        # A bench render is what diff-renders --expect-bench allows.
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "bench.yaml")
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
            rc, out, err = run_tool(os.path.join(BIN, "diff-renders"),
                                    [FIXTURE, path, "--expect-bench"])
            self.assertEqual(rc, 0, out + err)

    def test_launch_render_names_the_dryrun_when_no_file_is_given(self):
        _, from_file, _ = self.render()
        rc, out, err = run_tool(TOOL, ["--name", "abtest-bench"], env={"LAUNCH_RENDER": FIXTURE})
        self.assertEqual((rc, out), (0, from_file), err)
        rc, out, err = run_tool(TOOL, [FIXTURE, "--name", "abtest-bench"],
                                env={"LAUNCH_RENDER": "/nonexistent/dryrun.txt"})
        self.assertEqual((rc, out), (0, from_file), "an explicit file wins: " + err)
        rc, out, err = run_tool(TOOL, ["--name", "abtest-bench"], unset=["LAUNCH_RENDER"])
        self.assertEqual((rc, out), (2, ""), err)
        self.assertIn("LAUNCH_RENDER", err)
        rc, out, _ = run(["--help"])
        self.assertIn("LAUNCH_RENDER", out)

    def test_libtpu_flag_created_where_absent(self):
        rc, out, err = run([NO_PROXY, "--name", "abtest-bench", "--libtpu-flag=--xla_x=1"])
        self.assertEqual(rc, 0, err)
        self.assertIn("pathways-proxy", err, "the missing proxy is reported")
        bench = yaml.safe_load(out)
        self.assertEqual(startup_env(script_of(bench))["LIBTPU_INIT_ARGS"], "--xla_x=1")
        worker_env = {e["name"]: e.get("value") for e in container(bench, "pathways-worker")["env"]}
        self.assertEqual(worker_env["LIBTPU_INIT_ARGS"], "--xla_x=1")

    def test_maxtext_flag_appends_or_replaces_in_place(self):
        bench, _, _ = self.render("--maxtext-flag", "ragged_buffer_factor=2.75", "--maxtext-flag",
                                  "new_key=1", "--maxtext-replace", "sa_block_q=2048")
        items = startup_env(script_of(bench))["MAXTEXT_EXTRA_FLAGS"].split()
        e2e_items = startup_env(script_of(e2e_trainer()))["MAXTEXT_EXTRA_FLAGS"].split()
        self.assertEqual(items[e2e_items.index("ragged_buffer_factor=2.0")],
                         "ragged_buffer_factor=2.75")
        self.assertEqual(items[e2e_items.index("sa_block_q=1024")], "sa_block_q=2048")
        self.assertEqual(items[-1], "new_key=1")
        self.assertEqual(len(items), len(e2e_items) + 1)

    def test_maxtext_replace_of_absent_key_fails(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "bench.yaml")
            with open(out, "w", encoding="utf-8") as f:
                f.write("old\n")
            rc, stdout, err = run([
                FIXTURE, "--name", "abtest-bench", "--maxtext-replace", "no_such_key=1", "-o", out
            ])
            self.assertEqual(rc, 2)
            self.assertEqual(stdout, "")
            self.assertEqual(len(err.splitlines()), 1, err)
            self.assertIn("no_such_key", err)
            with open(out, encoding="utf-8") as f:
                self.assertEqual(f.read(), "old\n")

    def test_trainer_and_orchestrator_args(self):
        bench, _, _ = self.render("--trainer-arg=--compute_logps_chunk_size=1024",
                                  "--trainer-arg=--new_flag",
                                  "--trainer-arg-remove=--profiler_steps",
                                  "--orch-arg=--max_steps=3")
        env = startup_env(script_of(bench))
        argv = shlex.split(env["TRAINER_ARGV"])
        self.assertIn("--compute_logps_chunk_size=1024", argv)
        self.assertNotIn("--compute_logps_chunk_size=512", argv)
        self.assertEqual(argv[-1], "--new_flag")
        self.assertFalse(any(a.startswith("--profiler_steps") for a in argv))
        self.assertIn("--max_steps=3", shlex.split(env["ORCH_ARGV"]))
        rc, _, err = run([FIXTURE, "--name", "x", "--trainer-arg-remove=--no_such_flag"])
        self.assertEqual(rc, 2)
        self.assertIn("--no_such_flag", err)

    def test_trainer_slice_changes_every_field(self):
        bench, text, _ = self.render("--trainer-slice", "tpu7x:4x4x4")
        driverless = DRIVER_BLOCK.sub("", without_packed_driver(text))
        self.assertNotIn("4x4x8", driverless)
        pw = bench["spec"]["replicatedJobs"][1]
        self.assertEqual(pw["template"]["spec"]["completions"], 16)
        self.assertEqual(pw["template"]["spec"]["parallelism"], 16)
        annotations = pw["template"]["spec"]["template"]["metadata"]["annotations"]
        self.assertEqual(annotations["cloud.google.com/gke-tpu-slice-topology"], "4x4x4")
        self.assertEqual(annotations["kueue.x-k8s.io/podset-slice-size"], "16")
        self.assertIn("--instance_type=tpu7x:4x4x4", container(bench, "pathways-rm")["args"])
        env = startup_env(script_of(bench))
        self.assertIn("--mesh_fsdp=16", shlex.split(env["TRAINER_ARGV"]))
        orch = shlex.split(env["ORCH_ARGV"])
        self.assertIn("--trainer_fsdp=16", orch)
        self.assertIn("--tpu_topology=tpu7x:4x4x4+tpu7x:2x2x1", orch)

    def test_trainer_slice_larger_and_v5p(self):
        bench, text, _ = self.render("--trainer-slice", "tpu7x:8x8x8")
        env = startup_env(script_of(bench))
        self.assertIn("--mesh_fsdp=128", shlex.split(env["TRAINER_ARGV"]))
        self.assertEqual(bench["spec"]["replicatedJobs"][1]["template"]["spec"]["completions"], 128)
        bench, text, _ = self.render("--trainer-slice", "v5p:4x4x8", path=V5P)
        for job in bench["spec"]["replicatedJobs"]:
            selector = job["template"]["spec"]["template"]["spec"].get("nodeSelector", {})
            if "cloud.google.com/gke-tpu-topology" in selector:
                self.assertEqual(selector["cloud.google.com/gke-tpu-topology"], "4x4x8")
        self.assertIn("--instance_type=tpuv5:4x4x8", container(bench, "pathways-rm")["args"])
        self.assertIn("--mesh_fsdp=64", shlex.split(startup_env(script_of(bench))["TRAINER_ARGV"]))

    def test_v5p_name_selectors_are_renamed(self):
        _, text, _ = self.render(path=V5P)
        self.assertNotIn("abtest-train", text.replace(driver_text(), ""))
        self.assertGreaterEqual(text.count("abtest-bench"), 5)

    def test_logps_chunk_and_profile_window_and_driver_knobs(self):
        bench, _, _ = self.render("--logps-chunk", "4096", "--profile-window", "2:2", "--steps",
                                  "4", "--micro-steps", "7", "--seed", "11", "--routing-scale",
                                  "0.5", "--logp-gates", "off", "--advantages", "zero",
                                  "--pad-position", "start", "--pad-align", "2048", "--driver-env",
                                  "REAL_LEN=1000")
        env = startup_env(script_of(bench))
        argv = shlex.split(env["TRAINER_ARGV"])
        self.assertIn("--compute_logps_chunk_size=4096", argv)
        # The driver traces the window; the e2e's trainer profiler (off here) stays as it is.
        self.assertIn("--profiler_steps=0", argv)
        self.assertIn("--skip_first_n_profiler_steps=-1", argv)
        expected = {
            "STEPS": "4", "MICRO_STEPS": "7", "SEED": "11", "ROUTING_SCALE": "0.5",
            "LOGP_GATES": "off", "ADVANTAGES": "zero", "PAD_POSITION": "start", "PAD_ALIGN": "2048",
            "PROFILE_WINDOW": "2:2", "REAL_LEN": "1000", "BENCH_NAME": "abtest-bench"
        }
        for key, value in expected.items():
            self.assertEqual(env[key], value, key)
        self.assertEqual(len(env["ROUTING_TARGETS"].split(",")), 60, "the default 397B table")

    def test_routing_allow_fallbacks_and_logps_pass(self):
        bench, _, _ = self.render("--routing", "off", "--allow-fallbacks", "--logps-pass", "on")
        env = startup_env(script_of(bench))
        self.assertEqual((env["ROUTING"], env["ALLOW_FALLBACKS"], env["LOGPS_PASS"]),
                         ("off", "1", "on"))
        rc, out, _ = run(["--help"])
        for option in ("--routing", "--allow-fallbacks", "--logps-pass", "--pad-position",
                       "--pad-align"):
            self.assertIn(option, out)
        self.assert_fails([FIXTURE, "--name", "x", "--routing", "sometimes"], "--routing")
        self.assert_fails([FIXTURE, "--name", "x", "--logps-pass", "yes"], "--logps-pass")
        for name in ("PAD_POSITION", "PAD_ALIGN", "ROUTING", "ALLOW_FALLBACKS", "LOGPS_PASS"):
            self.assert_fails([FIXTURE, "--name", "x", "--driver-env", f"{name}=1"],
                              "its own option")

    def test_orchestrator_environment_is_copied_as_orch_variables(self):
        with open(FIXTURE, encoding="utf-8") as f:
            text = f.read()
        anchor = 'ORCHESTRATOR_ID="abtest-orch"'
        self.assertIn(anchor, text)
        text = text.replace(
            anchor, "PACK_PAD_POSITION=start PACK_PAD_ALIGN=512 RETURN_ROUTED_EXPERTS=1 "
            "PIPELINE_STEP_BOUNDARY=true " + anchor, 1)
        env, _ = self.render_env(path="-", stdin=text)
        for key, value in (("ORCH_PACK_PAD_POSITION", "start"), ("ORCH_PACK_PAD_ALIGN", "512"),
                           ("ORCH_RETURN_ROUTED_EXPERTS", "1"), ("ORCH_PIPELINE_STEP_BOUNDARY",
                                                                 "true")):
            self.assertEqual(env[key], value, key)
        self.assertNotIn("PAD_POSITION", env)
        self.assertNotIn("ORCH_STAGE_NEXT_MICROBATCH", env)

    # --- weights, the trainer's profiler, the rollout's routed experts ----------------------------
    def test_warnings_and_notes_are_said_once(self):
        # A trainer argument with a shell expansion: a warning at the DRY_RUN's line, once.
        with open(FIXTURE, encoding="utf-8") as f:
            text = f.read().replace("--port=20002", "--port=$TRAINER_PORT", 1)
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "expands.txt")
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
            _, _, err = self.render(path=path)
            self.assertRegex(
                err, r"^render-bench: warning: " + re.escape(path) + r":\d+: trainer argument "
                r"--port=\$TRAINER_PORT contains a shell expansion; the driver receives it "
                r"literally\n$")
            self.assertEqual(self.render("-q", path=path)[2], "")
        # The notes: at info with -v, or listed by --explain (then not logged again).
        _, _, err = self.render("-v")
        logged = [line for line in err.splitlines() if line.startswith("render-bench: info: ")]
        self.assertIn(
            "render-bench: info: profiler: none (no --profile-window, and the e2e "
            "trainer's profiler is off)", logged)
        _, _, err = self.render("-v", "--explain")
        self.assertEqual(err.count("profiler: none (no --profile-window"), 1, err)

    def test_weights_random_drops_every_checkpoint_and_explain_says_so(self):
        env, err = self.render_env("--explain", path=WEIGHTS)
        self.assertNotIn("MAXTEXT_CKPT", env)
        self.assertNotIn("load_parameters_path", env["MAXTEXT_EXTRA_FLAGS"])
        self.assertFalse([a for a in shlex.split(env["TRAINER_ARGV"]) if "ckpt_path" in a])
        self.assertIn(
            "--weights: spec.replicatedJobs[proc].template.spec.template.spec."
            "containers[main].startup.argv[--maxtext_ckpt_path]: "
            "--maxtext_ckpt_path=gs://example-bucket/ckpt/model/0/items -> (removed)", err)
        self.assertIn(
            "containers[main].startup.env.MAXTEXT_CKPT: "
            "gs://example-bucket/ckpt/model/0/items -> (removed)", err)
        self.assertIn("note: --weights random: dropped --maxtext_ckpt_path=", err)
        self.assertIn("MaxText initialises random weights", err)
        # The main fixture passes only --maxtext_ckpt_path; it is dropped too.
        bench, _, _ = self.render()
        argv = shlex.split(startup_env(script_of(bench))["TRAINER_ARGV"])
        self.assertFalse([a for a in argv if a.startswith("--maxtext_ckpt_path")])

    def test_weights_checkpoint_keeps_the_e2es(self):
        env, err = self.render_env("--weights", "checkpoint", "--explain", path=WEIGHTS)
        self.assertEqual(env["MAXTEXT_CKPT"], "gs://example-bucket/ckpt/model/0/items")
        self.assertIn("load_parameters_path=gs://example-bucket/ckpt/model/0/items",
                      env["MAXTEXT_EXTRA_FLAGS"])
        self.assertIn("--maxtext_ckpt_path=gs://example-bucket/ckpt/model/0/items",
                      shlex.split(env["TRAINER_ARGV"]))
        self.assertNotIn("--weights:", err)
        self.assertIn("note: --weights checkpoint: kept --maxtext_ckpt_path=", err)
        self.assert_fails([FIXTURE, "--name", "x", "--weights", "zeros"],
                          "--weights zeros: must be random or checkpoint")
        self.assert_fails([FIXTURE, "--name", "x", "--maxtext-flag", "load_parameters_path=gs://b"],
                          "loads a checkpoint, but --weights is random")
        _, help_text, _ = run(["--help"])
        self.assertIn("--weights", help_text)

    def test_profile_window_turns_the_trainers_profiler_off(self):
        env, err = self.render_env("--profile-window", "3:2", "--explain", path=WEIGHTS)
        self.assertEqual(env["PROFILE_WINDOW"], "3:2")
        argv = shlex.split(env["TRAINER_ARGV"])
        self.assertIn("--profiler_steps=0", argv)
        self.assertNotIn("--profiler_steps=3", argv)
        self.assertNotIn("profiler=xplane", env["MAXTEXT_EXTRA_FLAGS"])
        self.assertIn(
            "--profile-window: spec.replicatedJobs[proc].template.spec.template.spec."
            "containers[main].startup.argv[--profiler_steps]: --profiler_steps=3 -> "
            "--profiler_steps=0", err)
        self.assertIn(
            "note: profiler: the driver's (PROFILE_WINDOW=3:2, timed steps 3..4); "
            "the trainer's own is turned off", err)
        # Without a window: the e2e's profiler, untouched, and no PROFILE_WINDOW.
        env, err = self.render_env("--explain", path=WEIGHTS)
        self.assertNotIn("PROFILE_WINDOW", env)
        self.assertIn("--profiler_steps=3", shlex.split(env["TRAINER_ARGV"]))
        self.assertIn("profiler=xplane", env["MAXTEXT_EXTRA_FLAGS"])
        self.assertIn("note: profiler: the trainer's own, as the e2e sets it", err)

    def test_dump_hlo_puts_xlas_dump_flags_on_the_proxy_next_to_the_trace(self):
        bench, _, err = self.render("--dump-hlo", "--output-prefix", "gs://b/bench", "--explain")
        dump = "gs://b/bench/abtest-bench/bench_profile/hlo"  # <PROFILE_DIR>/hlo
        proxy = container(bench, "pathways-proxy")["args"]
        e2e_proxy = container(e2e_trainer(), "pathways-proxy")["args"]
        last_xla = max(i for i, a in enumerate(e2e_proxy) if a.startswith("--xla"))
        self.assertEqual(proxy[last_xla + 1:last_xla + 3],
                         ["--xla_dump_to=" + dump, "--xla_dump_hlo_as_text"])
        self.assertEqual(len(proxy), len(e2e_proxy) + 2)
        # The client compiles nothing under Pathways: neither it nor the workers get the flags.
        text = yaml.safe_dump(bench)
        self.assertEqual(text.count("xla_dump_to"), 1, "in the proxy's args only")
        self.assertNotIn("DUMP_HLO", startup_env(script_of(bench)))
        self.assertIn(
            "--dump-hlo: spec.replicatedJobs[proc].template.spec.template.spec.initContainers"
            f"[pathways-proxy].args[--xla_dump_to]: (absent) -> --xla_dump_to={dump}", err)
        self.assertIn(f"compiles to {dump}, next to the driver's trace", err)
        knobs = {k["option"]: k for k in json.loads(run(["--print-knobs"])[1])["knobs"]}
        self.assertEqual((knobs["--dump-hlo"]["arity"], knobs["--dump-hlo"]["setting"]),
                         ("flag", None))
        # One proxy serves every run of a same-pod A/B.
        rc, out, err = run([FIXTURE, "--name", "ab", "--arm", "a", "--arm", "b:--dump-hlo"])
        self.assertEqual((rc, out), (2, ""), err)
        self.assertIn("--dump-hlo cannot change inside one pod", err)

    def test_rollout_routed_experts_are_copied(self):
        bench, _, _ = self.render()  # the rollout passes --return_routed_experts=true
        self.assertEqual(startup_env(script_of(bench))["ROLLOUT_RETURN_ROUTED_EXPERTS"], "true")
        bench, _, _ = self.render(path=WEIGHTS)  # RETURN_ROUTED_EXPERTS=false, no flag
        self.assertEqual(startup_env(script_of(bench))["ROLLOUT_RETURN_ROUTED_EXPERTS"], "false")
        with open(FIXTURE, encoding="utf-8") as f:
            text = f.read()
        no_flag = text.replace(" --return_routed_experts=true", "")
        env, _ = self.render_env(path="-", stdin=no_flag)
        self.assertNotIn("ROLLOUT_RETURN_ROUTED_EXPERTS", env)
        # Two words (argparse nargs="?", type=_str2bool), and --no-... counts as false.
        env, _ = self.render_env(
            path="-", stdin=text.replace("--return_routed_experts=true",
                                         "--return_routed_experts False"))
        self.assertEqual(env["ROLLOUT_RETURN_ROUTED_EXPERTS"], "False")
        env, _ = self.render_env(
            path="-",
            stdin=text.replace("--return_routed_experts=true", "--return_routed_experts=true "
                               "--no-return_routed_experts"))
        self.assertEqual(env["ROLLOUT_RETURN_ROUTED_EXPERTS"], "false")
        self.assert_fails(["-", "--name", "x"], "--return_routed_experts=maybe: not a boolean",
                          stdin=text.replace("--return_routed_experts=true",
                                             "--return_routed_experts=maybe"))

    def test_routing_targets_file(self):
        with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
            f.write("# two layers\n1.5\n2.25\n")
        try:
            bench, _, _ = self.render("--routing-targets", f.name)
            self.assertEqual(startup_env(script_of(bench))["ROUTING_TARGETS"], "1.5,2.25")
            with open(f.name, "w", encoding="utf-8") as g:
                g.write("0.5\n")
            rc, _, err = run([FIXTURE, "--name", "x", "--routing-targets", f.name])
            self.assertEqual(rc, 2)
            self.assertIn(f.name, err)
        finally:
            os.unlink(f.name)

    def test_explain_lists_changed_paths(self):
        rc, _, err = run([
            FIXTURE, "--name", "abtest-bench", "--libtpu-flag=--xla_new=1", "--explain", "-o",
            "/dev/null"
        ])
        self.assertEqual(rc, 0, err)
        self.assertIn(
            "--libtpu-flag: spec.replicatedJobs[proc].template.spec.template.spec.initContainers[pathways-proxy].args[--xla_new]",
            err)
        self.assertIn("metadata.name: abtest-train -> abtest-bench", err)
        self.assertIn("spec.failurePolicy.maxRestarts: 3 -> 0", err)

    def test_stdin_output_file_and_demo(self):
        with open(FIXTURE, encoding="utf-8") as f:
            text = f.read()
        rc, from_stdin, err = run(["-", "--name", "abtest-bench"], stdin=text)
        self.assertEqual(rc, 0, err)
        _, from_file, _ = run([FIXTURE, "--name", "abtest-bench"])
        self.assertEqual(from_stdin, from_file)
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "bench.yaml")
            rc, stdout, err = run([FIXTURE, "--name", "abtest-bench", "-o", out])
            self.assertEqual((rc, stdout), (0, ""))
            with open(out, encoding="utf-8") as f:
                self.assertEqual(f.read(), from_file)
            self.assertEqual(os.listdir(tmp), ["bench.yaml"])
        rc, demo, err = run(["--demo", "--name", "abtest-bench"])
        self.assertEqual(rc, 0, err)
        self.assertEqual(demo, from_file, "the demo renders the embedded copy of the fixture")
        self.assertEqual(len(err.splitlines()), 1)
        self.assertIn("abtest-train -> abtest-bench", err)

    def test_help_and_version(self):
        assert_help_and_version(self, "render-bench", "render-bench dryrun.txt --name")

    # --- bad input --------------------------------------------------------------------------------
    def assert_fails(self, args, expected, stdin=None):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "bench.yaml")
            with open(out, "w", encoding="utf-8") as f:
                f.write("previous\n")
            line = assert_bad_input(self, "render-bench", run(args + ["-o", out], stdin=stdin),
                                    expected)
            with open(out, encoding="utf-8") as f:
                self.assertEqual(f.read(), "previous\n", "a failed render leaves FILE untouched")
            self.assertEqual(os.listdir(tmp), ["bench.yaml"])
            return line

    def test_bad_inputs(self):
        self.assert_fails([os.path.join(BAD, "missing.txt"), "--name", "x"],
                          "missing.txt: cannot open")
        self.assert_fails([os.path.join(BAD, "not_yaml.txt"), "--name", "x"], "no trainer JobSet")
        self.assert_fails([os.path.join(BAD, "empty.txt"), "--name", "x"], "no trainer JobSet")
        line = self.assert_fails([os.path.join(BAD, "no_trainer.txt"), "--name", "x"],
                                 "no trainer JobSet")
        self.assertIn("abtest-orch", line)
        line = self.assert_fails([os.path.join(BAD, "two_trainers.txt"), "--name", "x"],
                                 "more than one trainer")
        self.assertIn("abtest-train2", line)
        self.assert_fails([os.path.join(BAD, "no_startup_block.txt"), "--name", "x"],
                          "no startup block")
        line = self.assert_fails([os.path.join(BAD, "unbalanced_quote.txt"), "--name", "x"],
                                 "unbalanced_quote.txt:330:")
        self.assertIn("quote", line)
        self.assert_fails([FIXTURE, "--name", "x", "--trainer-slice", "tpu9:4x4x4"],
                          "unknown TPU type")
        self.assert_fails([FIXTURE, "--name", "x", "--trainer-slice", "tpu7x:4x4"], "topolog")
        self.assert_fails([FIXTURE, "--name", "x", "--trainer-slice", "tpu7x:1x1x1"],
                          "does not divide")
        self.assert_fails([FIXTURE, "--name", "Bad_Name"], "DNS label")
        self.assert_fails([FIXTURE, "--name", "a" * 60], "too long")
        self.assert_fails([FIXTURE, "--name", "x", "--libtpu-flag=--xla_a=b c"], "blanks")
        self.assert_fails([FIXTURE, "--name", "x", "--maxtext-flag", "novalue"], "novalue")
        self.assert_fails([FIXTURE, "--name", "x", "--profile-window", "3"], "START:COUNT")
        self.assert_fails([FIXTURE, "--name", "x", "--pad-align", "100"], "multiple")
        self.assert_fails([FIXTURE, "--name", "x", "--driver-env", "STEPS=3"], "--driver-env")
        self.assert_fails([FIXTURE], "--name")
        self.assert_fails(["--demo", FIXTURE, "--name", "x"], "either")


if __name__ == "__main__":
    unittest.main()
