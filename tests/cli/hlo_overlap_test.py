"""CLI tests of hlo-overlap: runs the built tool on the HLO fixtures in testdata/hlo and checks
its stdout (text, JSON, comparison), the SVG it writes, stderr and exit codes."""

import json
import os
import re
import subprocess
import tempfile
import unittest
import xml.etree.ElementTree as ET

from cli_common import (BIN, PYTHON, TESTDATA, TempDirTestCase, assert_bad_input,
                        assert_help_and_version, run_tool)

TOOL = os.path.join(BIN, "hlo-overlap")
HLO = os.path.join(TESTDATA, "hlo")
BAD = os.path.join(HLO, "bad")

A2A = os.path.join(HLO, "handwritten_async_all_to_all.hlo.txt")
WHILE = os.path.join(HLO, "handwritten_while_trip_counts.hlo.txt")
UNPAIRED = os.path.join(HLO, "handwritten_unpaired.hlo.txt")
LLAMA = os.path.join(HLO, "maxtext_ref_llama3_8b_tpu-v6e-4_8fcc9e13.hlo.txt")
AG_BALANCE = os.path.join(HLO, "latency_hiding_scheduler__AllGatherAsyncBalance.hlo.txt")


def run(args, stdin=None):
    return run_tool(TOOL, args, stdin=stdin)


class TextReport(unittest.TestCase):

    def test_reports_overlapped_and_exposed_pairs(self):
        code, out, err = run([A2A, "--list"])
        self.assertEqual(code, 0, err)
        self.assertEqual(err, "")
        self.assertIn("module async_all_to_all (scheduled), 3 computations", out)
        self.assertIn("collectives: 2 in the text, 2 executions; overlapped 1, exposed 1", out)
        self.assertRegex(out, r"all-to-all\s+collective\s+2\s+2\s+8\.0 MiB\s+1\s+1\s+4\.0 MiB\s+0")
        self.assertIn(
            "all-to-all %a2a-start -> %a2a-done in %main (line 6): overlapped, "
            "4.0 MiB x 1, 2 instr, 1 compute (%dot.1)", out)
        self.assertIn("op_name: jit(step)/moe/all_to_all_back", out)

    def test_trip_counts_weight_the_totals(self):
        code, out, _ = run([WHILE, "--top", "1"])
        self.assertEqual(code, 0)
        self.assertIn("Top 1 exposed (by bytes x executions, of 4):", out)
        self.assertIn("1. all-reduce %inner-ar in %inner_body (line 48): exposed, 4.0 KiB x 32",
                      out)
        self.assertRegex(out, r"%unknown_body\s+>=1\s+1")

    def test_unpaired_entries_are_listed_not_fatal(self):
        code, out, _ = run([UNPAIRED])
        self.assertEqual(code, 0)
        self.assertIn("Unpaired (3):", out)
        self.assertIn("its operand is not a start in this computation", out)
        self.assertIn("no done in this computation", out)

    def test_computation_regex_selects_computations(self):
        code, out, _ = run([WHILE, "--computation", "^inner", "--json"])
        self.assertEqual(code, 0)
        doc = json.loads(out)
        self.assertEqual({c["computation"] for c in doc["collectives"]}, {"inner_body"})
        code, _, err = run([WHILE, "--computation", "(["])
        self.assertEqual(code, 2)
        self.assertIn("bad --computation regex", err)

    def test_stdin_and_output_file(self):
        with open(A2A, "rb") as f:
            code, out, _ = run(["-"], stdin=f.read())
        self.assertEqual(code, 0)
        self.assertIn("<stdin>: module async_all_to_all", out)
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "report.txt")
            code, out, _ = run([A2A, "-o", path])
            self.assertEqual(code, 0)
            self.assertEqual(out, "")
            with open(path, encoding="utf-8") as f:
                self.assertIn("all-to-all", f.read())


