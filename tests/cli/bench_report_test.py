"""CLI tests of bench-report: runs the built tool on bench driver and e2e orchestrator logs whose
every figure has a known answer, and checks stdout (table and --json), stderr, the SVG and the exit
codes.

The logs are generated here from known timings:
- bench runs come out of the real bench driver (tools/render-bench/driver/bench_driver.py): its
  step loop and summary run against a simulated trainer worker on a fake clock, so the lines are
  the driver's own, and the simulation's device times are the known answers;
- e2e orchestrator runs are written in the orchestrator's formats (TRAINER_STEP_TIMING,
  `Train step N - ...`, `[StepMetrics step=N] trainer_metrics={...}`) from a millisecond schedule.

`python3 bench_report_test.py --write-fixtures DIR` writes the logs checked in under
testdata/bench_logs/ (and their known answers, expected.json); the tests read those files, and
one test also runs the current driver live.
"""

import json
import math
import os
import re
import statistics
import sys
import tempfile
import unittest
import xml.etree.ElementTree as ET
from typing import Any

from cli_common import BIN, TESTDATA, assert_help_and_version, load_driver, run_tool

# The driver's test doubles (a completion watcher for a fake clock) live with its tests.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "driver"))
# Found through the path above at run time, which mypy does not follow.
from doubles import InlineCompletionWatcher  # type: ignore[import]  # noqa: E402

TOOL = os.path.join(BIN, "bench-report")
HERE = os.path.dirname(os.path.abspath(__file__))
LOGS = os.path.join(TESTDATA, "bench_logs")

MICRO_STEPS = 9
STEPS = 5
BENCH_ROWS = 4  # the simulated runs' rows and tokens per row (their BENCH_SUMMARY says so)
BENCH_TOKENS_PER_ROW = 65536

# ------------------------------------------------------------------------------------------------
# Bench runs: the driver's step loop against a simulated worker.
# ------------------------------------------------------------------------------------------------


class FakeClock:

    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


class Token:
    """A device result; waiting on it moves the clock to when it is ready."""

    def __init__(self, clock, ready_at):
        self.clock, self.ready_at = clock, ready_at

    def block_until_ready(self):
        self.clock.now = max(self.clock.now, self.ready_at)
        return self


class Request:

    def __init__(self, payload):
        self.payload, self.metadata, self.request_id = payload, {}, "train_req_0000abcd"


class SimWorker:
    """A TrainerWorker whose device runs fwd_bwd calls back to back for known times, with the
  StepTimer's get_step_timing (monotonic `ago` seconds, reset by the first call after an update)
  and get_metrics."""

    FIRST_DISPATCH = 0.05  # the call that carries a new step's payload
    DISPATCH = 0.01
    UPDATE = 0.9
    RTT = 0.002

    def __init__(self, clock, device_s, metrics=None, fail_at_call=None):
        self.clock, self.device_s, self.metrics = clock, device_s, metrics
        self.fail_at_call = fail_at_call
        self.device_free = clock.now
        self.record: dict[str, Any] = {"mb": [], "update": None}
        self.after_update = False
        self.updates = 0
        self.calls = 0

    def fwd_bwd(self, request, **kwargs):
        del request, kwargs
        if self.calls == self.fail_at_call:
            raise RuntimeError("device lost")
        self.calls += 1
        if self.after_update:
            self.record, self.after_update = {"mb": [], "update": None}, False
        index = len(self.record["mb"])
        begin = self.clock.now
        self.clock.now += self.FIRST_DISPATCH if index == 0 else self.DISPATCH
        end = self.clock.now
        self.device_free = max(end, self.device_free) + self.device_s(self.updates + 1, index)
        self.record["mb"].append((index, begin, end, self.device_free))
        return {"queued": True, "loss": Token(self.clock, self.device_free)}

    def update(self):
        begin = self.clock.now
        self.clock.now += self.DISPATCH
        end = self.clock.now
        self.device_free = max(end, self.device_free) + self.UPDATE
        self.record["update"] = (begin, end, self.device_free)
        self.updates += 1
        self.after_update = True
        return {"train_step": self.updates, "token": Token(self.clock, self.device_free)}

    def get_step_timing(self):
        self.clock.now += self.RTT / 2
        now = self.clock.now

        def ago(t):
            return None if t > now else round(now - t, 3)

        update = self.record["update"]
        timing = {
            "v": 1,
            "train_step": self.updates,
            "mb": [{
                "i": i, "dispatch_begin_ago_s": ago(b), "dispatch_end_ago_s": ago(e),
                "ready_ago_s": ago(r)
            } for i, b, e, r in self.record["mb"]],
            "update": None if update is None else {
                "dispatch_begin_ago_s": ago(update[0]), "dispatch_end_ago_s": ago(update[1]),
                "ready_ago_s": ago(update[2])
            },
            "prepare": None,
        }
        self.clock.now += self.RTT / 2
        return timing

    def get_metrics(self):
        return self.metrics(self.updates) if self.metrics else {"loss": 0.5, "gradient_norm": 2.0}


def jitter(step, index, pattern):
    return 0.001 * ((step * pattern[0] + index * pattern[1]) % 5)


def bench_device(base, pattern=(7, 3), compile_s=25.0, boundary=0.2):
    """Device seconds of micro-batch `index` (0-based) of step `step` (1-based)."""

    def device_s(step, index):
        if step == 1 and index == 0:
            return compile_s
        extra = boundary if index < 2 else 0.0
        return round(base + extra + jitter(step, index, pattern), 6)

    return device_s


class MoeConfig:
    """The two MaxText settings the driver's token_dropping() reads from the trainer's config."""

    def __init__(self, capacity_factor, ragged_buffer_factor):
        self.capacity_factor, self.ragged_buffer_factor = capacity_factor, ragged_buffer_factor


def bench_lines(name, device_s, steps=STEPS, micro_steps=MICRO_STEPS, metrics=None,
                fail_at_call=None, chips=4, tokens_regular=245_000, tokens_final=122_500, moe=None):
    """The driver's stdout (and its failure line) for one simulated run. `moe`: (MoeConfig,
  experts) for the driver's BENCH_SUMMARY token_dropping (absent without it)."""
    bd = load_driver()
    clock = FakeClock()
    worker = SimWorker(clock, device_s, metrics, fail_at_call)
    lines = [
        f"[TrainerBench] {name}: bench driver starting: {steps} steps x {micro_steps} fwd_bwd "
        "calls"
    ]
    plan = bd.BenchPlan(name=name, steps=steps, micro_steps=micro_steps, regular="R", final="F",
                        tokens_regular=tokens_regular, tokens_final=tokens_final, chips=chips,
                        padded_tokens_per_call=BENCH_ROWS * BENCH_TOKENS_PER_ROW)
    try:
        # On a fake clock the completions are observed in order on this thread.
        records = bd.run_steps(worker, plan, clock=clock, calls=bd.WorkerCalls(worker, Request),
                               watcher=InlineCompletionWatcher(clock), observer=bd.DeviceObserver(),
                               out=lines.append, log=lambda m: lines.append(f"[TrainerBench] {m}"))
    except RuntimeError as exc:
        lines += [
            "Traceback (most recent call last):",
            '  File "/tmp/bench_driver.py", line 1093, in run_steps', f"RuntimeError: {exc}",
            f"bench_driver: failed: {exc}"
        ]
        return lines
    extra = {"devices": chips * 2}
    if moe:
        extra["token_dropping"] = bd.token_dropping(moe[0], records, moe[1])
    summary = bd.summarize(plan, records, rows=BENCH_ROWS, tokens_per_row=BENCH_TOKENS_PER_ROW,
                           real_len=60948, segments=8, final_rows=4, layers=None, topk=None,
                           experts=None, routing=[], routing_final=None,
                           knobs={"steps": steps, "micro_steps": micro_steps}, extra=extra)
    lines.append("BENCH_SUMMARY " + json.dumps(summary, separators=(",", ":")))
    lines.append(f"[TrainerBench] {name}: done: mean step {summary['mean_step_s']} s, "
                 f"{summary['tokens_per_s_per_chip']} tok/s/chip")
    return lines


def bench_known(device_s, steps=STEPS, micro_steps=MICRO_STEPS, used=None, tokens_regular=245_000,
                tokens_final=122_500, chips=4):
    """The known answers of a simulated run over the steps `used` (default 2..steps)."""
    used = list(range(2, steps + 1)) if used is None else used
    calls = range(micro_steps)
    step_s = [
        SimWorker.FIRST_DISPATCH + sum(device_s(s, i) for i in calls) + SimWorker.UPDATE
        for s in used
    ]
    regular = [device_s(s, i) for s in used for i in range(2, micro_steps)]
    tokens = tokens_regular * (micro_steps - 1) + tokens_final
    padded = BENCH_ROWS * BENCH_TOKENS_PER_ROW * micro_steps
    return {
        "steps_used": used, "step_mean": statistics.fmean(step_s), "step_s": step_s,
        "microbatch_median": statistics.median(regular), "microbatch_n": len(regular),
        "device_median": statistics.median(regular), "update_s": SimWorker.UPDATE,
        "tokens_per_s_per_chip": padded / statistics.fmean(step_s) / chips,
        "real_tokens_per_s_per_chip": tokens / statistics.fmean(step_s) / chips
    }


# Numerics: per-step metrics of two references and variants, as get_metrics returns them.
def numerics_metrics(loss=1.0, grad=1.0, logprob=0.0, entropy=1.0, ratio=1.0, nan_loss_step=None):

    def metrics(step):
        value = {
            "loss": (0.0123456789 + 0.001 * step) * loss,
            "gradient_norm": 1.2345678 * (1 + 0.01 * step) * grad,
            "entropy": (12.42 - 0.001 * step) * entropy,
            "log_ratio": {"abs_mean": 0.002345 + 1e-5 * step + logprob},
            "is_ratio": {"mean": (1.0000123 + 1e-6 * step) * ratio},
            "learning_rate": 1e-6,
        }
        if step == nan_loss_step:
            value["loss"] = float("nan")  # older drivers dropped it; the driver now logs NaN
        return value

    return metrics


NUMERICS: dict[str, dict[str, float]] = {
    "numerics_ref1": {},
    "numerics_ref2": {
        "loss": 1 + 1e-7, "grad": 1 + 1.9e-5, "logprob": 3.6e-7, "entropy": 1 + 5e-8,
        "ratio": 1 + 2e-8
    },
    "numerics_variant": {
        "loss": 1 + 2.7e-7, "grad": 1 + 1.6e-4, "logprob": 3.1e-7, "entropy": 1 + 5.1e-7,
        "ratio": 1 - 3e-7
    },
    "numerics_bad": {
        "loss": 1 + 2.7e-7, "grad": 1 - 0.008, "logprob": 9.7e-4, "entropy": 1 + 5.1e-7,
        "ratio": 1 - 3e-7
    },
    "numerics_nan": {"nan_loss_step": 3},
}
NUMERICS_STEPS = 4


def numerics_known(variant):
    """Worst deviation of each value gate (variant against the references' mean), by hand."""
    metrics = {name: numerics_metrics(**kwargs) for name, kwargs in NUMERICS.items()}
    keys = {
        "loss": ("loss", True), "logprob": ("log_ratio", False), "entropy": ("entropy", True),
        "grad_norm": ("gradient_norm", True), "is_ratio": ("is_ratio", True)
    }
    out = {}
    for gate, (key, relative) in keys.items():
        worst, noise = 0.0, 0.0
        for step in range(1, NUMERICS_STEPS + 1):

            def get(name):
                value = metrics[name](step)[key]
                return next(iter(value.values())) if isinstance(value, dict) else value

            a, b, v = get("numerics_ref1"), get("numerics_ref2"), get(variant)
            mean = (a + b) / 2
            scale = abs(mean) if relative else 1.0
            noise = max(noise, abs(a - b) / scale)
            worst = max(worst, abs(v - mean) / scale) if math.isfinite(v) else math.inf
        out[gate] = {"value": worst, "references": noise}
    return out


