"""CLI tests of aot-check: the compile script it prints (parsed by bash and run with a stub python3
that records the argv and environment the compile would get), --json, --run with the stub standing
in for MaxText, and its errors and exit codes."""

import json
import os
import re
import stat
import subprocess
import tempfile
import unittest

from cli_common import BAD_INPUTS as BAD
from cli_common import LAUNCH_DRYRUN as FIXTURE
from cli_common import LAUNCH_DRYRUN_V5P as V5P
from cli_common import BIN, PYTHON, TESTDATA, assert_bad_input, assert_help_and_version, run_tool

TOOL = os.path.join(BIN, "aot-check")
MODULE = "maxtext.training_engine.maxtext_engine_compile"
FAKE_BASE = "/opt/maxtext/src/maxtext/configs/base.yml"

# A python3 for the script: answers the MaxText probe, and for the compile records its argv and
# environment, prints the log STUB_LOG names (STUB_ARM_LOG instead when the compile's keys hold the
# item STUB_ARM_KEY, e.g. one arm's MaxText flag) and exits with STUB_STATUS.
STUB = r'''
import json, os, sys

if sys.argv[1] == "-c":
    if os.environ.get("STUB_NO_MAXTEXT"):
        sys.exit(1)
    print(%(base)r)
    sys.exit(0)
if sys.argv[1:3] != ["-m", %(module)r]:
    sys.exit(99)
record = os.environ.get("STUB_RECORD")
if record:
    with open(record, "w") as f:
        json.dump({"argv": sys.argv[3:], "env": dict(os.environ)}, f)
log = os.environ.get("STUB_LOG")
if os.environ.get("STUB_ARM_KEY") in sys.argv[3:]:
    log = os.environ["STUB_ARM_LOG"]
if log:
    with open(log) as f:
        sys.stdout.write(f.read())
sys.exit(int(os.environ.get("STUB_STATUS", "0")))
''' % {"base": FAKE_BASE, "module": MODULE}


def run(args, env=None, cwd=None):
    return run_tool(TOOL, args, env=env, cwd=cwd)


def make_stub(directory, name="python3"):
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, name)
    with open(path, "w", encoding="utf-8") as f:
        f.write("#!%s\n%s" % (PYTHON, STUB))
    os.chmod(path, os.stat(path).st_mode | stat.S_IEXEC)
    return path


def keys_of(argv):
    """The MaxText keys of a compile argv (after the config file), the last of each winning."""
    keys = {}
    for item in argv[1:]:
        key, _, value = item.partition("=")
        keys[key] = value
    return keys