class JsonReport(unittest.TestCase):

    def test_schema(self):
        code, out, err = run([WHILE, "--json", "--top", "2"])
        self.assertEqual(code, 0, err)
        doc = json.loads(out)
        self.assertEqual(doc["schema"], "rtb.hlo-overlap/1")
        self.assertEqual(doc["module"], "while_trip_counts")
        self.assertTrue(doc["scheduled"])
        self.assertFalse(doc["truncated"])
        self.assertIsNone(doc["truncated_line"])
        self.assertEqual(doc["computations"], 9)
        self.assertEqual(len(doc["collectives"]), 6)
        for entry in doc["collectives"]:
            for key in ("index", "kind", "category", "computation", "start", "done", "wrapper",
                        "start_line", "done_line", "async", "status", "exposed", "bytes",
                        "bytes_known", "window_instructions", "window_compute", "compute",
                        "executions", "executions_known", "op_name", "in_truncated_computation"):
                self.assertIn(key, entry)
        inner = [c for c in doc["collectives"] if c["start"] == "inner-ar"][0]
        self.assertEqual(inner["kind"], "all-reduce")
        self.assertFalse(inner["async"])
        self.assertTrue(inner["exposed"])
        self.assertIsNone(inner["done"])
        self.assertEqual(inner["executions"], 32)
        self.assertEqual(inner["bytes"], 4096)
        ag = doc["collectives"][0]
        self.assertEqual((ag["kind"], ag["status"], ag["compute"]),
                         ("all-gather", "overlapped", ["outer"]))
        self.assertEqual(
            doc["summary"]["all-reduce"], {
                "category": "collective", "instances": 2, "executions": 33, "bytes": 33 * 4096,
                "overlapped": 0, "exposed": 33, "exposed_bytes": 33 * 4096, "unpaired": 0,
                "executions_unknown": 0
            })
        self.assertEqual(doc["total_collectives"]["executions_unknown"], 1)
        self.assertEqual(doc["top_exposed"], [4, 3])
        self.assertEqual([c["computation"] for c in doc["by_computation"]],
                         ["main", "outer_body", "inner_body", "unknown_body"])

    def test_async_wrapper_kind_is_the_collective(self):
        doc = json.loads(run([A2A, "--json"])[1])
        self.assertEqual([(c["kind"], c["wrapper"], c["async"]) for c in doc["collectives"]],
                         [("all-to-all", "async-start", True)] * 2)

    def test_unpaired_has_null_exposure(self):
        doc = json.loads(run([UNPAIRED, "--json"])[1])
        first = doc["collectives"][0]
        self.assertEqual(first["status"], "unpaired-done")
        self.assertIsNone(first["exposed"])
        self.assertIsNone(first["start"])


class Truncation(unittest.TestCase):

    def test_truncated_dump_reports_and_exits_1(self):
        code, out, err = run([LLAMA, "--top", "1"])
        self.assertEqual(code, 1)
        self.assertIn("TRUNCATED at line 2000: the dump ends inside computation", out)
        self.assertIn("all-gather  collective        7", out)
        self.assertRegex(
            err, r"^hlo-overlap: warning: .*maxtext_ref_llama3_8b_tpu-v6e-4_8fcc9e13"
            r"\.hlo\.txt:2000: truncated dump: ")
        code, out, _ = run([LLAMA, "--allow-truncated", "--json"])
        self.assertEqual(code, 0)
        doc = json.loads(out)
        self.assertTrue(doc["truncated"])
        self.assertEqual(doc["truncated_line"], 2000)

    def test_dump_cut_inside_an_instruction(self):
        code, out, _ = run([os.path.join(BAD, "truncated_mid_instruction.hlo.txt")])
        self.assertEqual(code, 1)
        self.assertIn("unpaired-start", out)
        self.assertIn("its computation is cut off by the end of the dump", out)

    def test_json_lists_the_diagnostics_stderr_shows(self):
        code, out, err = run([LLAMA, "--allow-truncated", "--json"])
        self.assertEqual(code, 0, err)
        doc = json.loads(out)
        warnings = [d for d in doc["diagnostics"] if d["severity"] == "warning"]
        self.assertEqual(len(warnings), 1, doc["diagnostics"])
        self.assertEqual(warnings[0]["where"], LLAMA + ":2000")
        self.assertTrue(warnings[0]["message"].startswith("truncated dump: "), warnings)
        self.assertEqual(
            err, "hlo-overlap: warning: {}: {}\n".format(warnings[0]["where"],
                                                         warnings[0]["message"]))

    def test_notes_with_verbose_warnings_unless_quiet(self):
        # An unscheduled module: a note (the analysis' own, line 1) and a warning (the tool's).
        unscheduled = os.path.join(HLO, "xla_bench_hlo_llama31_405b_bf16_16x8.hlo.txt")
        code, out, _ = run([unscheduled, "--json"])
        self.assertEqual(code, 0)
        diagnostics = json.loads(out)["diagnostics"]
        self.assertEqual([d["severity"] for d in diagnostics], ["note", "warning"])
        self.assertEqual([d["where"] for d in diagnostics], [unscheduled + ":1", unscheduled])
        note, warning = ("hlo-overlap: {}: {}: {}\n".format(level, d["where"], d["message"])
                         for level, d in zip(("info", "warning"), diagnostics))
        self.assertEqual(run([unscheduled])[2], warning)
        self.assertEqual(run([unscheduled, "-v"])[2], note + warning)
        self.assertEqual(run([unscheduled, "-q"])[2], "")


