"""CLI tests of profile-report: runs the built tool on the real capture of testdata/profile (as a
file, gzipped on stdin, in a directory) and checks its text, JSON, SVG, the A/B exit codes and
--help."""

import gzip
import json
import os
import shutil
import unittest
import xml.etree.ElementTree as ET

from cli_common import BIN, TESTDATA, TempDirTestCase, assert_help_and_version, run_tool

TOOL = os.path.join(BIN, "profile-report")
REAL = os.path.join(TESTDATA, "profile", "jax0.11.2_h200_bench_driver_profile_window.xplane.pb")
CUT = os.path.join(os.path.dirname(TESTDATA), "fuzz", "seeds", "profile",
                   "h200_device_plane_cut_40_events_per_line.xplane.pb")


def run(args, stdin=None):
    return run_tool(TOOL, args, stdin=stdin)


class Report(TempDirTestCase):

    def test_text_says_what_each_figure_measures(self):
        code, out, err = run([REAL])
        self.assertEqual(code, 0, err)
        self.assertIn("steps: 6 from executions of jit_work", out)
        self.assertIn("busy (time any op ran, streams at once counted once)", out)
        self.assertIn("ops by self time (an op's own time, less ops nested in it)", out)
        self.assertRegex(out, r"matmul\s+gemm_fusion_dot_general_1")

    def test_gzip_on_stdin_and_a_directory_read_like_the_file(self):
        _, want, _ = run([REAL, "--json"])
        with open(REAL, "rb") as f:
            packed = gzip.compress(f.read())
        code, got, err = run(["-", "--json"], stdin=packed)
        self.assertEqual(code, 0, err)
        self.assertEqual(
            json.loads(got)["devices"][0]["steps"],
            json.loads(want)["devices"][0]["steps"])
        self.assertEqual(json.loads(got)["files"], ["<stdin>"])
        host = os.path.join(self.tmp.name, "plugins", "profile", "run")
        os.makedirs(host)
        shutil.copy(REAL, os.path.join(host, "host0.xplane.pb"))
        code, got, err = run([self.tmp.name, "--json"])
        self.assertEqual(code, 0, err)
        self.assertEqual(
            json.loads(got)["devices"][0]["steps"],
            json.loads(want)["devices"][0]["steps"])

    def test_svg_draws_a_step(self):
        svg = os.path.join(self.tmp.name, "step.svg")
        code, _, err = run([REAL, "--svg", svg, "--svg-step", "5"])
        self.assertEqual(code, 0, err)
        title = ET.parse(svg).getroot().find("{http://www.w3.org/2000/svg}title")
        assert title is not None and title.text is not None
        self.assertIn("/device:GPU:0 step 5: 22.588 ms long", title.text)

    def test_ab_exit_codes(self):
        self.assertEqual(run([REAL, REAL])[0], 0)
        code, out, _ = run([REAL, CUT])
        self.assertEqual(code, 1)
        self.assertIn("something moved beyond its spread", out)

    def test_hlo_puts_planned_hidden_measured_exposed_first(self):
        capture = os.path.join(TESTDATA, "profile", "synthetic_overlap_tpu.xplane.pb")
        dump = os.path.join(TESTDATA, "hlo",
                            "latency_hiding_scheduler__ResourceLimitWithinAnnotationGroup.hlo.txt")
        code, out, err = run([capture, "--hlo", dump, "--json"])
        self.assertEqual(code, 0, err)
        overlap = json.loads(out)["overlap"]
        self.assertEqual([d["plane"] for d in overlap["devices"]],
                         ["/device:TPU:0", "/device:TPU:1"])
        pairs = overlap["devices"][0]["pairs"]
        self.assertEqual([(p["done"], p["agreement"]) for p in pairs],
                         [("agd0", "planned hidden, measured exposed"),
                          ("cpd1", "planned exposed, measured hidden"), ("agd1", "agree")])
        # The second device waited where the first did not, and the other way round.
        pairs = overlap["devices"][1]["pairs"]
        self.assertEqual([(p["done"], p["measured_exposed"]) for p in pairs], [("cpd1", True),
                                                                               ("agd0", False),
                                                                               ("agd1", False)])
        self.assertEqual([(d["done"], [m["measured"] for m in d["measured"]])
                          for d in overlap["disagreements"]], [("agd0", ["exposed", "hidden"]),
                                                               ("cpd1", ["hidden", "exposed"])])
        code, out, err = run([capture, "--hlo", dump, "--min-wait-us", "500"])
        self.assertEqual(code, 0, err)
        self.assertIn("planned hidden, measured exposed: 0 of 3 pairs", out)
        self.assertIn("the 2 devices agree on every pair's measured verdict (3 pairs)", out)
        code, out, err = run([capture, "--hlo", dump])
        self.assertEqual(code, 0, err)
        self.assertRegex(out, r"on /device:TPU:1 \(\S*synthetic_overlap_tpu\.xplane\.pb\)")
        self.assertIn("devices disagree on 2 of 3 pairs", out)

    def test_categories_say_where_they_came_from(self):
        code, out, err = run([REAL])
        self.assertEqual(code, 0, err)
        self.assertIn("categories: from the capture's hlo_op stat", out)
        code, out, err = run([REAL, "--json"])
        self.assertEqual(code, 0, err)
        device = json.loads(out)["devices"][0]
        self.assertEqual(device["category_sources"]["hlo_category"], 0)
        self.assertGreater(device["category_sources"]["hlo_op"], 0)
        self.assertEqual(device["ops"][0]["category_source"], "hlo_op")
        capture = os.path.join(TESTDATA, "profile", "synthetic_overlap_tpu.xplane.pb")
        code, out, err = run([capture, "--json"])
        self.assertEqual(code, 0, err)
        for device in json.loads(out)["devices"]:
            self.assertEqual(device["category_sources"],
                             {"hlo_category": 9, "hlo_op": 0, "name": 1})

    def test_help(self):
        assert_help_and_version(self, "profile-report", "--min-change-percent")


if __name__ == "__main__":
    unittest.main()