class AotCheckTest(unittest.TestCase):

    def print_script(self, *args, path=FIXTURE):
        rc, out, err = run([path, *args])
        self.assertEqual(rc, 0, err)
        return out

    def run_script(self, script, tmp, env=None):
        """Runs a printed script in `tmp` with the stub first on PATH; returns (rc, record, stderr)."""
        bindir = os.path.join(tmp, "bin")
        make_stub(bindir)
        record = os.path.join(tmp, "record.json")
        full_env = {"PATH": bindir + ":/usr/bin:/bin", "HOME": tmp, "STUB_RECORD": record}
        full_env.update(env or {})
        proc = subprocess.run(["bash", "-c", script], env=full_env, cwd=tmp, capture_output=True,
                              text=True, timeout=60)
        data = None
        if os.path.exists(record):
            with open(record, encoding="utf-8") as f:
                data = json.load(f)
        return proc.returncode, data, proc.stderr

    # --- --print ------------------------------------------------------------------------------
    def test_script_parses_and_passes_the_render_to_the_compile(self):
        script = self.print_script()
        self.assertTrue(script.startswith("#!/usr/bin/env bash\n"))
        subprocess.run(["bash", "-n"], input=script, text=True, check=True)
        with tempfile.TemporaryDirectory() as tmp:
            rc, record, err = self.run_script(
                script, tmp, {"STUB_LOG": os.path.join(TESTDATA, "memlog_engine_compile_a.log")})
            self.assertEqual(rc, 0, err)
            argv, env = record["argv"], record["env"]
            self.assertEqual(argv[0], FAKE_BASE, "the base.yml of the MaxText the probe found")
            keys = keys_of(argv)
            expected = {
                "model_name": "qwen3.5-397b-a17b",
                "run_name": "aot-bench",
                "compile_topology": "tpu7x-256",
                "compile_topology_num_slices": "1",
                "compile_engine_loss": "grpo",
                "ici_fsdp_parallelism": "32",
                "ici_context_parallelism": "4",
                "ici_expert_parallelism": "2",
                "ici_tensor_parallelism": "1",
                "per_device_batch_size": "0.25",
                "max_target_length": "65536",
                "max_prefill_predict_length": "8192",
                "compile_engine_logps_chunk_size": "512",
                "compile_engine_max_seq_token_per_tpu": "65536",
                "compile_engine_max_segments_per_packed_row": "16",
                "attention": "flash",
                "ragged_buffer_factor": "2.0",
                "enable_checkpointing": "False",
            }
            for key, value in expected.items():
                self.assertEqual(keys.get(key), value, key)
            self.assertIn("beta: 0.0", keys["compile_engine_grpo_config"])
            self.assertIn("loss_algo: 'gspo-token'", keys["compile_engine_grpo_config"])
            self.assertIn("--xla_tpu_scoped_vmem_limit_kib=65472",
                          keys["compile_xla_flags"].split())
            self.assertIn("--xla_tpu_scoped_vmem_limit_kib=65472", env["LIBTPU_INIT_ARGS"].split())
            self.assertNotIn("JAX_COMPILATION_CACHE_DIR", env)
            self.assertEqual(env["REMAT_DECODER_LAYER_INPUT"], "device")
            logs = os.listdir(os.path.join(tmp, "logs"))
            self.assertEqual(len(logs), 1)
            self.assertRegex(logs[0], r"^aot-bench-\d{8}T\d{6}Z\.log$")
            with open(os.path.join(tmp, "logs", logs[0]), encoding="utf-8") as f, \
                    open(os.path.join(TESTDATA, "memlog_engine_compile_a.log"), encoding="utf-8") as g:
                self.assertEqual(f.read(), g.read(), "the compile's output is the log")
            self.assertIn("aot-summarize --chip tpu7x", err)

    def test_arms_compile_each_arms_program(self):
        script = self.print_script("--arm", "base", "--arm", "blk:--maxtext-flag=sa_block_q=2048")
        subprocess.run(["bash", "-n"], input=script, text=True, check=True)
        with tempfile.TemporaryDirectory() as tmp:
            rc, record, err = self.run_script(
                script, tmp, {"STUB_LOG": os.path.join(TESTDATA, "memlog_engine_compile_a.log")})
            self.assertEqual(rc, 0, err)
            self.assertIn("aot-check: arm base", err)
            self.assertIn("aot-check: arm blk", err)
            # The stub keeps the last compile's argv: the second arm's, with its MaxText flag.
            self.assertEqual(keys_of(record["argv"])["sa_block_q"], "2048")
        rc, out, err = run([FIXTURE, "--arm", "a", "--arm", "b:--libtpu-flag=--xla_x=1"])
        self.assertEqual(rc, 2)
        self.assertIn("--arm b:--libtpu-flag=--xla_x=1", err)

    def test_a_printed_arms_script_gives_each_arm_its_own_given_log(self):
        # One --log for two arms: each arm's compile writes its own file, as under --run, instead
        # of the second overwriting the first.
        script = self.print_script("--arm", "base", "--arm", "blk:--maxtext-flag=sa_block_q=2048",
                                   "--log", "out/aot.log")
        logs = re.findall(r"(?m)^LOG=(.*)$", script)
        self.assertEqual(logs, ["out/aot-base.log", "out/aot-blk.log"])

    def test_knobs_change_the_compile(self):
        script = self.print_script("--trainer-slice", "tpu7x:4x4x4",
                                   "--libtpu-flag=--xla_tpu_scoped_vmem_limit_kib=65536",
                                   "--maxtext-flag", "ragged_buffer_factor=2.75", "--logps-chunk",
                                   "4096", "--orch-arg=--beta=0.04", "--compile-key",
                                   "compile_engine_router_replay=true")
        with tempfile.TemporaryDirectory() as tmp:
            rc, record, err = self.run_script(script, tmp)
            self.assertEqual(rc, 0, err)
            keys = keys_of(record["argv"])
            self.assertEqual(keys["compile_topology"], "tpu7x-128")
            self.assertEqual(keys["ici_fsdp_parallelism"], "16")
            self.assertEqual(keys["per_device_batch_size"], "0.5")
            self.assertEqual(keys["ragged_buffer_factor"], "2.75")
            self.assertEqual(keys["compile_engine_logps_chunk_size"], "4096")
            self.assertEqual(keys["compile_engine_router_replay"], "true")
            self.assertIn("beta: 0.04", keys["compile_engine_grpo_config"])
            flags = keys["compile_xla_flags"].split()
            self.assertIn("--xla_tpu_scoped_vmem_limit_kib=65536", flags)
            self.assertNotIn("--xla_tpu_scoped_vmem_limit_kib=65472", flags)
            self.assertIn("--xla_tpu_scoped_vmem_limit_kib=65536",
                          record["env"]["LIBTPU_INIT_ARGS"].split())
            self.assertEqual(record["argv"][-1], "compile_engine_router_replay=true",
                             "--compile-key comes last")

    def test_v5p_render(self):
        rc, out, err = run([V5P, "--json"])
        self.assertEqual(rc, 0, err)
        plan = json.loads(out)
        self.assertEqual((plan["slice"], plan["compile_topology"], plan["devices"]),
                         ("tpuv5:4x4x4", "v5p-128", 64))
        self.assertEqual(plan["hbm_gib_per_device"], 95)
        self.assertEqual(plan["micro_batch"]["per_device_batch_size"], "1.0")

    def test_hostile_values_survive_bash(self):
        with tempfile.TemporaryDirectory() as tmp:
            marker = os.path.join(tmp, "PWNED")
            hostile = [
                "$(touch %s)" % marker,
                "`touch %s`" % marker,
                "a'b\"c",
                "line1\nline2",
                "back\\slash\\",
                "; touch %s #" % marker,
                "$HOME ${PATH} $((1+1))",
                "d\u00e9j\u00e0 \u2713",
                "",
            ]
            args = []
            for i, value in enumerate(hostile):
                args.append("--compile-key=hostile_%d=%s" % (i, value))
                if value and not any(c.isspace() for c in value):
                    args.append("--maxtext-flag=mx_%d=%s" % (i, value))
                    args.append("--libtpu-flag=--xla_hostile_%d=%s" % (i, value))
            stub_dir = os.path.join(tmp, "my bin's $(x)")
            stub = make_stub(stub_dir)
            log = os.path.join(tmp, "log dir", "it's $(touch %s).log" % marker)
            script = self.print_script(*args, "--python", stub, "--log", log)
            subprocess.run(["bash", "-n"], input=script, text=True, check=True)
            rc, record, err = self.run_script(script, tmp)
            self.assertEqual(rc, 0, err)
            self.assertFalse(os.path.exists(marker), "a value was executed")
            self.assertTrue(os.path.exists(log), "the log path is taken literally")
            argv = record["argv"]
            xla_key = [k for k in argv if k.startswith("compile_xla_flags=")][-1]
            xla = xla_key.split("=", 1)[1].split(" ")
            libtpu = record["env"]["LIBTPU_INIT_ARGS"].split(" ")
            for i, value in enumerate(hostile):
                self.assertIn("hostile_%d=%s" % (i, value), argv)
                if value and not any(c.isspace() for c in value):
                    self.assertIn("mx_%d=%s" % (i, value), argv)
                    self.assertIn("--xla_hostile_%d=%s" % (i, value), xla)
                    self.assertIn("--xla_hostile_%d=%s" % (i, value), libtpu)

    def test_header_comment_cannot_be_escaped(self):
        with tempfile.TemporaryDirectory() as tmp:
            marker = os.path.join(tmp, "PWNED")
            path = os.path.join(tmp, "dry\ntouch PWNED\n.txt")  # the script runs in tmp
            with open(FIXTURE, encoding="utf-8") as f, open(path, "w", encoding="utf-8") as g:
                g.write(f.read())
            script = self.print_script(path=path)
            for line in script.splitlines():
                self.assertFalse(line.startswith("touch"), line)
            rc, _, err = self.run_script(script, tmp)
            self.assertEqual(rc, 0, err)
            self.assertFalse(os.path.exists(marker))

    def test_script_without_maxtext_exits_3(self):
        with tempfile.TemporaryDirectory() as tmp:
            rc, record, err = self.run_script(self.print_script(), tmp, {"STUB_NO_MAXTEXT": "1"})
            self.assertEqual(rc, 3)
            self.assertIsNone(record, "the compile did not start")
            self.assertIn("cannot import " + MODULE, err)

    def test_base_config_and_explain(self):
        rc, out, err = run([FIXTURE, "--base-config", "/my configs/base.yml", "--explain"])
        self.assertEqual(rc, 0, err)
        self.assertIn("BASE_CONFIG='/my configs/base.yml'\n", out)
        self.assertIn("ici_fsdp_parallelism=32  <- --mesh_fsdp", err)
        self.assertIn("sa_block_q=1024  <- MAXTEXT_EXTRA_FLAGS", err)

    def test_plan_notes_are_diagnostics_logged_with_verbose(self):
        fixture = os.path.join(TESTDATA, "launch_dryrun_weights_profiler.txt")
        args = [fixture, "--print", "--weights", "checkpoint"]
        rc, out, err = run(args + ["--json"])
        self.assertEqual(rc, 0, err)
        plan = json.loads(out)
        self.assertIn("--maxtext_ckpt_path is not passed: the compile uses abstract weights",
                      plan["notes"])
        self.assertEqual(plan["diagnostics"], [{"severity": "note", "where": None, "message": note}
                                               for note in plan["notes"]])
        self.assertEqual(err, "")  # notes are info: hidden by default
        rc, _, err = run(args + ["-v"])
        self.assertEqual(rc, 0, err)
        logged = [line for line in err.splitlines() if ".txt:" not in line]  # the DRY_RUN's notes
        self.assertEqual(logged, ["aot-check: info: " + note for note in plan["notes"]])

    def test_json_plan_and_output_file(self):
        with tempfile.TemporaryDirectory() as tmp:
            out_path = os.path.join(tmp, "plan.json")
            rc, out, err = run([FIXTURE, "--json", "-o", out_path, "--libtpu-flag=--xla_x=1"])
            self.assertEqual((rc, out), (0, ""), err)
            with open(out_path, encoding="utf-8") as f:
                plan = json.load(f)
        self.assertEqual(plan["schema"], "rtb.aot-check/1")
        self.assertEqual(plan["module"], MODULE)
        self.assertEqual(plan["mesh"], {"fsdp": 32, "tensor": 1, "expert": 2, "context": 4})
        self.assertEqual(plan["micro_batch"]["packed_rows"], 64)
        self.assertEqual(plan["logps_chunk_size"], 512)
        keys = {k["key"]: k for k in plan["keys"]}
        self.assertEqual(keys["compile_topology"]["from"], "trainer slice tpu7x:4x4x8")
        self.assertIn("--xla_x=1", keys["compile_xla_flags"]["value"].split())
        env = {e["name"]: e["value"] for e in plan["env"]}
        self.assertIn("--xla_x=1", env["LIBTPU_INIT_ARGS"].split())

    def test_logps_chunk_default_from_the_environment(self):
        """The seed's 512 when the render sets no chunk; AOT_LOGPS_CHUNK_SIZE (empty: 512) changes
        that default, and --logps-chunk, the render's own, overrides both."""
        no_chunk = [FIXTURE, "--json", "--trainer-arg-remove", "--compute_logps_chunk_size"]
        cases: tuple[tuple[dict[str, str], list[str], int], ...] = (
            ({}, [], 512),
            ({"AOT_LOGPS_CHUNK_SIZE": ""}, [], 512),
            ({"AOT_LOGPS_CHUNK_SIZE": "1024"}, [], 1024),
            ({"AOT_LOGPS_CHUNK_SIZE": "0"}, [], 0),
            ({"AOT_LOGPS_CHUNK_SIZE": "1024"}, ["--logps-chunk", "4096"], 4096),
        )
        for env, extra, expected in cases:
            rc, out, err = run_tool(TOOL, no_chunk + extra, env=env, unset=["AOT_LOGPS_CHUNK_SIZE"])
            self.assertEqual(rc, 0, err)
            self.assertEqual(json.loads(out)["logps_chunk_size"], expected, (env, extra))
        # A chunk the render sets wins over the environment's default.
        rc, out, err = run_tool(TOOL, [FIXTURE, "--json"], env={"AOT_LOGPS_CHUNK_SIZE": "1024"})
        self.assertEqual((rc, json.loads(out)["logps_chunk_size"]), (0, 512), err)
        rc, out, err = run_tool(TOOL, no_chunk, env={"AOT_LOGPS_CHUNK_SIZE": "big"})
        self.assertEqual((rc, out), (2, ""), err)
        self.assertEqual(len(err.splitlines()), 1, err)
        self.assertIn("AOT_LOGPS_CHUNK_SIZE=big: not an integer", err)
        rc, out, _ = run(["--help"])
        self.assertIn("AOT_LOGPS_CHUNK_SIZE", out)

    def test_launch_render_names_the_dryrun_when_no_file_is_given(self):
        rc, out, err = run_tool(TOOL, ["--json"], env={"LAUNCH_RENDER": FIXTURE})
        self.assertEqual(rc, 0, err)
        self.assertEqual(json.loads(out)["mesh"]["fsdp"], 32)
        # An explicit file wins over LAUNCH_RENDER.
        rc, out, err = run_tool(TOOL, [FIXTURE, "--json"],
                                env={"LAUNCH_RENDER": "/nonexistent/dryrun.txt"})
        self.assertEqual(rc, 0, err)
        rc, out, err = run_tool(TOOL, ["--json"], env={"LAUNCH_RENDER": "/nonexistent/dryrun.txt"})
        self.assertEqual((rc, out), (2, ""), err)
        self.assertIn("/nonexistent/dryrun.txt", err)
        rc, out, err = run_tool(TOOL, ["--json"], unset=["LAUNCH_RENDER"])
        self.assertEqual((rc, out), (2, ""), err)
        self.assertIn("LAUNCH_RENDER", err)

    # --- --run ---------------------------------------------------------------------------------
    def run_tool(self, tmp, *args, env=None):
        bindir = os.path.join(tmp, "bin")
        make_stub(bindir)
        full_env = {"PATH": bindir + ":" + os.environ.get("PATH", "/usr/bin:/bin")}
        full_env.update(env or {})
        return run([FIXTURE, "--run", *args], env=full_env, cwd=tmp)

    def test_run_summarizes_the_log(self):
        with tempfile.TemporaryDirectory() as tmp:
            rc, out, err = self.run_tool(
                tmp, env={"STUB_LOG": os.path.join(TESTDATA, "memlog_engine_compile_a.log")})
            self.assertEqual(rc, 0, err)
            self.assertRegex(out.splitlines()[0], r"^log +logs/aot-bench-\d{8}T\d{6}Z\.log$")
            self.assertRegex(out, r"\nverdict +fits\n")
            self.assertRegex(out, r"\nHBM per device GiB +94\.74 \(chip tpu7x\)\n")
            self.assertEqual(len(os.listdir(os.path.join(tmp, "logs"))), 1)
            self.assertIn("Jitting and compiling the engine's kernels", err,
                          "the compile's output is on stderr")

            log = os.path.join(tmp, "b.log")
            rc, out, err = self.run_tool(
                tmp, "--log", log, "--json",
                env={"STUB_LOG": os.path.join(TESTDATA, "memlog_engine_compile_b.log")})
            self.assertEqual(rc, 1, err)
            summary = json.loads(out)
            self.assertEqual(summary["logs"][0]["path"], log)
            self.assertFalse(summary["logs"][0]["fits"])
            self.assertTrue(os.path.exists(log))

            rc, out, err = self.run_tool(
                tmp, "--hbm-gib", "100",
                env={"STUB_LOG": os.path.join(TESTDATA, "memlog_engine_compile_b.log")})
            self.assertEqual(rc, 0, err)
            self.assertIn("(--hbm-gib)", out)

    def test_run_reports_oom_and_failed_compiles(self):
        with tempfile.TemporaryDirectory() as tmp:
            rc, out, err = self.run_tool(
                tmp, env={
                    "STUB_LOG": os.path.join(TESTDATA, "memlog_oom_engine_hlo_temporaries.log"),
                    "STUB_STATUS": "1"
                })
            self.assertEqual(rc, 1, err)
            self.assertRegex(out,
                             r"out of memory +line 6: hbm 100\.13 GiB needed, 94\.74 available")
            rc, out, err = self.run_tool(
                tmp, env={
                    "STUB_LOG": os.path.join(TESTDATA, "memlog_bad_no_analysis.log"),
                    "STUB_STATUS": "1"
                })
            self.assertEqual(rc, 2)
            self.assertEqual(out, "")
            self.assertEqual(len(err.strip().splitlines()[-1:]), 1)
            self.assertRegex(
                err.strip().splitlines()[-1],
                r"^aot-check: the compile exited with status 1 and its log .* reports no memory "
                r"analysis")

    ARMS = ["--arm", "base", "--arm", "blk:--maxtext-flag=sa_block_q=2048"]
    FITS = os.path.join(TESTDATA, "memlog_engine_compile_a.log")
    DOES_NOT_FIT = os.path.join(TESTDATA, "memlog_engine_compile_b.log")

    def run_arms(self, tmp, *args, blk_log=None):
        """--run with two arms; the stub's compile log fits, but blk's is `blk_log` when given."""
        env = {"STUB_LOG": self.FITS}
        if blk_log:
            env.update({"STUB_ARM_KEY": "sa_block_q=2048", "STUB_ARM_LOG": blk_log})
        return self.run_tool(tmp, *self.ARMS, *args, env=env)

    def test_run_arms_checks_each_arms_program(self):
        with tempfile.TemporaryDirectory() as tmp:
            rc, out, err = self.run_arms(tmp)
            self.assertEqual(rc, 0, err)
            blocks = out.split("\n\n")
            self.assertEqual([b.splitlines()[0] for b in blocks], ["arm base:", "arm blk:"])
            for block, arm in zip(blocks, ["base", "blk"]):
                self.assertRegex(block.splitlines()[1],
                                 r"^log +logs/aot-bench-\d{8}T\d{6}Z-%s\.log$" % arm)
                self.assertRegex(block, r"\nverdict +fits(\n|$)")
            self.assertEqual(len(os.listdir(os.path.join(tmp, "logs"))), 2, "one log per arm")
            # Each arm announced before its compile's output, as the arms script does.
            self.assertLess(err.index("aot-check: arm base\n"), err.index("aot-check: arm blk\n"))

    def test_run_arms_fails_when_one_arm_does_not_fit(self):
        with tempfile.TemporaryDirectory() as tmp:
            rc, out, err = self.run_arms(tmp, blk_log=self.DOES_NOT_FIT)
            self.assertEqual(rc, 1, err)
            base, blk = out.split("\n\n")
            self.assertRegex(base, r"\nverdict +fits(\n|$)")
            self.assertTrue(blk.startswith("arm blk:\n"), blk)
            self.assertRegex(blk, r"\nverdict +DOES NOT FIT \(fwd_bwd\)")

            log = os.path.join(tmp, "aot.log")
            rc, out, err = self.run_arms(tmp, "--log", log, "--json", blk_log=self.DOES_NOT_FIT)
            self.assertEqual(rc, 1, err)
            doc = json.loads(out)
            self.assertEqual((doc["schema"], doc["exit_code"]), ("rtb.aot-check.arms-run/1", 1))
            self.assertEqual([a["arm"] for a in doc["arms"]], ["base", "blk"])
            self.assertEqual([a["fits"] for a in doc["arms"]], [True, False])
            self.assertEqual([a["exit_code"] for a in doc["arms"]], [0, 1])
            paths = [a["logs"][0]["path"] for a in doc["arms"]]
            self.assertEqual(paths,
                             [os.path.join(tmp, "aot-base.log"),
                              os.path.join(tmp, "aot-blk.log")])
            for path in paths:
                self.assertTrue(os.path.exists(path), path)
            # The same fields as the document of one render, but its schema.
            rc, out, err = self.run_tool(tmp, "--log", log, "--json", env={"STUB_LOG": self.FITS})
            self.assertEqual(rc, 0, err)
            self.assertEqual(set(doc["arms"][0]) - {"arm"}, set(json.loads(out)) - {"schema"})

    def test_run_arms_stops_at_an_arm_that_cannot_be_judged(self):
        with tempfile.TemporaryDirectory() as tmp:
            rc, out, err = self.run_arms(
                tmp, blk_log=os.path.join(TESTDATA, "memlog_bad_no_analysis.log"))
            self.assertEqual((rc, out), (2, ""), err)
            last = err.strip().splitlines()[-1]
            self.assertRegex(last, r"^aot-check: .*-blk\.log.*: arm blk: ")

    def test_print_json_arms(self):
        rc, out, err = run([FIXTURE, *self.ARMS, "--json"])
        self.assertEqual(rc, 0, err)
        doc = json.loads(out)
        self.assertEqual(doc["schema"], "rtb.aot-check.arms/1")
        self.assertEqual([a["arm"] for a in doc["arms"]], ["base", "blk"])
        blocks = [{k["key"]: k["value"] for k in a["keys"]} for a in doc["arms"]]
        self.assertEqual([b["sa_block_q"] for b in blocks], ["1024", "2048"])
        rc, out, err = run([FIXTURE, "--json"])
        self.assertEqual(rc, 0, err)
        single = json.loads(out)
        self.assertEqual(set(doc["arms"][0]) - {"arm"}, set(single) - {"schema"})
        self.assertEqual({k: v
                          for k, v in doc["arms"][0].items() if k != "arm"},
                         {k: v
                          for k, v in single.items() if k != "schema"},
                         "the control's plan is that of the render without arms")
        rc, out, err = run([FIXTURE, "--maxtext-flag=sa_block_q=2048", "--json"])
        self.assertEqual(rc, 0, err)
        blk = {k: v for k, v in json.loads(out).items() if k != "schema"}
        self.assertEqual({k: v
                          for k, v in doc["arms"][1].items() if k != "arm"}, blk,
                         "an arm's plan is that of a render with its knobs")

    def test_run_without_maxtext(self):
        with tempfile.TemporaryDirectory() as tmp:
            cases: list[tuple[list[str], dict[str, str]]] = [
                ([], {"STUB_NO_MAXTEXT": "1"}),
                (["--python", os.path.join(tmp, "no-such-python")], {}),
            ]
            for args, env in cases:
                rc, out, err = self.run_tool(tmp, *args, env=env)
                self.assertEqual(rc, 2)
                self.assertEqual(out, "")
                lines = err.splitlines()
                self.assertEqual(len(lines), 1, err)
                self.assertIn("--run needs a Python with MaxText", lines[0])
                self.assertIn(MODULE, lines[0])
            self.assertFalse(os.path.exists(os.path.join(tmp, "logs")))

    # --- errors ----------------------------------------------------------------------------------
    def assert_fails(self, args, expected):
        assert_bad_input(self, "aot-check", run(args), expected)

    def test_errors(self):
        self.assert_fails([os.path.join(BAD, "no_trainer.txt")], "no trainer JobSet")
        self.assert_fails([os.path.join(BAD, "empty.txt")], "no trainer JobSet")
        self.assert_fails(
            [FIXTURE, "--trainer-arg=--mesh_context=2"],
            "the mesh fsdp 32 x expert 2 x context 2 = 128 devices does not fill the 256 devices")
        self.assert_fails([FIXTURE, "--maxtext-flag", "ici_fsdp_parallelism=48"], "does not fill")
        self.assert_fails([FIXTURE, "--trainer-arg=--train_micro_batch_size=40"],
                          "not a multiple of --mesh_fsdp=32")
        self.assert_fails([FIXTURE, "--trainer-slice", "tpu7x:4x4"], "topolog")
        self.assert_fails([FIXTURE, "--trainer-slice", "tpu7x:1x1x1"], "does not divide")
        self.assert_fails([FIXTURE, "--compile-key", "oops"], "--compile-key oops")
        self.assert_fails([FIXTURE, "--print", "--run"], "not both")
        self.assert_fails([FIXTURE, "--hbm-gib", "0", "--run"], "--hbm-gib")
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "tpu9.txt")
            with open(FIXTURE, encoding="utf-8") as f, open(path, "w", encoding="utf-8") as g:
                g.write(f.read().replace("--instance_type=tpu7x:4x4x8",
                                         "--instance_type=tpu9:4x4x8"))
            self.assert_fails(
                [path], "the trainer slice tpu9:4x4x8 gives no compile_topology: unknown TPU type")

    def test_help_and_version(self):
        # --trainer-slice: the render-bench knobs.
        assert_help_and_version(self, "aot-check", "--trainer-slice", "--compile-key")


if __name__ == "__main__":
    unittest.main()