class Checks(unittest.TestCase):

    def test_fail_if_exposed_bytes(self):
        self.assertEqual(run([A2A, "--fail-if-exposed-bytes", "4MiB"])[0], 0)
        code, _, err = run([A2A, "--fail-if-exposed-bytes", "4194303"])
        self.assertEqual(code, 1)
        self.assertIn("exposed collective bytes 4194304 (4.0 MiB) exceed the budget 4194303", err)
        code, _, err = run([A2A, "--fail-if-exposed-bytes", "lots"])
        self.assertEqual(code, 2)
        self.assertIn("--fail-if-exposed-bytes lots", err)


class Compare(unittest.TestCase):

    def test_side_by_side_with_deltas(self):
        # Different kinds on the two sides: different, exit 1.
        code, out, err = run([AG_BALANCE, A2A])
        self.assertEqual(code, 1, err)
        self.assertIn("A: " + AG_BALANCE, out)
        self.assertIn("B: " + A2A, out)
        self.assertRegex(out, r"collectives exposed bytes\s+8\.0 MiB\s+4\.0 MiB\s+-4\.0 MiB")
        self.assertRegex(out, r"all-gather\s+2\s+0\s+2\s+0\s+-2")
        self.assertRegex(out, r"all-to-all\s+0\s+2\s+0\s+1\s+\+1")

        self.assertIn("different: 2 kinds differ", out)
        self.assertIn("all-gather: entries 2 -> 0", out)

    def test_threads_do_not_change_the_report(self):
        deepseek = os.path.join(HLO, "maxtext_ref_deepseek3_tpu-v6e-4_28b37f85_sparsecore.hlo.txt")
        for dump in (LLAMA, deepseek):
            reports = []
            for threads in ("1", "2", "3", "0"):
                code, out, err = run([dump, "--json", "--threads", threads])
                self.assertIn(code, (0, 1), err)  # the llama fixture is a truncated dump
                reports.append((code, out))
            self.assertEqual(reports, [reports[0]] * 4, dump)
        code, _, err = run([LLAMA, "--threads", "-1"])
        self.assertEqual(code, 2)
        self.assertIn("--threads", err)

    def test_exit_codes_are_diff_like(self):
        with open(A2A, encoding="utf-8") as f:
            text = f.read()
        dot = ("  %dot.1 = f32[256,256]{1,0} dot(%p1, %p1), lhs_contracting_dims={1}, "
               "rhs_contracting_dims={0}\n")
        self.assertIn(dot, text)
        with tempfile.TemporaryDirectory() as tmp:
            # The same schedule with every instruction renamed: same, exit 0.
            renamed = os.path.join(tmp, "renamed.txt")
            with open(renamed, "w", encoding="utf-8") as f:
                f.write(text.replace("a2a-", "x2x-"))
            code, out, err = run([A2A, renamed])
            self.assertEqual(code, 0, err)
            self.assertIn("same: no per-kind total differs", out)
            # %dot.1 moved before the first async-start: its window loses the dot, so the
            # all-to-all pairs go from 1 overlapped + 1 exposed (4 MiB) to 2 exposed (8 MiB).
            moved = os.path.join(tmp, "moved.txt")
            with open(moved, "w", encoding="utf-8") as f:
                f.write(text.replace(dot, "").replace("  %a2a-start =", dot + "  %a2a-start =", 1))
            code, out, err = run([A2A, moved])
            self.assertEqual(code, 1, err)
            self.assertIn(
                "different: 1 kind differs\n  all-to-all: overlapped 1 -> 0, "
                "exposed 1 -> 2, exposed bytes 4.0 MiB -> 8.0 MiB\n", out)
            doc = json.loads(run([A2A, moved, "--json"])[1])
            self.assertFalse(doc["same"])
            self.assertEqual(doc["delta"]["total_collectives"]["exposed_bytes"], 4 << 20)
            # A dump that cannot be read: exit 2 whatever the other one is.
            code, out, err = run([A2A, os.path.join(BAD, "not_hlo.txt")])
            self.assertEqual(code, 2)
            self.assertEqual(out, "")
            # A truncated dump is compared as it is (a warning, not exit 1 by itself).
            code, out, err = run([LLAMA, LLAMA])
            self.assertEqual(code, 0, err)
            self.assertIn("truncated dump", err)

    def test_json(self):
        doc = json.loads(run([AG_BALANCE, A2A, "--json"])[1])
        self.assertFalse(doc["same"])
        self.assertEqual(len(doc["differences"]), 2)
        self.assertEqual(doc["schema"], "rtb.hlo-overlap-compare/1")
        self.assertEqual(doc["a"]["schema"], "rtb.hlo-overlap/1")
        self.assertEqual(doc["delta"]["total_collectives"]["exposed_bytes"], -(4 << 20))
        self.assertEqual(doc["delta"]["by_kind"]["all-to-all"]["instances"], 2)