# ------------------------------------------------------------------------------------------------
# e2e orchestrator runs: a millisecond schedule written in the orchestrator's formats.
# ------------------------------------------------------------------------------------------------

E2E_STEPS = 6


def e2e_device_ms(step, index):
    if step == 1 and index == 0:
        return 61_000  # compile
    return 9_080 + (300 if index < 2 else 0) + ((step * 5 + index * 2) % 7)


E2E_IDLE_MS = {2: 1_500, 3: 0, 4: 2_250, 5: 700, 6: 3_000}  # orchestrator waits before mb 6
E2E_SYNC_WAIT_MS = {2: 0, 3: 450, 4: 1_200, 5: 0, 6: 800}


def glog(line, n, source="rl_program.py:1873"):
    minute, second = divmod(n, 60)
    return f"I1013 18:{minute % 60:02d}:{second:02d}.{(n * 7919) % 1_000_000:06d} 140245 {source}] {line}"


def e2e_run(publish_ready=True, unavailable_step=None):
    """(lines, known answers) of a simulated e2e orchestrator log."""
    lines, known_steps = [], {}
    t = 0  # orchestrator clock, ms
    device_free = 0
    n = 0
    for step in range(1, E2E_STEPS + 1):
        step_start = t
        host = t
        mbs = []
        previous_ready = None
        for index in range(MICRO_STEPS):
            begin = host + (300 if index == 0 else 20)
            if index == 5 and previous_ready is not None:
                # The orchestrator waits for packed rollouts: the device idles after mb 5 (1-based).
                begin = max(begin, previous_ready + E2E_IDLE_MS.get(step, 0))
            end = begin + (400 if index == 0 else 60)
            start = max(end, device_free)
            ready = start + e2e_device_ms(step, index)
            device_free = previous_ready = ready
            mbs.append((index, begin, end, ready))
            host = end
            n += 1
            lines.append(
                glog(
                    f"Executing train_step on actor worker (accumulate_gradients=True, "
                    f"apply_optimizer={index == MICRO_STEPS - 1})...", n,
                    "distributed_rl_engine.py:412"))
        u_begin = host + 15
        u_end = u_begin + 40
        u_ready = max(u_end, device_free) + 900
        device_free = u_ready
        recv = u_ready + E2E_SYNC_WAIT_MS.get(step, 0)
        done = recv + 1_800
        snapshot = done + 30
        rtt = 4

        def ago(ms):
            return round((snapshot - ms) / 1000, 3)

        timing = {
            "v": 1,
            "train_step": step,
            "mb": [{
                "i": i, "dispatch_begin_ago_s": ago(b), "dispatch_end_ago_s": ago(e),
                "ready_ago_s": ago(r) if publish_ready else None
            } for i, b, e, r in mbs],
            "update": {
                "dispatch_begin_ago_s": ago(u_begin), "dispatch_end_ago_s": ago(u_end),
                "ready_ago_s": ago(u_ready) if publish_ready else None
            },
            "prepare": {"recv_ago_s": ago(recv), "done_ago_s": ago(done)},
        }
        end_ms = -(-(snapshot + rtt + 200) // 10) * 10  # step_time is printed with 2 decimals
        t = end_ms
        n += 1
        if step == unavailable_step:
            lines.append(
                glog(
                    f"TRAINER_STEP_TIMING step={step} unavailable: <_InactiveRpcError of RPC "
                    "that terminated with: status = StatusCode.DEADLINE_EXCEEDED>", n))
        else:
            lines.append(
                glog(
                    f"TRAINER_STEP_TIMING step={step} policy_version={step} rtt_s="
                    f"{rtt / 1000:.3f} timing={json.dumps(timing, separators=(',', ':'))}", n))
        loss = 0.0123 + 0.0001 * step
        grad = 1.25 + 0.01 * step
        metrics = {
            "loss": loss, "grad_norm": grad, "entropy": 12.41 - 0.002 * step,
            "log_ratio/abs_mean": 0.0021 + 1e-5 * step, "is_ratio/mean": 1.00001 + 1e-6 * step,
            "learning_rate": 1e-06, "perplexity": math.exp(loss)
        }
        # As printed from NumPy and JAX scalars, with a non-finite value.
        dict_text = repr(metrics)[:-1] + ", 'kl': np.float32(0.0), 'pg_clipfrac': nan}"
        n += 1
        lines.append(glog(f"[StepMetrics step={step}] trainer_metrics={dict_text}", n))
        n += 1
        step_time = (end_ms - step_start) / 1000
        lines.append(
            glog(
                f"Train step {step} - loss: {loss} - reward_mean: 0.4375 - advantage_mean: "
                f"0.0000 - grad_norm: {grad} - perplexity: {math.exp(loss)} - step_time: "
                f"{step_time:.2f}s", n))
        lines.append(glog(f"<<< Step {step} finished | Advanced to Policy Version: {step + 1}", n))
        regular = [e2e_device_ms(step, i) / 1000 for i in range(2, MICRO_STEPS)]
        gaps = sum(max(0, mbs[i + 1][1] - mbs[i][3]) for i in range(MICRO_STEPS - 1))
        known_steps[step] = {
            "step_time": round(step_time, 2),
            "regular_device_s": regular,
            "idle_s": gaps / 1000 + max(0, u_begin - mbs[-1][3]) / 1000,
            "update_s": 0.9,
            "sync_wait_s": E2E_SYNC_WAIT_MS.get(step, 0) / 1000,
        }
    if not publish_ready:
        lines.insert(
            0,
            glog(
                "TRAINER_STEP_TIMING: MaxTextTrainingEngine does not set "
                "`last_fwd_bwd_token`; device `ready` times will be missing from the "
                "timeline (dispatch times only).", 0, "trainer_worker.py:233"))
    used = list(range(2, E2E_STEPS + 1))
    timed = [s for s in used if s != unavailable_step]
    known = {
        "steps_used": used,
        "step_mean": statistics.fmean(known_steps[s]["step_time"] for s in used),
        "device_median": statistics.median(
            [v for s in timed for v in known_steps[s]["regular_device_s"]]),
        "idle_mean": statistics.fmean(known_steps[s]["idle_s"] for s in timed),
        "update_mean": 0.9,
        "sync_wait_mean": statistics.fmean(known_steps[s]["sync_wait_s"] for s in timed),
        "timeline_steps": len(timed),
    }
    return lines, known


# ------------------------------------------------------------------------------------------------
# Runs of the current driver contract: steps from 0, labelled micro-batch timing, profiled steps,
# padded and real tokens. Written here from known values (not by the driver), at the seed's scale.
# ------------------------------------------------------------------------------------------------

SEED_ROWS, SEED_TOKENS_PER_ROW, SEED_CHIPS = 64, 65536, 128
SEED_PADDED = SEED_ROWS * SEED_TOKENS_PER_ROW * MICRO_STEPS


def seed_real_tokens(step):
    return SEED_ROWS * 60948 * MICRO_STEPS - 4096 * (step % 3)


def device_microbatches(step, base=9.084):
    if step == 0:
        return [40.0] + [
            round(base + (0.2 if i < 2 else 0) + jitter(step, i, (7, 3)), 6)
            for i in range(1, MICRO_STEPS)
        ]
    return [
        round(base + (0.2 if i < 2 else 0) + jitter(step, i, (7, 3)), 6) for i in range(MICRO_STEPS)
    ]


def dispatch_microbatches(step):
    """What the host sees with an asynchronous engine: the first calls return at once, later ones
  block on a call two before them."""
    first = [40.1, 0.012] if step == 0 else [0.051, 0.012]
    return first + [round(9.71 + jitter(step, i, (3, 1)), 6) for i in range(2, MICRO_STEPS)]


CURRENT_RUNS = {
    # file: (name, step seconds from step 0, micro-batch times, mode, profiled steps)
    "bench_device_ctl.log": (
        "ab2-ctl",
        [131.204, 82.668, 82.672, 82.670, 82.674],
        device_microbatches,
        "device",
        (),
    ),
    "bench_dispatch_var.log": (
        "ab2-var",
        [133.9, 89.765, 89.772, 89.770, 89.773],
        dispatch_microbatches,
        "dispatch",
        (),
    ),
    "bench_profiled.log": (
        "ab2-prof",
        [131.5, 82.66, 106.30, 82.68, 82.673],
        lambda step: device_microbatches(step, 12.5 if step == 2 else 9.084),
        "device",
        (2, ),
    ),
}


def current_lines(name, step_s, microbatches, timing, profiled):
    lines = [
        f"[TrainerBench] {name}: bench driver starting: {len(step_s)} steps x {MICRO_STEPS} "
        "fwd_bwd calls"
    ]
    source = "step_timing" if timing == "device" else "dispatch"
    for step, seconds in enumerate(step_s):
        record = {
            "step": step,
            "seconds": seconds,
            "microbatch_s": microbatches(step),
            "microbatch_timing": timing,
            "microbatch_timing_source": source,
            "tokens": seed_real_tokens(step),
            "padded_tokens": SEED_PADDED,
            "tokens_per_s_per_chip": round(SEED_PADDED / seconds / SEED_CHIPS, 3),
            "real_tokens_per_s_per_chip": round(seed_real_tokens(step) / seconds / SEED_CHIPS, 3),
            "update": "fused",
            "fused_update": True,
            "staged": step in (1, 2),
            "profiled": step in profiled,
            "train_step": step + 1,
            "metrics": {"loss": 0.5, "gradient_norm": 2.0},
        }
        lines.append("BENCH_STEP " + json.dumps(record, separators=(",", ":")))
    steady = [s for s in range(1, len(step_s)) if s not in profiled]
    mean = statistics.fmean(step_s[s] for s in steady)
    real_tokens = statistics.fmean(seed_real_tokens(s) for s in steady)
    summary = {
        "name": name,
        "steps": len(step_s),
        "micro_steps": MICRO_STEPS,
        "rows": SEED_ROWS,
        "tokens_per_row": SEED_TOKENS_PER_ROW,
        "real_len": 60948,
        "chips": SEED_CHIPS,
        "tokens_per_step": seed_real_tokens(1),
        "padded_tokens_per_step": SEED_PADDED,
        "step_s": step_s,
        "first_step_s": step_s[0],
        "steady_steps": steady,
        "profiled_steps": list(profiled),
        "mean_step_s": round(mean, 6),
        "median_microbatch_s": statistics.median(v for s in steady for v in microbatches(s)[2:]),
        "microbatch_timing": timing,
        "tokens_per_s_per_chip": round(SEED_PADDED / mean / SEED_CHIPS, 3),
        "real_tokens_per_s_per_chip": round(real_tokens / mean / SEED_CHIPS, 3),
        "stage_boundary": {
            "requested": "auto", "resolved": "on", "engaged": True, "staged_steps": [1, 2],
            "latched_off": None
        },
        "knobs": {"steps": len(step_s), "micro_steps": MICRO_STEPS},
    }
    lines.append("BENCH_SUMMARY " + json.dumps(summary, separators=(",", ":")))
    return lines


def current_known(step_s, microbatches, used):
    mean = statistics.fmean(step_s[s] for s in used)
    regular = [v for s in used for v in microbatches(s)[2:]]
    real_tokens = statistics.fmean(seed_real_tokens(s) for s in used)
    return {
        "steps_used": used, "step_mean": mean, "first_step_s": step_s[0],
        "microbatch_median": statistics.median(regular), "microbatch_n": len(regular),
        "tokens_per_s_per_chip": SEED_PADDED / mean / SEED_CHIPS,
        "real_tokens_per_s_per_chip": real_tokens / mean / SEED_CHIPS
    }


# ------------------------------------------------------------------------------------------------
# The fixture set.
# ------------------------------------------------------------------------------------------------


def kubectl(lines, pod, start=0):
    """kubectl logs --prefix --timestamps."""
    out = []
    for n, line in enumerate(lines):
        seconds = start + n
        out.append(
            f"[pod/{pod}/client] 2026-10-13T18:{(seconds // 60) % 60:02d}:{seconds % 60:02d}."
            f"{(n * 104729) % 1_000_000_000:09d}Z {line}")
    return out


def interleave(lines, noise, every=3):
    """Puts a noise line after every `every` lines."""
    out, k = [], 0
    for n, line in enumerate(lines):
        out.append(line)
        if n % every == every - 1 and noise:
            out.append(noise[k % len(noise)])
            k += 1
    return out


def noise_lines():
    logs = LOGS or os.path.join(HERE, "..", "..", "testdata", "bench_logs")
    with open(os.path.join(logs, "noise_maxtext_dpo.txt"), encoding="utf-8") as f:
        return f.read().splitlines()


CTL = bench_device(9.084)
FAST = bench_device(9.035)
CTL2 = bench_device(9.094)  # the A/A second control: +0.11% per micro-batch
TINY = bench_device(9.079)  # -0.055%: significant, but inside the A/A noise floor
SLOW = bench_device(9.134)  # +0.55%


def fixtures():
    """{file name: text} of every fixture, and the known answers."""
    noise = noise_lines()
    files, known = {}, {}

    def put(name, lines):
        files[name] = "\n".join(lines) + "\n"

    ctl = bench_lines("ab-ctl", CTL)
    put("bench_ctl.log", kubectl(interleave(ctl, noise), "ab-ctl-client-0-0-x7k2q"))
    known["bench_ctl.log"] = bench_known(CTL)
    others = (("ab-fast", FAST), ("ab-ctl2", CTL2), ("ab-tiny", TINY), ("ab-slow", SLOW))
    for name, device in others:
        put(f"bench_{name[3:]}.log", bench_lines(name, device))
        known[f"bench_{name[3:]}.log"] = bench_known(device)
    # The control's values with its steps in another order: the same mean, no change.
    same = bench_device(9.084)
    order = {2: 3, 3: 5, 4: 2, 5: 4, 1: 1}
    put("bench_same.log", bench_lines("ab-same", lambda s, i: same(order[s], i)))
    known["bench_same.log"] = bench_known(lambda s, i: same(order[s], i))

    # Crashed in step 4 (its 5th call): steps 1-3 logged, a traceback, no BENCH_SUMMARY.
    put("bench_partial.log", bench_lines("ab-crash", CTL, fail_at_call=3 * MICRO_STEPS + 4))
    known["bench_partial.log"] = bench_known(CTL, used=[2, 3])

    # Step 3's timing JSON cut short; step 3's BENCH_STEP line dropped in another.
    lines = bench_lines("ab-malformed", CTL)
    for n, line in enumerate(lines):
        if line.startswith("TRAINER_STEP_TIMING step=3 "):
            lines[n] = line[:len(line) * 3 // 5]
            known["bench_malformed.log"] = dict(bench_known(CTL), malformed_line=n + 1)
    put("bench_malformed.log", lines)
    lines = [
        line for line in bench_lines("ab-missing", CTL)
        if not line.startswith(("BENCH_STEP {\"step\":3,", "TRAINER_STEP_TIMING step=3 "))
    ]
    put("bench_missing_step.log", lines)
    known["bench_missing_step.log"] = bench_known(CTL, used=[2, 4, 5])

    for name, kwargs in NUMERICS.items():
        put(
            f"{name}.log",
            bench_lines(name.replace("_", "-"), CTL, steps=NUMERICS_STEPS, micro_steps=3,
                        metrics=numerics_metrics(**kwargs)))
    for name in ("numerics_variant", "numerics_bad", "numerics_nan"):
        known[f"{name}.log"] = numerics_known(name)

    lines, answers = e2e_run(publish_ready=True)
    put("e2e_orchestrator.log", interleave(lines, noise, every=4))
    known["e2e_orchestrator.log"] = answers
    lines, answers = e2e_run(publish_ready=False, unavailable_step=4)
    put("e2e_maxtext_no_ready.log", lines)
    known["e2e_maxtext_no_ready.log"] = answers

    # Token dropping (issue 18): dropless by configuration, counted drops, cannot tell.
    put("bench_drops_none.log", bench_lines("ab-dropless", CTL, moe=(MoeConfig(-1, -1), 8)))

    def drops(step):
        return {"loss": 0.5, "gradient_norm": 2.0, "dropped_tokens": 100.0 * step}

    put("bench_drops_counted.log",
        bench_lines("ab-drops", SLOW, moe=(MoeConfig(1.25, -1), 8), metrics=drops))
    put("bench_drops_unknown.log", bench_lines("ab-maydrop", CTL, moe=(MoeConfig(1.25, -1), 8)))

    put("no_timing.log",
        ["[TrainerBench] ab-none: bench driver starting: 5 steps x 9 fwd_bwd calls"] + noise)

    for file, (name, step_s, microbatches, timing, profiled) in CURRENT_RUNS.items():
        lines = current_lines(name, step_s, microbatches, timing, profiled)
        if timing == "dispatch":
            lines = [glog(line, n, "bench_driver.py:1100") for n, line in enumerate(lines)]
        elif not profiled:
            lines = kubectl(interleave(lines, noise), "ab2-ctl-client-0-0-q8r4z")
        put(file, lines)
        used = [s for s in range(1, len(step_s)) if s not in profiled]
        known[file] = dict(current_known(step_s, microbatches, used), timing=timing)
        if profiled:
            known[file]["with_profiled"] = current_known(step_s, microbatches,
                                                         list(range(1, len(step_s))))
    return files, known


def write_fixtures(directory):
    files, known = fixtures()
    os.makedirs(directory, exist_ok=True)
    for name, text in files.items():
        with open(os.path.join(directory, name), "w", encoding="utf-8") as f:
            f.write(text)
    with open(os.path.join(directory, "expected.json"), "w", encoding="utf-8") as f:
        json.dump(known, f, indent=1, sort_keys=True)
        f.write("\n")


# ------------------------------------------------------------------------------------------------
# Tests.
# ------------------------------------------------------------------------------------------------


def run(args, stdin=None):
    return run_tool(TOOL, args, stdin=stdin)


def log(name):
    return os.path.join(LOGS, name)


def expected():
    with open(log("expected.json"), encoding="utf-8") as f:
        return json.load(f)


def report(*args):
    code, out, err = run(list(args) + ["--json"])
    try:
        document = json.loads(out)
    except json.JSONDecodeError:
        raise AssertionError(f"not JSON (exit {code}): {out!r} {err!r}") from None
    return code, document, err


class RunFiguresTest(unittest.TestCase):
    """Per-run figures against the simulation's known answers."""

    def check_bench(self, run, known, partial=False):
        self.assertEqual(run["steps_used"], known["steps_used"])
        self.assertEqual(run["step_s"]["n"], len(known["steps_used"]))
        self.assertAlmostEqual(run["step_s"]["mean"], known["step_mean"], delta=2e-6)
        self.assertLessEqual(run["step_s"]["ci_low"], run["step_s"]["mean"])
        self.assertGreaterEqual(run["step_s"]["ci_high"], run["step_s"]["mean"])
        self.assertAlmostEqual(run["microbatch_s"]["median"], known["microbatch_median"],
                               delta=2e-6)
        self.assertEqual(run["microbatch_s"]["n"], known["microbatch_n"])
        self.assertEqual(run["microbatch_s"]["source"], "BENCH_STEP")
        self.assertAlmostEqual(run["tokens_per_s_per_chip"], known["tokens_per_s_per_chip"],
                               delta=1e-3)
        self.assertAlmostEqual(run["real_tokens_per_s_per_chip"],
                               known["real_tokens_per_s_per_chip"], delta=1e-3)
        self.assertEqual(run["microbatch_timing"], "unlabelled")  # the driver of these logs
        timeline = run["timeline"]
        self.assertAlmostEqual(timeline["device_s"]["median"], known["device_median"], delta=1.5e-3)
        self.assertEqual(timeline["device_s"]["unknown"], 0)
        self.assertAlmostEqual(timeline["update_s"]["mean"], known["update_s"], delta=1.5e-3)
        self.assertAlmostEqual(timeline["idle_s_per_step"]["mean"], 0.0, delta=1.5e-3)
        self.assertEqual(timeline["sync_wait_s"]["not_applicable"], timeline["steps"])
        self.assertEqual(run["partial"], partial)
        self.assertEqual(run["format"], "bench")

    def test_control_with_prefixes_and_noise(self):
        code, doc, err = report(log("bench_ctl.log"))
        self.assertEqual(code, 0, err)
        self.assertEqual(err, "")
        (run, ) = doc["runs"]
        self.assertEqual(run["name"], "ab-ctl")
        self.check_bench(run, expected()["bench_ctl.log"])
        # The driver's own summary agrees (it rounds to 6 decimals).
        self.assertAlmostEqual(run["summary"]["mean_step_s"], run["step_s"]["mean"], delta=1e-6)
        self.assertAlmostEqual(run["summary"]["median_microbatch_s"], run["microbatch_s"]["median"],
                               delta=1e-6)
        self.assertEqual(doc["comparisons"], [])

    def test_every_bench_fixture(self):
        known = expected()
        for name in ("bench_fast.log", "bench_ctl2.log", "bench_tiny.log", "bench_slow.log",
                     "bench_same.log"):
            with self.subTest(name):
                code, doc, err = report(log(name))
                self.assertEqual(code, 0, err)
                self.check_bench(doc["runs"][0], known[name])

    def test_steps_option(self):
        code, doc, _ = report(log("bench_ctl.log"), "--steps", "1-4")
        self.assertEqual(code, 0)
        run = doc["runs"][0]
        self.assertEqual(run["steps_used"], [1, 2, 3, 4])
        known = bench_known(CTL, used=[1, 2, 3, 4])
        self.assertAlmostEqual(run["step_s"]["mean"], known["step_mean"], delta=2e-6)
        self.assertEqual(doc["options"]["steps"], "1-4")
        code, doc, _ = report(log("bench_ctl.log"), "--steps", "3-")
        self.assertEqual(doc["runs"][0]["steps_used"], [3, 4, 5])

    def test_microbatches_option(self):
        code, doc, _ = report(log("bench_ctl.log"), "--microbatches", "1-2")
        self.assertEqual(code, 0)
        run = doc["runs"][0]
        values = [CTL(s, i) for s in range(2, 6) for i in range(2)]
        values = [v + SimWorker.FIRST_DISPATCH if n % 2 == 0 else v for n, v in enumerate(values)]
        self.assertEqual(run["microbatch_s"]["n"], 8)
        self.assertAlmostEqual(run["microbatch_s"]["median"], statistics.median(values), delta=2e-6)

    def test_e2e_orchestrator_with_ready_times(self):
        code, doc, err = report(log("e2e_orchestrator.log"))
        self.assertEqual(code, 0, err)
        known = expected()["e2e_orchestrator.log"]
        run_ = doc["runs"][0]
        self.assertEqual(run_["format"], "orchestrator")
        self.assertEqual(run_["steps_used"], known["steps_used"])
        self.assertAlmostEqual(run_["step_s"]["mean"], known["step_mean"], delta=1e-9)
        self.assertEqual(run_["microbatch_s"]["source"], "TRAINER_STEP_TIMING")
        self.assertAlmostEqual(run_["microbatch_s"]["median"], known["device_median"], delta=1e-6)
        timeline = run_["timeline"]
        self.assertEqual(timeline["steps"], known["timeline_steps"])
        self.assertAlmostEqual(timeline["idle_s_per_step"]["mean"], known["idle_mean"], delta=1e-6)
        self.assertAlmostEqual(timeline["update_s"]["mean"], known["update_mean"], delta=1e-6)
        self.assertAlmostEqual(timeline["sync_wait_s"]["mean"], known["sync_wait_mean"], delta=1e-6)
        self.assertEqual(timeline["ready_known"], timeline["microbatches"])
        self.assertIsNone(run_["tokens_per_s_per_chip"])
        self.assertEqual(run_["microbatch_timing"], "device")  # from ready times

    def test_e2e_without_ready_times_reports_unknown_not_zero(self):
        code, doc, err = report(log("e2e_maxtext_no_ready.log"))
        self.assertEqual(code, 0, err)
        known = expected()["e2e_maxtext_no_ready.log"]
        run_ = doc["runs"][0]
        self.assertAlmostEqual(run_["step_s"]["mean"], known["step_mean"], delta=1e-9)
        self.assertIsNone(run_["microbatch_s"]["median"])
        self.assertIsNone(run_["microbatch_s"]["source"])
        timeline = run_["timeline"]
        self.assertEqual(timeline["steps"], 4)  # step 4's timing was unavailable
        self.assertIsNone(timeline["device_s"]["median"])
        self.assertEqual(timeline["device_s"]["unknown"], 4 * 7)
        self.assertIsNone(timeline["idle_s_per_step"]["mean"])
        self.assertIsNone(timeline["update_s"]["mean"])
        self.assertIsNone(timeline["sync_wait_s"]["mean"])
        self.assertEqual(timeline["sync_wait_s"]["unknown"], 4)
        self.assertEqual(timeline["ready_known"], 0)
        self.assertIn("TRAINER_STEP_TIMING unavailable for step 4", err)
        self.assertIn("no `ready` times", err)
        code, out, _ = run([log("e2e_maxtext_no_ready.log")])
        self.assertRegex(out, r"unknown\s+unknown\s+unknown\s+unknown\s+0/36 \(not published\)")


class ComparisonTest(unittest.TestCase):

    def test_faster_variant(self):
        code, doc, err = report(log("bench_ctl.log"), log("bench_fast.log"))
        self.assertEqual(code, 0, err)
        (c, ) = doc["comparisons"]
        self.assertEqual((c["run"], c["against"]), ("ab-fast", "ab-ctl"))
        known = expected()
        ratio = known["bench_fast.log"]["step_mean"] / known["bench_ctl.log"]["step_mean"]
        self.assertAlmostEqual(c["ratio"], ratio, delta=1e-7)
        self.assertLess(c["ci_high"], 1.0)
        self.assertLessEqual(c["ci_low"], c["ratio"])
        self.assertGreaterEqual(c["ci_high"], c["ratio"])
        self.assertEqual(c["verdict"], "faster")
        self.assertAlmostEqual(
            c["diff_s"], known["bench_fast.log"]["step_mean"] - known["bench_ctl.log"]["step_mean"],
            delta=2e-6)
        mb = c["microbatch"]
        self.assertAlmostEqual(
            mb["ratio"], known["bench_fast.log"]["microbatch_median"] /
            known["bench_ctl.log"]["microbatch_median"], delta=1e-7)
        self.assertEqual(mb["verdict"], "faster")

    def test_table_has_the_seed_form(self):
        code, out, err = run([log("bench_ctl.log"), log("bench_fast.log")])
        self.assertEqual(code, 0, err)
        known = expected()
        a, b = known["bench_ctl.log"]["step_mean"], known["bench_fast.log"]["step_mean"]
        ma = known["bench_ctl.log"]["microbatch_median"]
        mb = known["bench_fast.log"]["microbatch_median"]
        sentence = (
            f"ab-fast against ab-ctl: {a:.3f} -> {b:.3f} s per optimizer step, mean of steps 2-5 "
            f"({(b / a - 1) * 100:+.2f}%, faster), and {ma:.3f} -> {mb:.3f} s per regular "
            f"micro-batch ({(mb / ma - 1) * 100:+.2f}%, faster)")
        self.assertIn(sentence, out)
        self.assertRegex(out,
                         r"ab-ctl \(control\)\s+bench\s+2-5\s+" + re.escape(f"{a:.3f}") + " ± ")
        self.assertIn("s/step: mean over every step but the first (which compiles)", out)

    def test_same_values_no_change(self):
        code, doc, _ = report(log("bench_ctl.log"), log("bench_same.log"))
        self.assertEqual(code, 0)
        (c, ) = doc["comparisons"]
        self.assertAlmostEqual(c["ratio"], 1.0, delta=1e-9)
        self.assertLessEqual(c["ci_low"], 1.0)
        self.assertGreaterEqual(c["ci_high"], 1.0)
        self.assertEqual(c["verdict"], "no_change")

    def test_noise_floor_from_a_control_pair(self):
        args = [log("bench_ctl.log"), log("bench_tiny.log"), log("bench_fast.log")]
        code, doc, _ = report(*args)
        self.assertEqual([c["verdict"] for c in doc["comparisons"]], ["faster", "faster"])
        code, doc, _ = report(*args, "--control-pair", log("bench_ctl.log"), log("bench_ctl2.log"))
        self.assertEqual(code, 0)
        known = expected()
        floor = abs(known["bench_ctl2.log"]["step_mean"] / known["bench_ctl.log"]["step_mean"] - 1)
        self.assertAlmostEqual(doc["noise_floor"]["step_rel"], floor, delta=1e-8)
        self.assertEqual((doc["noise_floor"]["control_a"], doc["noise_floor"]["control_b"]),
                         ("ab-ctl", "ab-ctl2"))
        tiny, fast = doc["comparisons"]
        self.assertEqual(tiny["verdict"], "noise")
        self.assertAlmostEqual(tiny["noise_floor"], floor, delta=1e-8)
        self.assertEqual(fast["verdict"], "faster")
        code, out, _ = run(args + ["--control-pair", log("bench_ctl.log"), log("bench_ctl2.log")])
        self.assertIn(f"A/A noise floor (ab-ctl vs ab-ctl2): {floor * 100:.3f}% per step", out)
        self.assertRegex(out, r"ab-tiny\s.*noise")

    def test_fail_if_slower(self):
        args = [log("bench_ctl.log"), log("bench_slow.log")]
        code, doc, err = report(*args, "--fail-if-slower", "0.5")
        self.assertEqual(code, 1, err)
        self.assertEqual(doc["comparisons"][0]["verdict"], "slower")
        self.assertTrue(doc["fail_if_slower"]["tripped"])
        self.assertEqual(doc["exit_code"], 1)
        self.assertIn("ab-slow: s/step +0.5", err)
        code, doc, err = report(*args, "--fail-if-slower", "1")
        self.assertEqual(code, 0, err)
        self.assertFalse(doc["fail_if_slower"]["tripped"])
        # Faster runs never trip it.
        code, _, _ = run([log("bench_ctl.log"), log("bench_fast.log"), "--fail-if-slower", "0"])
        self.assertEqual(code, 0)

    def test_bootstrap_is_deterministic_for_a_seed(self):
        args = [log("bench_ctl.log"), log("bench_same.log"), "--json"]
        first = run(args + ["--seed", "7"])[1]
        self.assertEqual(first, run(args + ["--seed", "7"])[1])
        other = run(args + ["--seed", "8"])[1]
        self.assertNotEqual(
            json.loads(first)["comparisons"][0]["ci_low"],
            json.loads(other)["comparisons"][0]["ci_low"])
        self.assertEqual(json.loads(first)["options"]["seed"], 7)

    def test_stdin(self):
        with open(log("bench_fast.log"), encoding="utf-8") as f:
            text = f.read()
        code, out, err = run([log("bench_ctl.log"), "-", "--json"], stdin=text)
        self.assertEqual(code, 0, err)
        self.assertEqual(json.loads(out)["comparisons"][0]["verdict"], "faster")
        self.assertEqual(json.loads(out)["runs"][1]["source"], "<stdin>")


class DamagedLogTest(unittest.TestCase):

    def test_partial_run_reports_what_is_there(self):
        code, doc, err = report(log("bench_ctl.log"), log("bench_partial.log"))
        self.assertEqual(code, 0, err)
        run_ = doc["runs"][1]
        self.assertTrue(run_["partial"])
        self.assertIn("the driver failed: device lost", run_["partial_reason"])
        self.assertIn("3 of 5 planned steps logged", run_["partial_reason"])
        self.assertIn("no BENCH_SUMMARY", run_["partial_reason"])
        known = expected()["bench_partial.log"]
        self.assertEqual(run_["steps_used"], [2, 3])
        self.assertAlmostEqual(run_["step_s"]["mean"], known["step_mean"], delta=2e-6)
        code, out, _ = run([log("bench_ctl.log"), log("bench_partial.log")])
        self.assertIn("ab-crash (partial)", out)
        self.assertIn("ab-crash is partial: the driver failed: device lost", out)

    def test_malformed_timing_json_is_skipped_with_a_warning(self):
        code, doc, err = report(log("bench_malformed.log"))
        self.assertEqual(code, 0, err)
        line = expected()["bench_malformed.log"]["malformed_line"]
        self.assertRegex(
            err,
            re.escape(f"bench_malformed.log:{line}: TRAINER_STEP_TIMING step=3: "
                      "malformed timing JSON (") + r".*\): line skipped")
        run_ = doc["runs"][0]
        self.assertEqual(run_["timeline"]["steps"], 3)
        self.assertAlmostEqual(run_["step_s"]["mean"],
                               expected()["bench_malformed.log"]["step_mean"], delta=2e-6)
        self.assertTrue(any("malformed timing JSON" in w for w in doc["warnings"]))

    def test_a_warning_is_logged_once_and_listed_as_a_diagnostic(self):
        # The log is a run and half of the control pair: its warning is said once, everywhere.
        malformed, ctl = log("bench_malformed.log"), log("bench_ctl.log")
        code, doc, err = report(malformed, "--control-pair", malformed, ctl)
        self.assertEqual(code, 0, err)
        line = expected()["bench_malformed.log"]["malformed_line"]
        where = f"{malformed}:{line}"
        said = [text for text in err.splitlines() if where in text]
        self.assertEqual(len(said), 1, err)
        self.assertTrue(said[0].startswith(f"bench-report: warning: {where}: TRAINER_STEP_TIMING"))
        found = [d for d in doc["diagnostics"] if d["where"] == where]
        self.assertEqual(len(found), 1, doc["diagnostics"])
        self.assertEqual(found[0]["severity"], "warning")
        self.assertEqual(said[0], "bench-report: warning: " + where + ": " + found[0]["message"])
        # The old field keeps the same warnings as text until rtb.bench-report/2.
        self.assertEqual(doc["warnings"], [
            f"{d['where']}: {d['message']}" if d["where"] else d["message"]
            for d in doc["diagnostics"]
        ])
        self.assertIn(found[0], doc["runs"][0]["diagnostics"])
        self.assertEqual(run([malformed, "-q"])[2], "")

    def test_missing_step(self):
        code, doc, err = report(log("bench_missing_step.log"))
        self.assertEqual(code, 0, err)
        self.assertIn("no step time for step 3 (between steps 1 and 5)", err)
        run_ = doc["runs"][0]
        self.assertEqual(run_["steps_used"], [2, 4, 5])
        self.assertAlmostEqual(run_["step_s"]["mean"],
                               expected()["bench_missing_step.log"]["step_mean"], delta=2e-6)

    def test_no_timing_lines_is_bad_input(self):
        code, out, err = run([log("bench_ctl.log"), log("no_timing.log")])
        self.assertEqual(code, 2)
        self.assertEqual(out, "")
        self.assertRegex(err, r"^bench-report: .*no_timing\.log: no step timing lines")

    def test_bad_options_and_files(self):
        ctl = log("bench_ctl.log")
        for args, message in (
            ([], "give at least one RUN log"),
            ([ctl, "--steps", "4-2"], "--steps 4-2: the range ends before it starts"),
            ([ctl, "--steps", "x"], "--steps x: expected"),
            ([ctl, "--bootstrap", "5"], "--bootstrap 5"),
            ([ctl, "--confidence", "1.5"], "--confidence 1.5"),
            ([ctl, "--fail-if-slower", "1"], "--fail-if-slower needs a control"),
            (["/nonexistent/run.log"], "/nonexistent/run.log"),
            (["-", "-"], "stdin"),
            ([ctl, "--limit", "speed=1"], "no gate named 'speed'"),
            ([ctl, "--limit", "loss=abc"], "--limit loss=abc"),
        ):
            with self.subTest(args=args):
                code, _, err = run(args, stdin="")
                self.assertEqual(code, 2, err)
                self.assertIn(message, err)
                self.assertEqual(len(err.strip().splitlines()), 1, err)


class NumericsTest(unittest.TestCase):

    def numerics_args(self, variant):
        """--numerics of `variant`.log against the two reference logs."""
        return [
            "--numerics",
            log("numerics_ref1.log"),
            log("numerics_ref2.log"),
            log(f"{variant}.log")
        ]

    def numerics(self, variant, *extra):
        return report(*self.numerics_args(variant), *extra)

    def test_all_six_gates_pass(self):
        code, doc, err = self.numerics("numerics_variant")
        self.assertEqual(code, 0, err)
        n = doc["numerics"]
        self.assertTrue(n["pass"])
        self.assertEqual(n["steps"], [1, 2, 3, 4])
        gates = {g["name"]: g for g in n["gates"]}
        self.assertEqual(list(gates),
                         ["loss", "logprob", "entropy", "grad_norm", "is_ratio", "finite"])
        known = expected()["numerics_variant.log"]
        for name, answer in known.items():
            with self.subTest(name):
                self.assertEqual(gates[name]["status"], "pass")
                self.assertAlmostEqual(gates[name]["value"], answer["value"],
                                       delta=max(1e-12, 1e-6 * answer["value"]))
                self.assertAlmostEqual(gates[name]["references"], answer["references"],
                                       delta=max(1e-12, 1e-6 * answer["references"]))
        self.assertEqual(gates["grad_norm"]["metric"], "gradient_norm")
        self.assertEqual(gates["grad_norm"]["limit"], 2e-3)
        self.assertEqual(gates["logprob"]["metric"], "log_ratio/abs_mean")
        self.assertEqual(gates["finite"]["value"], 0)
        code, out, _ = run(self.numerics_args("numerics_variant"))
        self.assertIn("all 6 gates pass", out)

    def test_failing_gates_exit_1(self):
        code, doc, err = self.numerics("numerics_bad")
        self.assertEqual(code, 1, err)
        gates = {g["name"]: g for g in doc["numerics"]["gates"]}
        self.assertEqual(gates["grad_norm"]["status"], "fail")
        self.assertEqual(gates["logprob"]["status"], "fail")
        self.assertEqual(gates["loss"]["status"], "pass")
        known = expected()["numerics_bad.log"]
        self.assertAlmostEqual(gates["grad_norm"]["value"], known["grad_norm"]["value"], delta=1e-9)
        self.assertIn("numerics: a gate failed", err)
        code, out, _ = run(self.numerics_args("numerics_bad"))
        self.assertIn("2 of 6 gates fail: logprob, grad_norm", out)
        # Limits are configurable; a gate can be turned off.
        code, doc, _ = self.numerics("numerics_bad", "--limit", "grad_norm=1e-2", "--limit",
                                     "logprob=off")
        self.assertEqual(code, 0)
        gates = {g["name"]: g for g in doc["numerics"]["gates"]}
        self.assertEqual(gates["logprob"]["status"], "off")
        self.assertEqual(gates["grad_norm"]["limit"], 1e-2)

    def test_non_finite_metric_fails(self):
        code, doc, _ = self.numerics("numerics_nan")
        self.assertEqual(code, 1)
        gates = {g["name"]: g for g in doc["numerics"]["gates"]}
        self.assertEqual(gates["finite"]["status"], "fail")
        self.assertEqual(gates["finite"]["worst_step"], 3)
        self.assertEqual(gates["loss"]["status"], "fail")
        self.assertIn("missing or not finite at step 3", gates["loss"]["detail"])
        self.assertEqual(gates["grad_norm"]["status"], "pass")

    def test_missing_metric_fails_its_gate(self):
        code, doc, _ = self.numerics("numerics_variant", "--metric", "entropy=policy/entropy")
        self.assertEqual(code, 1)
        gates = {g["name"]: g for g in doc["numerics"]["gates"]}
        self.assertEqual(gates["entropy"]["status"], "missing")
        self.assertIn("policy/entropy", gates["entropy"]["detail"])

    def test_orchestrator_metrics(self):
        # The same metrics in two orchestrator logs (StepMetrics dicts, with nan and np.float32
        # values, and the Train step line): no difference at all.
        code, doc, err = report("--numerics", log("e2e_orchestrator.log"),
                                log("e2e_maxtext_no_ready.log"), log("e2e_orchestrator.log"))
        self.assertEqual(code, 0, err)
        gates = {g["name"]: g for g in doc["numerics"]["gates"]}
        self.assertEqual(gates["grad_norm"]["metric"], "grad_norm")
        for gate in gates.values():
            self.assertEqual(gate["status"], "pass")
            self.assertEqual(gate["value"], 0)
        self.assertEqual(doc["numerics"]["steps"], list(range(1, E2E_STEPS + 1)))

    def test_list_gates(self):
        code, out, _ = run(["--list-gates"])
        self.assertEqual(code, 0)
        self.assertIn(
            "grad_norm: 0.002 relative (metric: gradient_norm, grad_norm; limit from: seed)", out)
        self.assertIn("loss: 0.0001 relative (metric: loss; limit from: ours)", out)
        code, out, _ = run(["--list-gates", "--limit", "loss=1e-3"])
        self.assertIn("loss: 0.001 relative (metric: loss; limit from: --limit)", out)
        self.assertEqual(len(re.findall(r"^\w+: ", out, re.M)), 6)


class SvgTest(unittest.TestCase):

    def test_timeline(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "t.svg")
            code, _, err = run([
                log("bench_ctl.log"),
                log("bench_fast.log"),
                log("e2e_maxtext_no_ready.log"), "--svg", path
            ])
            self.assertEqual(code, 0, err)
            root = ET.parse(path).getroot()
            ns = {"s": "http://www.w3.org/2000/svg"}
            titles = [t.text for t in root.iter("{http://www.w3.org/2000/svg}title")]
            texts = [t.text for t in root.iter("{http://www.w3.org/2000/svg}text")]
            self.assertIn("ab-ctl", texts)
            self.assertIn("step 5", texts)  # each run's last selected step
            self.assertIn("ready times not published: device time unknown", texts)
            device = [t for t in titles if t and "on the device" in t]
            # Two bench runs x 9 micro-batches (+ their updates).
            self.assertEqual(len([t for t in device if t.startswith("micro-batch")]), 18)
            self.assertIn(f"micro-batch 3: {CTL(5, 2):.3f} s on the device", device)
            self.assertTrue(root.findall("s:rect", ns))
            code, _, _ = run([log("bench_ctl.log"), "--svg", path, "--svg-step", "2"])
            texts = [
                t.text for t in ET.parse(path).getroot().iter("{http://www.w3.org/2000/svg}text")
            ]
            self.assertIn("step 2", texts)


class TimingContractTest(unittest.TestCase):
    """Logs of the current driver contract: steps from 0, micro-batch timing modes, profiled steps,
  padded and real tokens."""

    def test_mode_and_first_step_shown_per_run(self):
        code, doc, err = report(log("bench_device_ctl.log"), log("bench_dispatch_var.log"),
                                log("bench_ctl.log"))
        self.assertEqual(code, 0, err)
        self.assertEqual([r["microbatch_timing"] for r in doc["runs"]],
                         ["device", "dispatch", "unlabelled"])
        known = expected()
        for run_, name in zip(doc["runs"], ("bench_device_ctl.log", "bench_dispatch_var.log")):
            with self.subTest(name):
                self.assertEqual(run_["steps_logged"], [0, 1, 2, 3, 4])
                self.assertEqual(run_["steps_used"], known[name]["steps_used"])
                self.assertAlmostEqual(run_["step_s"]["mean"], known[name]["step_mean"], delta=1e-9)
                self.assertAlmostEqual(run_["microbatch_s"]["median"],
                                       known[name]["microbatch_median"], delta=1e-9)
                self.assertEqual(run_["first_step"],
                                 {"step": 0, "seconds": known[name]["first_step_s"]})
                self.assertEqual(run_["summary"]["stage_boundary"]["resolved"], "on")
        self.assertEqual(doc["runs"][2]["first_step"]["step"], 1)  # older logs count from 1
        code, out, _ = run(
            [log("bench_device_ctl.log"),
             log("bench_dispatch_var.log"),
             log("bench_ctl.log")])
        self.assertRegex(
            out, r"ab2-ctl \(control\)\s+bench\s+1-4\s.*\s+28\s+device\s.*"
            r"131\.204 \(step 0\)")
        self.assertRegex(out, r"ab2-var\s+bench\s+1-4\s.*\s+dispatch\s")
        self.assertRegex(out, r"ab-ctl\s+bench\s+2-5\s.*\s+unlabelled\s")
        self.assertIn("first step s: the first logged step, which includes the compile", out)

    def test_microbatch_times_of_different_modes_are_not_compared(self):
        args = [log("bench_device_ctl.log"), log("bench_dispatch_var.log")]
        code, doc, err = report(*args)
        self.assertEqual(code, 0, err)
        (c, ) = doc["comparisons"]
        reason = ("not compared: ab2-ctl times micro-batches at device completion, ab2-var by "
                  "dispatch intervals")
        self.assertIsNone(c["microbatch"])
        self.assertEqual(c["microbatch_not_compared"], reason)
        known = expected()
        ratio = (known["bench_dispatch_var.log"]["step_mean"] /
                 known["bench_device_ctl.log"]["step_mean"])
        self.assertAlmostEqual(c["ratio"], ratio, delta=1e-9)  # step times still compare
        self.assertEqual(c["verdict"], "slower")
        code, out, _ = run(args)
        self.assertEqual(code, 0)
        self.assertIn(
            "ab2-var against ab2-ctl: 82.671 -> 89.770 s per optimizer step, mean of steps "
            f"1-4 (+8.59%, slower), and micro-batch times {reason}\n", out)
        self.assertRegex(out, r"ab2-var .*slower\s+not compared \(timing modes differ\)")
        # Old (unlabelled) logs against new ones: not compared either.
        code, doc, _ = report(log("bench_ctl.log"), log("bench_device_ctl.log"))
        self.assertIsNone(doc["comparisons"][0]["microbatch"])
        self.assertIn("ab-ctl times micro-batches without a label (older driver)",
                      doc["comparisons"][0]["microbatch_not_compared"])
        # Same mode: compared as before.
        code, doc, _ = report(log("bench_device_ctl.log"), log("bench_profiled.log"))
        self.assertIsNone(doc["comparisons"][0]["microbatch_not_compared"])
        self.assertEqual(doc["comparisons"][0]["microbatch"]["verdict"], "no_change")

    def test_fail_if_slower_considers_only_compared_times(self):
        args = [log("bench_device_ctl.log"), log("bench_dispatch_var.log"), "--fail-if-slower"]
        code, doc, err = report(*args, "1")
        self.assertEqual(code, 1, err)
        self.assertEqual(doc["fail_if_slower"]["messages"],
                         ["ab2-var: s/step +8.59% slower than ab2-ctl (--fail-if-slower 1)"])
        code, doc, err = report(*args, "10")  # the +7% micro-batch figure is not a comparison
        self.assertEqual(code, 0, err)
        self.assertFalse(doc["fail_if_slower"]["tripped"])

    def test_profiled_steps_are_left_out_unless_included(self):
        known = expected()["bench_profiled.log"]
        code, doc, err = report(log("bench_profiled.log"))
        self.assertEqual(code, 0, err)
        run_ = doc["runs"][0]
        self.assertEqual(run_["steps_used"], [1, 3, 4])
        self.assertEqual(run_["profiled_steps_left_out"], [2])
        self.assertAlmostEqual(run_["step_s"]["mean"], known["step_mean"], delta=1e-9)
        self.assertAlmostEqual(run_["microbatch_s"]["median"], known["microbatch_median"],
                               delta=1e-9)
        self.assertEqual(run_["microbatch_s"]["n"], known["microbatch_n"])
        self.assertFalse(doc["options"]["include_profiled"])
        code, out, _ = run([log("bench_profiled.log")])
        self.assertIn(
            "ab2-prof: profiled step 2 left out of the figures (--include-profiled keeps "
            "them)\n", out)
        code, doc, err = report(log("bench_profiled.log"), "--include-profiled")
        self.assertEqual(code, 0, err)
        run_ = doc["runs"][0]
        self.assertEqual(run_["steps_used"], [1, 2, 3, 4])
        self.assertEqual(run_["profiled_steps_left_out"], [])
        self.assertAlmostEqual(run_["step_s"]["mean"], known["with_profiled"]["step_mean"],
                               delta=1e-9)
        self.assertEqual(run_["microbatch_s"]["n"], known["with_profiled"]["microbatch_n"])
        self.assertTrue(doc["options"]["include_profiled"])
        # Only profiled steps selected: a warning and no figure, not a silent fallback.
        code, doc, err = report(log("bench_profiled.log"), "--steps", "2")
        self.assertEqual(code, 0, err)
        self.assertIsNone(doc["runs"][0]["step_s"]["mean"])
        self.assertIn(
            "every selected step is profiled (step 2): no figures for this run; "
            "--include-profiled uses them", err)

    def test_tokens_per_second_per_chip_definitions(self):
        known = expected()
        code, doc, err = report(log("bench_device_ctl.log"), log("bench_dispatch_var.log"),
                                log("bench_profiled.log"))
        self.assertEqual(code, 0, err)
        for run_, name in zip(doc["runs"], CURRENT_RUNS):
            with self.subTest(name):
                self.assertAlmostEqual(run_["tokens_per_s_per_chip"],
                                       known[name]["tokens_per_s_per_chip"], delta=1e-6)
                self.assertAlmostEqual(run_["real_tokens_per_s_per_chip"],
                                       known[name]["real_tokens_per_s_per_chip"], delta=1e-6)
                self.assertIsNone(run_["tokens_per_s_per_chip_unknown"])
        # The seed's figures: 82.671 s/step -> 3,567 and 89.77 -> 3,285 tokens/s/chip.
        self.assertEqual([round(r["tokens_per_s_per_chip"]) for r in doc["runs"][:2]], [3567, 3285])
        code, out, _ = run([log("bench_device_ctl.log"), log("bench_dispatch_var.log")])
        self.assertIn(
            "tok/s/chip: rows x tokens_per_row x micro-batches (padding included, the seed's "
            "figure) / s/step / chips; real: the steps' real tokens / s/step / chips", out)
        self.assertRegex(out, r"ab2-ctl \(control\).*device\s+3,567\s+3,317\s")
        self.assertRegex(out, r"ab2-var.*dispatch\s+3,285\s+3,055\s")
        # An older summary without rows and tokens_per_row: the padded figure is unknown, once.
        with open(log("bench_fast.log"), encoding="utf-8") as f:
            text = re.sub(r'"rows":\d+,"tokens_per_row":\d+,', "", f.read())
        code, out, err = run(["-", "--json"], stdin=text)
        self.assertEqual(code, 0, err)
        run_ = json.loads(out)["runs"][0]
        self.assertIsNone(run_["tokens_per_s_per_chip"])
        self.assertIn("no rows and tokens_per_row", run_["tokens_per_s_per_chip_unknown"])
        self.assertAlmostEqual(run_["real_tokens_per_s_per_chip"],
                               known["bench_fast.log"]["real_tokens_per_s_per_chip"], delta=1e-3)
        code, out, _ = run(["-"], stdin=text)
        self.assertEqual(
            out.count("tok/s/chip unknown for ab-fast: its BENCH_SUMMARY has no rows and "
                      "tokens_per_row (an older driver)"), 1)

    def test_svg_step_zero(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "t.svg")
            code, _, err = run([
                log("bench_ctl.log"),
                log("bench_device_ctl.log"), "--svg", path, "--svg-step", "0"
            ])
            self.assertEqual(code, 0, err)
            texts = [
                t.text for t in ET.parse(path).getroot().iter("{http://www.w3.org/2000/svg}text")
            ]
            self.assertIn("no TRAINER_STEP_TIMING for step 0", texts)
            code, _, err = run([log("bench_ctl.log"), "--svg", path, "--svg-step=-1"])
            self.assertEqual(code, 2)
            self.assertIn("--svg-step -1: must be a step number >= 0", err)


class MaxTextTest(unittest.TestCase):
    """Real MaxText logs (testdata/maxtext_steplogs/): rates, outliers and the A/B (issue 16)."""

    BEFORE = os.path.join(TESTDATA, "maxtext_steplogs", "maxtext_gemma4_before_full.log")
    AFTER = os.path.join(TESTDATA, "maxtext_steplogs", "maxtext_gemma4_after_full.log")
    PEFT = os.path.join(TESTDATA, "maxtext_steplogs", "tunix_peft_written.log")

    def steps(self, path):
        pattern = re.compile(r"completed step: (\d+), seconds: ([\d.]+), TFLOP/s/device: ([\d.]+), "
                             r"Tokens/s/device: ([\d.]+)")
        with open(path, encoding="utf-8") as f:
            return {
                int(m[1]): (float(m[2]), float(m[3]), float(m[4]))
                for m in pattern.finditer(f.read())
            }

    def test_rates_are_total_work_over_total_time(self):
        code, doc, err = report(self.BEFORE)
        self.assertEqual(code, 0, err)
        (run_, ) = doc["runs"]
        self.assertEqual(run_["format"], "maxtext")
        steps = self.steps(self.BEFORE)
        # Every step but the first (the compile) and the outliers (left out by default).
        outliers = [o["step"] for o in run_["outliers"]["steps"]]
        self.assertEqual(outliers, [1, 3, 8])
        for include, used in ((False, [s for s in steps if s != 0 and s not in outliers]),
                              (True, [s for s in steps if s != 0])):
            if include:
                code, doc, err = report(self.BEFORE, "--include-outliers")
                self.assertEqual(code, 0, err)
                (run_, ) = doc["runs"]
            self.assertEqual(run_["steps_used"], used)
            time = sum(steps[s][0] for s in used)
            self.assertAlmostEqual(run_["step_s"]["mean"], time / len(used), delta=1e-9)
            self.assertAlmostEqual(run_["tflops_per_device"],
                                   sum(steps[s][1] * steps[s][0] for s in used) / time, delta=1e-6)
            self.assertAlmostEqual(run_["tokens_per_s_per_device"],
                                   sum(steps[s][2] * steps[s][0] for s in used) / time, delta=1e-3)
        _, out, _ = run([self.BEFORE])
        self.assertIn(
            "TFLOP/s/device 455.6, tokens/s/device 29,531 (MaxText's per-step rates x "
            "seconds, summed, / seconds summed", out)
        self.assertIn("host's interval between step completions", out)
        _, out, _ = run([self.BEFORE, "--include-outliers"])
        self.assertIn("TFLOP/s/device 47.0, tokens/s/device 3,048", out)

    def test_outliers_left_out_by_default_give_the_real_slowdown(self):
        # Issue 28, item 5: kept, the checkpoint/profiler steps (116 s and 21 s beside a 0.78 s
        # median) swamped the A/B into "no change"; by default they are named and left out.
        code, doc, err = report(self.BEFORE, self.AFTER)
        self.assertEqual(code, 0, err)
        self.assertTrue(doc["options"]["exclude_outliers"])
        before = doc["runs"][0]["outliers"]
        outliers = [(o["step"], o["seconds"]) for o in before["steps"]]
        self.assertEqual(outliers, [(1, 123.805), (3, 3.317), (8, 14.265)])
        self.assertEqual(before["rule"], "seconds above 3x the median of the selected steps")
        self.assertAlmostEqual(before["median_s"], 0.590)
        self.assertTrue(before["left_out"])
        after = doc["runs"][1]["outliers"]
        outliers = [(o["step"], o["seconds"]) for o in after["steps"]]
        self.assertEqual(outliers, [(1, 115.972), (8, 21.042)])
        self.assertAlmostEqual(after["median_s"], 0.783)
        self.assertEqual(doc["runs"][0]["steps_used"], [2, 4, 5, 6, 7] + list(range(9, 30)))
        (left_out, ) = doc["comparisons"]
        self.assertEqual(left_out["verdict"], "slower")
        self.assertAlmostEqual(left_out["ratio"], 1.3188, delta=5e-4)
        self.assertGreater(left_out["ci_low"], 1.0)

        code, out, err = run([self.BEFORE, self.AFTER])
        self.assertEqual(code, 0, err)
        self.assertIn(
            "maxtext_gemma4_before_full: outlier steps 1 (123.805 s), 3 (3.317 s), "
            "8 (14.265 s) above 3x the median step (0.59 s) of the selected steps", out)
        self.assertIn("left out of the figures (--include-outliers keeps them)", out)
        self.assertIn("(+31.88%, slower)", out)
        self.assertNotIn("(outliers ", out)
        # --exclude-outliers is the default's name: the same report.
        self.assertEqual(run([self.BEFORE, self.AFTER, "--exclude-outliers"]), (0, out, err))

        # --include-outliers keeps them: marked in the steps cell, and the A/B is swamped.
        code, doc, err = report(self.BEFORE, self.AFTER, "--include-outliers")
        self.assertEqual(code, 0, err)
        self.assertFalse(doc["options"]["exclude_outliers"])
        self.assertFalse(doc["runs"][0]["outliers"]["left_out"])
        self.assertEqual(doc["runs"][0]["steps_used"], list(range(1, 30)))
        (kept, ) = doc["comparisons"]
        self.assertEqual(kept["verdict"], "no_change")
        self.assertAlmostEqual(kept["ratio"], 1.0061, delta=5e-4)
        _, out, _ = run([self.BEFORE, self.AFTER, "--include-outliers"])
        self.assertIn("1-29 (outliers 1,3,8)", out)
        self.assertIn("in the figures (--include-outliers)", out)
        self.assertIn("(+0.61%, no change)", out)

        code, out, err = run([self.BEFORE, "--include-outliers", "--exclude-outliers"])
        self.assertEqual(code, 2)
        self.assertEqual(out, "")
        self.assertEqual(len(err.strip().splitlines()), 1, err)
        self.assertIn("--include-outliers", err)

    def test_outlier_factor_option(self):
        code, doc, err = report(self.BEFORE, "--outlier-factor", "10")
        self.assertEqual(code, 0, err)
        self.assertEqual([o["step"] for o in doc["runs"][0]["outliers"]["steps"]], [1, 8])
        self.assertEqual(doc["options"]["outlier_factor"], 10)
        for bad in ("1", "0.5", "nan"):
            code, _, err = run([self.BEFORE, "--outlier-factor", bad])
            self.assertEqual(code, 2, bad)
            self.assertIn(f"--outlier-factor {bad}", err)

    def test_tunix_peft_log_without_timestamps_has_no_step_times(self):
        code, out, err = run([self.PEFT])
        self.assertEqual(code, 2)
        self.assertEqual(out, "")
        self.assertRegex(
            err, r"^bench-report: .*tunix_peft_written\.log: a Tunix PEFT log: losses of "
            r"4 steps but no step times \(its `Train step N training loss:` lines carry no "
            r"duration and no log timestamp\).* --numerics REF1 REF2 VARIANT\n$")


class LogTimestampTest(unittest.TestCase):
    """Tunix trainer logs timed by their lines' timestamps (issue 28, item 3), on a real one."""

    PEFT = os.path.join(TESTDATA, "maxtext_steplogs", "tunix_peft_dpo_qwen3-0.6b_tpu-v5p-8.log")
    # The notebook's whole output: the same run, with MaxText's `completed step` lines.
    FULL = os.path.join(TESTDATA, "configlog_maxtext_dpo_qwen3-0.6b_tpu-v5p-8_train.log")
    NAME = "tunix_peft_dpo_qwen3-0.6b_tpu-v5p-8"

    def first_appearances(self):
        """Each training step's first timestamp in the real log, in seconds of the day."""
        pattern = re.compile(r"^I0706 (\d\d):(\d\d):(\d\d\.\d+) .*\] Train step (\d+) "
                             r"training loss: ")
        found: dict[int, float] = {}
        with open(self.PEFT, encoding="utf-8") as f:
            for line in f:
                m = pattern.match(line)
                if m:
                    found.setdefault(int(m[4]), int(m[1]) * 3600 + int(m[2]) * 60 + float(m[3]))
        return found

    def test_real_tunix_log_is_timed_by_its_timestamps(self):
        code, doc, err = report(self.PEFT)
        self.assertEqual(code, 0, err)
        self.assertEqual(err, "")
        (run_, ) = doc["runs"]
        self.assertEqual(run_["format"], "tunix-peft")
        self.assertEqual(run_["step_timing"], "log-timestamps")
        stamps = run_["log_timestamps"]
        self.assertEqual(stamps["clock"], "glog")
        self.assertEqual(stamps["resolution_s"], 1e-6)
        self.assertEqual((stamps["first_step"], stamps["spread_steps"], stamps["repeated_lines"]),
                         (1, [], 0))
        at = self.first_appearances()
        self.assertEqual(sorted(at), list(range(1, 501)))
        self.assertEqual(run_["steps_logged"], list(range(1, 501)))
        # Every step but the first (no interval) and the evaluation step 500 (an outlier).
        self.assertEqual([(o["step"], round(o["seconds"], 6)) for o in run_["outliers"]["steps"]],
                         [(500, 15.680425)])
        self.assertEqual(run_["steps_used"], list(range(2, 500)))
        intervals = [at[s] - at[s - 1] for s in range(2, 500)]
        for got, want in zip(run_["step_s"]["values"], intervals):
            self.assertAlmostEqual(got, want, delta=1e-9)
        self.assertAlmostEqual(run_["step_s"]["mean"], sum(intervals) / len(intervals), delta=1e-9)
        self.assertIsNone(run_["first_step"])

        code, out, err = run([self.PEFT])
        self.assertEqual(code, 0, err)
        self.assertTrue(
            out.startswith("s/step: log-timestamp intervals, from one step's first log line to the "
                           "next step's (host side: everything between steps, not a device time); "
                           "mean over every step but the first"), out)
        self.assertRegex(out, self.NAME + r" +tunix-peft +2-499 +0\.2504 ± 0\.0144 ")
        self.assertIn(
            self.NAME + ": s/step from glog timestamps (to the microsecond): step 1, the first "
            "logged, has no interval", out)
        self.assertIn(self.NAME + ": outlier step 500 (15.680 s) above 3x the median step", out)

    def test_the_same_runs_maxtext_lines_agree_step_by_step(self):
        code, doc, err = report(self.FULL, self.PEFT, "--include-outliers")
        self.assertEqual(code, 0, err)
        maxtext, peft = doc["runs"]
        self.assertEqual((maxtext["format"], maxtext["step_timing"]), ("maxtext", "maxtext"))
        self.assertEqual(maxtext["steps_used"], peft["steps_used"])
        self.assertEqual(maxtext["steps_used"], list(range(2, 501)))
        worst = max(
            abs(a - b) for a, b in zip(maxtext["step_s"]["values"], peft["step_s"]["values"]))
        self.assertLess(worst, 0.011)
        # Yet they are not compared: host time between log lines is not MaxText's measure.
        (comparison, ) = doc["comparisons"]
        self.assertEqual(comparison["verdict"], "not_compared")
        self.assertIsNone(comparison["ratio"])
        self.assertEqual(
            comparison["step_not_compared"],
            "not compared: configlog_maxtext_dpo_qwen3-0.6b_tpu-v5p-8_train times steps by "
            "MaxText's host intervals between step completions, " + self.NAME +
            " by log-timestamp intervals (host side)")

    def test_never_compared_with_the_drivers_device_timed_steps(self):
        code, doc, err = report(log("bench_device_ctl.log"), self.PEFT, "--fail-if-slower", "0")
        self.assertEqual(code, 0, err)
        self.assertEqual(doc["runs"][0]["step_timing"], "device")
        (comparison, ) = doc["comparisons"]
        self.assertEqual(comparison["verdict"], "not_compared")
        self.assertEqual(
            comparison["step_not_compared"],
            "not compared: ab2-ctl times steps on the device (BENCH_STEP seconds), " + self.NAME +
            " by log-timestamp intervals (host side)")
        self.assertFalse(doc["fail_if_slower"]["tripped"])
        code, out, err = run([log("bench_device_ctl.log"), self.PEFT])
        self.assertEqual(code, 0, err)
        self.assertIn(
            "s/step of " + self.NAME + ": log-timestamp intervals, from one step's first log "
            "line to the next step's (host side: everything between steps, not a device time); "
            "compared only with other log-timestamp runs\n", out)
        self.assertRegex(out, self.NAME + r" +not compared \(step timings differ\) +- +- +-")
        self.assertIn(
            self.NAME + " against ab2-ctl: step times not compared: ab2-ctl times steps on the "
            "device (BENCH_STEP seconds), " + self.NAME + " by log-timestamp intervals (host "
            "side)\n", out)
        code, _, err = run([self.PEFT, "--control-pair", log("bench_device_ctl.log"), self.PEFT])
        self.assertEqual(code, 0, err)
        self.assertIn(
            "--control-pair: no step noise floor: not compared: ab2-ctl times steps on "
            "the device", err)

    def test_python_logging_timestamps_repeats_and_gaps(self):
        # Python logging's `%(asctime)s` to the second, each record also printed by a second
        # logger without a timestamp, and steps 4-5 not logged.
        lines = []
        for step, second in ((1, 10), (2, 12), (3, 14), (6, 20), (7, 22)):
            for prefix in (f"2026-03-03 08:41:{second:02d} - INFO - [absl] ", "INFO:absl:"):
                lines.append(f"{prefix}Train step {step} training loss: 0.5  - training "
                             "perplexity: 1.6\n")
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "grpo.log")
            with open(path, "w", encoding="utf-8") as f:
                f.writelines(lines)
            code, doc, err = report(path)
            self.assertEqual(code, 0, err)
            (run_, ) = doc["runs"]
            self.assertEqual(run_["steps_used"], [2, 3, 4, 5, 6, 7])
            self.assertEqual(run_["step_s"]["values"], [2.0, 2.0, 2.0, 2.0, 2.0, 2.0])
            stamps = run_["log_timestamps"]
            self.assertEqual((stamps["clock"], stamps["resolution_s"]), ("date", 1.0))
            self.assertEqual((stamps["spread_steps"], stamps["repeated_lines"]), ([4, 5], 5))
            self.assertIn(
                "grpo.log: no timestamped `Train step N training loss` line for steps 4-5: each "
                "gap's interval is spread evenly over the steps it spans", err)
            _, out, _ = run([path])
            self.assertIn(
                "grpo: s/step from dated timestamps (to the second): step 1, the first logged, "
                "has no interval (what its line follows, the compile included, is not timed); 5 "
                "repeated lines (other processes or loggers) counted once; steps 4-5 have no "
                "timestamped line: an even share of their gap's interval each\n", out)


class TokenDroppingTest(unittest.TestCase):
    """BENCH_STEP dropped_tokens and BENCH_SUMMARY token_dropping (issue 18)."""

    def test_each_run_says_whether_it_dropped_tokens(self):
        code, doc, err = report(log("bench_drops_none.log"), log("bench_drops_counted.log"),
                                log("bench_drops_unknown.log"), log("bench_ctl.log"))
        self.assertEqual(code, 0, err)
        verdicts = [(r["name"], r["token_dropping"]["verdict"]) for r in doc["runs"]]
        self.assertEqual(verdicts, [("ab-dropless", "none"), ("ab-drops", "dropped"),
                                    ("ab-maydrop", "unknown"), ("ab-ctl", "not-logged")])
        counted = doc["runs"][1]["token_dropping"]
        self.assertEqual(counted["dropped_tokens"], sum(100.0 * s for s in range(1, STEPS + 1)))
        self.assertEqual(counted["counted_steps"], STEPS)
        self.assertEqual(counted["source"], "BENCH_SUMMARY")
        self.assertIn("ab-drops against ab-dropless: ab-drops dropped 1,500 tokens", err)
        self.assertIn(
            "ab-maydrop against ab-dropless: ab-maydrop cannot show it dropped no tokens: "
            "the trainer counts no dropped tokens and capacity_factor 1.25", err)
        self.assertIn(
            "ab-ctl against ab-dropless: ab-ctl cannot show it dropped no tokens: the log "
            "does not say", err)
        _, out, _ = run([
            log("bench_drops_none.log"),
            log("bench_drops_counted.log"),
            log("bench_drops_unknown.log")
        ])
        self.assertIn(
            "  ab-dropless: none: dropless by configuration: capacity_factor -1, "
            "ragged_buffer_factor -1", out)
        self.assertIn("  ab-drops: 1,500 dropped: counted by the trainer (dropped_tokens)", out)
        self.assertIn("  ab-maydrop: unknown: the trainer counts no dropped tokens", out)

    def test_no_warning_when_no_log_speaks_of_dropping(self):
        code, _, err = run([log("bench_ctl.log"), log("bench_fast.log")])
        self.assertEqual(code, 0, err)
        self.assertNotIn("dropped", err)

    def test_require_no_drops(self):
        code, doc, err = report(log("bench_drops_none.log"), "--require-no-drops")
        self.assertEqual(code, 0, err)
        self.assertEqual(doc["require_no_drops"], {"tripped": False, "messages": []})
        code, doc, err = report(log("bench_drops_none.log"), log("bench_drops_counted.log"),
                                log("bench_drops_unknown.log"), log("bench_ctl.log"),
                                "--require-no-drops")
        self.assertEqual(code, 1)
        self.assertEqual(doc["exit_code"], 1)
        messages = doc["require_no_drops"]["messages"]
        self.assertEqual(len(messages), 3)
        self.assertTrue(messages[0].startswith("ab-drops dropped 1,500 tokens"))
        self.assertTrue(messages[1].startswith("ab-maydrop cannot show it dropped no tokens"))
        self.assertTrue(messages[2].startswith("ab-ctl cannot show it dropped no tokens"))
        self.assertIn("bench-report: error: ab-drops dropped 1,500 tokens", err)
        code, out, _ = run(
            [log("bench_drops_none.log"),
             log("bench_drops_unknown.log"), "--require-no-drops"])
        self.assertEqual(code, 1)
        self.assertIn("FAIL: ab-maydrop cannot show it dropped no tokens", out)


class SetupTest(unittest.TestCase):
    """Issue 25: each arm's set-up, named beside every verdict (hand-written contract logs)."""

    UNSTAGED, STAGED = log("bench_setup_unstaged.log"), log("bench_setup_staged.log")
    REPLAYED, CHECKPOINT = log("bench_setup_replayed.log"), log("bench_setup_checkpoint.log")

    @staticmethod
    def variant(tmp, name, source, old, new):
        """A copy of log `source` in `tmp` with `old` replaced by `new`; its path."""
        path = os.path.join(tmp, name)
        with open(source, encoding="utf-8") as f:
            text = f.read()
        assert old in text, old
        with open(path, "w", encoding="utf-8") as f:
            f.write(text.replace(old, new))
        return path

    def test_staging_ab_is_named_beside_the_verdict(self):
        code, out, err = run([self.UNSTAGED, self.STAGED])
        self.assertEqual(code, 0, err)
        self.assertIn("set-up (a verdict names any difference from the control's):", out)
        self.assertRegex(
            out, r"ab3-unstaged +off +none in 4 steps +random +fused +off "
            r"\(chunk 1024, micro-batch 1\) +device +64 x 65536 x 9 +90\.698 +82\.872 "
            r"+0\.002")
        self.assertRegex(out, r"ab3-staged +on \(4 steps staged\)")
        self.assertIn("boundary-free s/step (estimate)", out)
        self.assertIn("ab3-staged against ab3-unstaged: 90.698 -> 83.077 s per optimizer step", out)
        self.assertIn("; set-up differs: staging off vs on (4 steps staged)\n", out)
        self.assertIn(
            "bench-report: warning: ab3-staged against ab3-unstaged: set-up differs: "
            "staging off vs on (4 steps staged)", err)
        code, doc, _ = report(self.UNSTAGED, self.STAGED)
        setup = doc["runs"][1]["setup"]
        self.assertEqual(setup["staging"], "on (4 steps staged)")
        self.assertAlmostEqual(setup["boundary_free_step_s_estimate"], 82.872, delta=1e-9)
        self.assertAlmostEqual(setup["train_step_s"], 83.077, delta=1e-9)
        self.assertEqual(setup["fence_s"], 0.0021)
        self.assertEqual(doc["runs"][1]["summary"]["stage_boundary"]["staged_step_count"], 4)
        self.assertEqual(doc["comparisons"][0]["setup"]["differs"],
                         ["staging off vs on (4 steps staged)"])
        self.assertFalse(doc["comparisons"][0]["setup"]["same"])

    def test_require_same_setup(self):
        code, out, err = run([self.UNSTAGED, self.STAGED, "--require-same-setup"])
        self.assertEqual(code, 1)
        self.assertIn("FAIL: ab3-staged against ab3-unstaged: set-up differs: staging off vs on",
                      out)
        code, out, err = run([self.UNSTAGED, self.UNSTAGED, "--require-same-setup"])
        self.assertEqual(code, 0, err)
        self.assertIn("; set-up same\n", out)
        # No pair to compare, or an arm that logs no set-up: cannot be evaluated.
        code, out, err = run([self.UNSTAGED, "--require-same-setup"])
        self.assertEqual(code, 2)
        self.assertEqual(len(err.strip().splitlines()), 1, err)
        self.assertIn("--require-same-setup needs two runs or --control-pair", err)
        code, _, err = run(
            [self.UNSTAGED, "--control-pair", self.UNSTAGED, self.STAGED, "--require-same-setup"])
        self.assertEqual(code, 1, err)
        code, _, err = run([log("bench_device_ctl.log"), self.UNSTAGED, "--require-same-setup"])
        self.assertEqual(code, 2)
        self.assertIn("set-up unknown: replays (ab2-ctl does not log it)", err)

    def test_replays_are_shown_and_named(self):
        code, out, err = run([self.UNSTAGED, self.REPLAYED, "--require-no-drops"])
        self.assertEqual(code, 0, err)  # replayed, none dropped: --require-no-drops passes
        self.assertIn(
            "ab3-replayed: none dropped, 4 replayed in the 4 steps used (each a whole extra "
            "forward/backward)", out)
        self.assertIn("set-up differs: replays none in 4 steps vs 4 in 4 steps", out)
        self.assertIn("no token dropped, but 4 micro-batches were replayed", err)
        code, doc, _ = report(self.UNSTAGED, self.REPLAYED)
        dropping = doc["runs"][1]["token_dropping"]
        self.assertEqual(dropping["verdict"], "replayed")
        self.assertEqual(dropping["replays"], 4)
        self.assertTrue(dropping["shows_no_drops"])
        self.assertEqual(doc["runs"][1]["setup"]["replays"], "4 in 4 steps")
        self.assertEqual(doc["runs"][1]["setup"]["replays_total"], 4)

    def test_help_names_every_line_read(self):
        # Among them MaxText's own step line, which an older --help left out.
        assert_help_and_version(self, "bench-report", "completed step: N, seconds: S",
                                "TRAINER_STEP_TIMING", "BENCH_SUMMARY", "[StepMetrics step=N]",
                                "Train step N training loss:", "--include-outliers")

    def test_numerics_refused_across_weights_and_grad_norm_not_evaluated(self):
        code, out, err = run(["--numerics", self.UNSTAGED, self.STAGED, self.CHECKPOINT])
        self.assertEqual(code, 2)
        self.assertEqual(len(err.strip().splitlines()), 1, err)
        self.assertIn(
            "ab3-unstaged ran with random weights and ab3-checkpoint with checkpoint "
            "gs://bench/ckpt/", err)
        code, out, err = run(["--numerics", self.UNSTAGED, self.STAGED, self.REPLAYED])
        self.assertEqual(code, 0, err)
        # The report is the numerics alone: it starts with its heading, not a blank line.
        self.assertTrue(out.startswith("numerics: ab3-replayed against the references "), out)
        self.assertIn("all 5 gates pass (1 not evaluated: grad_norm)", out)
        self.assertRegex(out, r"grad_norm +- +relative +- +- +2\.0e-3 +seed +- +not-evaluated")
        self.assertIn("the trainer's metrics held no gradient_norm in any step", out)
        code, doc, _ = report("--numerics", self.UNSTAGED, self.STAGED, self.REPLAYED)
        gates = {g["name"]: g for g in doc["numerics"]["gates"]}
        self.assertEqual(gates["grad_norm"]["status"], "not-evaluated")
        self.assertEqual(gates["grad_norm"]["limit_from"], "seed")
        self.assertEqual(gates["loss"]["limit_from"], "ours")

    def test_grad_norm_not_evaluated_only_on_the_runs_word(self):
        # A typo'd --metric names a key no run logs: a failure, as before issue 25.
        code, doc, err = report("--numerics", self.UNSTAGED, self.STAGED, self.REPLAYED, "--metric",
                                "grad_norm=grad_nrom")
        self.assertEqual(code, 1, err)
        gates = {g["name"]: g for g in doc["numerics"]["gates"]}
        self.assertEqual(gates["grad_norm"]["status"], "missing")
        self.assertIn("grad_nrom", gates["grad_norm"]["detail"])
        # An old log: no BENCH_SUMMARY grad_norm says the metric is legitimately absent.
        with open(self.STAGED, encoding="utf-8") as f:
            grad_norm = re.search(r',"grad_norm":\{[^}]*\}', f.read())
        assert grad_norm is not None
        with tempfile.TemporaryDirectory() as tmp:
            old = self.variant(tmp, "old.log", self.STAGED, grad_norm.group(0), "")
            code, doc, err = report("--numerics", self.UNSTAGED, old, self.REPLAYED)
            self.assertEqual(code, 1, err)
            gates = {g["name"]: g for g in doc["numerics"]["gates"]}
            self.assertEqual(gates["grad_norm"]["status"], "missing")

    def test_wrong_type_is_one_line_exit_2(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = self.variant(tmp, "bad.log", self.STAGED, '"source":"random"', '"source":7')
            code, out, err = run([self.UNSTAGED, path])
            self.assertEqual(code, 2)
            self.assertEqual(len(err.strip().splitlines()), 1, err)
            self.assertRegex(err, r"bad\.log:\d+: BENCH_SUMMARY: \"source\" is not a string")

    def test_malformed_choice_is_one_line_exit_2(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = self.variant(tmp, "bad.log", self.STAGED, '"choices":{"logps_pass":{',
                                '"choices":{"pad_align":7,"logps_pass":{')
            code, _, err = run([self.UNSTAGED, path])
            self.assertEqual(code, 2)
            self.assertEqual(len(err.strip().splitlines()), 1, err)
            self.assertRegex(
                err, r'bad\.log:\d+: BENCH_SUMMARY: "choices" entry "pad_align" is not a '
                r'\{value, source\} object')

    def test_default_microbatches_leave_out_a_short_final_one(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = self.variant(tmp, "short.log", self.UNSTAGED, '"final_rows":64',
                                '"final_rows":32')
            code, doc, err = report(path)
            self.assertEqual(code, 0, err)
            run_doc = doc["runs"][0]
            self.assertTrue(run_doc["microbatch_final_left_out"])
            self.assertEqual(run_doc["microbatch_s"]["n"], 24)  # micro-batches 3-8 of steps 1-4
            code, doc, _ = report(path, "--microbatches", "3-last")
            self.assertFalse(doc["runs"][0]["microbatch_final_left_out"])
            self.assertEqual(doc["runs"][0]["microbatch_s"]["n"], 28)
            code, out, _ = run([path])
            self.assertIn(
                "ab3-unstaged: each step's final micro-batch is short (final_rows 32 < "
                "rows 64): left out of the regular micro-batch median", out)
        code, doc, _ = report(self.UNSTAGED)
        self.assertFalse(doc["runs"][0]["microbatch_final_left_out"])
        self.assertEqual(doc["runs"][0]["microbatch_s"]["n"], 28)

    def test_older_logs_show_no_setup(self):
        code, out, _ = run([log("bench_device_ctl.log"), log("bench_dispatch_var.log")])
        self.assertEqual(code, 0)
        self.assertNotIn("set-up", out)
        self.assertNotIn("limit from", out)


class LiveDriverTest(unittest.TestCase):
    """The current driver's lines, straight from its step loop."""

    def test_driver_output_reads_back(self):
        device = bench_device(3.5, pattern=(3, 1), compile_s=4.0)
        lines = bench_lines("live", device, steps=4, micro_steps=5)
        summary = json.loads(next(l for l in lines if l.startswith("BENCH_SUMMARY "))[14:])
        code, out, err = run(["-", "--json"], stdin="\n".join(lines) + "\n")
        self.assertEqual(code, 0, err)
        run_ = json.loads(out)["runs"][0]
        self.assertEqual(run_["name"], "live")
        self.assertAlmostEqual(run_["step_s"]["mean"], summary["mean_step_s"], delta=1e-6)
        self.assertAlmostEqual(run_["microbatch_s"]["median"], summary["median_microbatch_s"],
                               delta=1e-6)
        # The driver's own figures agree: a driver that logs both definitions, or an older one whose
        # tokens_per_s_per_chip was the real figure.
        if "real_tokens_per_s_per_chip" in summary:
            self.assertAlmostEqual(run_["tokens_per_s_per_chip"], summary["tokens_per_s_per_chip"],
                                   delta=1e-3)
            self.assertAlmostEqual(run_["real_tokens_per_s_per_chip"],
                                   summary["real_tokens_per_s_per_chip"], delta=1e-3)
        else:
            self.assertAlmostEqual(run_["real_tokens_per_s_per_chip"],
                                   summary["tokens_per_s_per_chip"], delta=1e-3)
        known = bench_known(device, steps=4, micro_steps=5)
        self.assertAlmostEqual(run_["timeline"]["device_s"]["median"], known["device_median"],
                               delta=1.5e-3)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--write-fixtures":
        write_fixtures(sys.argv[2])
    else:
        unittest.main()