class Svg(unittest.TestCase):

    def test_writes_a_readable_svg(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "schedule.svg")
            code, out, err = run([WHILE, "--svg", path])
            self.assertEqual(code, 0, err)
            root = ET.parse(path).getroot()
            self.assertTrue(root.tag.endswith("svg"))
            ns = {"s": "http://www.w3.org/2000/svg"}
            titles = [t.text for t in root.iter("{http://www.w3.org/2000/svg}title")]
            self.assertIn("hlo-overlap: schedule of %main", titles)
            bar = "all-gather %ag-start -> %ag-done: overlapped"
            self.assertTrue(any(t and t.startswith(bar) for t in titles), titles)
            self.assertGreater(len(root.findall(".//s:rect", ns)), 10)

    def test_svg_needs_one_dump(self):
        code, _, err = run([A2A, WHILE, "--svg", "/dev/null"])
        self.assertEqual(code, 2)
        self.assertIn("--svg draws one dump", err)


class BadInput(unittest.TestCase):

    def assert_error(self, args, pattern):
        assert_bad_input(self, "hlo-overlap", run(args), pattern=pattern)

    def test_not_hlo(self):
        self.assert_error([os.path.join(BAD, "not_hlo.txt")],
                          r"^hlo-overlap: .*not_hlo\.txt:1: not an HLO module")

    def test_binary_garbage(self):
        self.assert_error([os.path.join(BAD, "binary.bin")], r"binary\.bin:1: not an HLO module")

    def test_empty_and_header_only(self):
        self.assert_error([os.path.join(BAD, "empty.hlo.txt")], r"empty input")
        self.assert_error([os.path.join(BAD, "header_only.hlo.txt")], r"no computation")

    def test_garbage_in_the_first_computation(self):
        self.assert_error([os.path.join(BAD, "garbage_instruction.hlo.txt")],
                          r"garbage_instruction\.hlo\.txt:5: expected an instruction")

    def test_missing_file_and_bad_options(self):
        self.assert_error([os.path.join(BAD, "missing.hlo.txt")], r"cannot open")
        self.assert_error([], r"DUMP is required")
        self.assert_error(["-", "-"], r"only one of the two dumps can be - \(stdin\)")
        self.assert_error([A2A, A2A, A2A], r"hlo-overlap: ")

    def test_nul_byte_after_complete_computations(self):
        code, out, err = run([os.path.join(BAD, "nul_inside.hlo.txt")])
        self.assertEqual(code, 1)
        self.assertIn("TRUNCATED at line 17: binary data (NUL byte)", out)

    def test_50mb_single_line_fails_with_bounded_memory(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "huge.hlo.txt")
            with open(path, "w", encoding="ascii") as f:
                f.write('HloModule huge, is_scheduled=true\n\n'
                        'ENTRY %e {\n  %x = f32[] constant(0), note="')
                f.write("x" * (50 << 20))
            # Run the tool from a fresh interpreter so that RUSAGE_CHILDREN is the tool's alone.
            probe = ("import resource, subprocess, sys\n"
                     "p = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
                     "print(p.returncode)\n"
                     "print(p.stderr.strip())\n"
                     "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n")
            result = subprocess.run([PYTHON, "-c", probe, TOOL, path], capture_output=True,
                                    text=True, timeout=120)
            code, message, max_rss_kib = result.stdout.strip().split("\n")
            self.assertEqual(code, "2")
            self.assertRegex(message, r"huge\.hlo\.txt:4: statement longer than 16 MiB")
            self.assertLess(int(max_rss_kib), 128 * 1024)


# ---- binary HloProto dumps (*.hlo.pb) ---------------------------------------------------------
# The .pb files are made by Debian's protoc (protobuf-compiler, a test dependency in the
# Makefile) from text protos: testdata/hlo/proto/*.textproto, and text protos that
# tests/hlo_text_to_textproto.py makes from the text fixtures here.
SOURCE_ROOT = os.path.dirname(TESTDATA)
SCHEMA_DIR = os.path.join(SOURCE_ROOT, "tests", "hlo")
CONVERTER = os.path.join(SOURCE_ROOT, "tests", "hlo_text_to_textproto.py")
PROTO = os.path.join(HLO, "proto")

# Real XLA dumps: one instruction per line, a blank line after each computation, as the proto's
# rendering; the JSON is identical but for the file name and the bytes read.
XLA_LAYOUT = ["xla_bench_hlo_llama31_405b_bf16_16x8.hlo.txt"]
# Handwritten and test fixtures in the same layout but without XLA's final blank line: the
# rendering has one line more at the very end, so only "lines" differs (by one).
ONE_PER_LINE = [
    "handwritten_async_all_to_all.hlo.txt",
    "handwritten_while_trip_counts.hlo.txt",
    "handwritten_send_recv_copy.hlo.txt",
    "handwritten_nested_tuples.hlo.txt",
    "handwritten_escaped_backend_config.hlo.txt",
    "handwritten_unpaired.hlo.txt",
    "hlo_parser__CopyStartAndCopyDone.hlo.txt",
    "hlo_parser__SendRecv.hlo.txt",
    "while_loop_unroller__LoopWithCollective2.hlo.txt",
]
# Other layouts (instructions continued over several lines, comments, more blank lines): the
# proto's rendering has one line per instruction, so line numbers differ; all else is identical.
OTHER_LAYOUT = [
    "latency_hiding_scheduler__AllGatherAsyncBalance.hlo.txt",
    "latency_hiding_scheduler__BalanceChainedCollectivePermutesLoopedEinsum.hlo.txt",
    "handwritten_multiline.hlo.txt",
]
LINE_FIELDS = ("start_line", "done_line")


def protoc_encode(textproto, out_path):
    with open(out_path, "wb") as out:
        schema = os.path.join(SCHEMA_DIR, "hlo_subset.proto")
        command = ["protoc", "--encode=xla.HloProto", "--proto_path=" + SCHEMA_DIR, schema]
        result = subprocess.run(command, input=textproto.encode(), stdout=out,
                                stderr=subprocess.PIPE, check=False)
    if result.returncode != 0:
        raise AssertionError("protoc failed: " + result.stderr.decode())


def convert(fixture):
    result = subprocess.run([PYTHON, CONVERTER, os.path.join(HLO, fixture)], capture_output=True,
                            text=True, check=True)
    return result.stdout


def without(doc, keys, line_fields=False):
    file = doc["file"]
    doc = {k: v for k, v in doc.items() if k not in keys}
    if "file" in keys:  # a diagnostic's place names the file, and in line_fields its line too
        doc["diagnostics"] = [
            dict(d, where=None if line_fields else d["where"].replace(file, "<file>", 1))
            for d in doc["diagnostics"]
        ]
    if line_fields:
        collectives = doc["collectives"]
        doc["collectives"] = [{k: c[k] for k in c if k not in LINE_FIELDS} for c in collectives]
        doc["warnings"] = [w["message"] for w in doc["warnings"]]
    return doc


class BinaryProto(TempDirTestCase):

    def pb_of(self, fixture):
        path = os.path.join(self.tmp.name, fixture.replace(".hlo.txt", ".hlo.pb"))
        if not os.path.exists(path):
            protoc_encode(convert(fixture), path)
        return path

    def json_of(self, path, stdin=None):
        code, out, err = run([path, "--json"] if stdin is None else ["-", "--json"], stdin=stdin)
        self.assertIn(code, (0, 1), err)
        return json.loads(out)

    def test_protoc_is_installed(self):
        self.assertEqual(
            subprocess.run(["protoc", "--version"], capture_output=True).returncode, 0,
            "protoc is needed (Debian protobuf-compiler; make deps installs it)")

    def test_real_xla_dump_gives_identical_json(self):
        for fixture in XLA_LAYOUT:
            with self.subTest(fixture):
                pb = self.pb_of(fixture)
                text_doc = self.json_of(os.path.join(HLO, fixture))
                pb_doc = self.json_of(pb)
                self.assertEqual(pb_doc["bytes_read"], os.path.getsize(pb))
                self.assertEqual(without(pb_doc, ("file", "bytes_read")),
                                 without(text_doc, ("file", "bytes_read")))

    def test_one_instruction_per_line_fixtures_give_identical_json(self):
        for fixture in ONE_PER_LINE:
            with self.subTest(fixture):
                text_doc = self.json_of(os.path.join(HLO, fixture))
                pb_doc = self.json_of(self.pb_of(fixture))
                self.assertTrue(text_doc["collectives"])
                self.assertEqual(pb_doc["lines"], text_doc["lines"] + 1)
                keys = ("file", "bytes_read", "lines")
                self.assertEqual(without(pb_doc, keys), without(text_doc, keys))

    def test_other_layouts_give_identical_json_but_line_numbers(self):
        for fixture in OTHER_LAYOUT:
            with self.subTest(fixture):
                text_doc = self.json_of(os.path.join(HLO, fixture))
                pb_doc = self.json_of(self.pb_of(fixture))
                keys = ("file", "bytes_read", "lines")
                self.assertEqual(without(pb_doc, keys, True), without(text_doc, keys, True))

    def test_checked_in_text_protos_match_the_converter(self):
        # testdata/hlo/proto/<fixture>.textproto is what the converter makes of the fixture.
        names = sorted(os.listdir(PROTO))
        self.assertTrue(names)
        for name in names:
            with self.subTest(name):
                with open(os.path.join(PROTO, name), encoding="utf-8") as f:
                    self.assertEqual(f.read(), convert(name.replace(".textproto", ".hlo.txt")))

    def test_stdin_and_ab_comparison(self):
        pb = self.pb_of("handwritten_async_all_to_all.hlo.txt")
        with open(pb, "rb") as f:
            data = f.read()
        code, out, err = run_tool(TOOL, ["-", "--json"], stdin=data)
        self.assertEqual(code, 0, err)
        self.assertEqual(json.loads(out)["bytes_read"], len(data))
        code, out, _ = run([A2A, pb])
        self.assertEqual(code, 0)
        self.assertIn("same: no per-kind total differs", out)

    def assert_pb_error(self, data, pattern):
        path = os.path.join(self.tmp.name, "bad.hlo.pb")
        with open(path, "wb") as f:
            f.write(data)
        code, out, err = run([path])
        self.assertEqual(code, 2, out + err)
        self.assertEqual(out, "")
        self.assertEqual(err.count("\n"), 1, err)
        self.assertRegex(err,
                         r"^hlo-overlap: " + re.escape(path) + r": binary HloProto: " + pattern)

    def test_corrupt_protos_are_one_line_errors(self):
        with open(self.pb_of("handwritten_while_trip_counts.hlo.txt"), "rb") as f:
            good = f.read()
        self.assert_pb_error(good[:len(good) // 2], r".*past the end of the message")
        self.assert_pb_error(good[:3], r".*past the end of the message")
        # bad varint: a key of 11 continuation bytes inside the module
        self.assert_pb_error(b"\x0a\x0c" + b"\xff" * 12, r"HloModuleProto: bad varint")
        # length past the end, and a huge one (2^63)
        self.assert_pb_error(b"\x0a\x7f\x0a\x01m", r"HloProto: field 1 .* has length 127")
        self.assert_pb_error(b"\x0a" + b"\x80" * 9 + b"\x01", r"HloProto: field 1 .* has length")
        # wrong wire type for a known field: the module's name as a varint
        self.assert_pb_error(b"\x0a\x02\x08\x07", r"HloModuleProto\.name \(field 1\)")
        # tuples nested too deep
        shape = b"\x10\x0b"
        for _ in range(80):
            shape = b"\x10\x0d\x22" + bytes([len(shape)]) + shape if len(shape) < 128 else \
                b"\x10\x0d\x22" + varint(len(shape)) + shape
        instruction = field(1, b"a") + field(2, b"parameter") + field(3, shape) + b"\xa8\x02\x01"
        computation = field(1, b"c") + field(2, instruction) + b"\x28\x01"
        module = field(1, b"m") + field(3, computation) + b"\x30\x01"
        self.assert_pb_error(field(1, module), r"the shape of instruction a nests tuples deeper")


def varint(value):
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def field(number, payload):
    return varint(number << 3 | 2) + varint(len(payload)) + payload


class Help(unittest.TestCase):

    def test_help_and_version(self):
        assert_help_and_version(self, "hlo-overlap", "--fail-if-exposed-bytes")


if __name__ == "__main__":
    unittest.main()
