#!/usr/bin/env python3
"""tests/bench/test_ablation_report.py: the ablation report's utilisation without running rn50: the reading's rules
against tests/fixtures/utilisation_readings.json (report/reading.cpp is held to the same cases), the figures against
the H200 ablation's recorded ablation.json, and the report.md that --render writes from that file.

  python3 tests/bench/test_ablation_report.py
"""
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RECORDED = os.path.join(ROOT, "bench", "results", "2026-11-30-ablation")

spec = importlib.util.spec_from_file_location("ablation", os.path.join(ROOT, "bench", "ablation.py"))
ablation = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ablation)


def run_of(runs, data, batch, label):
    return next(r for r in runs if r["data"] == data and r["batch"] == batch and r["label"] == label)


class Reading(unittest.TestCase):
    def test_every_fixture_case_gives_its_sentence(self):
        cases = json.load(open(os.path.join(ROOT, "tests", "fixtures", "utilisation_readings.json")))["cases"]
        self.assertGreaterEqual(len(cases), 10)
        for case in cases:
            with self.subTest(case["name"]):
                self.assertEqual(ablation.read_utilisation(case["cuda"], case["util"], case["data_wait_share"],
                                                           case["facts"]), case["expected"])

    def test_switch_facts_come_from_the_command_line(self):
        facts = ablation.switch_facts("rn50 train --device cuda:0 --tf32=off --precision fp32 --cuda-graph=on "
                                      "--channels-last=off")
        self.assertEqual(facts, {"precision": "fp32", "tf32": "off", "fusion": "", "cuda_graph": True,
                                 "channels_last": False, "cuda": True})
        self.assertFalse(ablation.switch_facts("rn50 train --device cpu")["cuda"])
        self.assertIsNone(ablation.switch_facts("rn50 train")["cuda_graph"])


class RecordedH200Ablation(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.saved = json.load(open(os.path.join(RECORDED, "ablation.json")))
        cls.runs = cls.saved["runs"]

    def test_figures_are_the_medians_of_the_recorded_epoch_means(self):
        for label in ["baseline", "all"]:
            run = run_of(self.runs, "synthetic", 256, label)
            u, wait = ablation.utilisation(run)
            for _, metric, _ in ablation.UTIL_COLUMNS:
                self.assertEqual(u[metric], statistics.median(e[metric + "_mean"] for e in run["epochs"]), metric)
            self.assertEqual(wait, statistics.median(e["data_wait_s"] / e["wall_s"] for e in run["epochs"]))

    def test_nvml_reads_the_same_for_a_run_several_times_faster(self):
        base, best = run_of(self.runs, "synthetic", 256, "baseline"), run_of(self.runs, "synthetic", 256, "all")
        ub, ua = ablation.utilisation(base)[0], ablation.utilisation(best)[0]
        across = ablation.read_across([("the baseline", base["summary"]["median"], ub),
                                       ("the optimized run", best["summary"]["median"], ua)])
        for value in [ub["gpu_util_pct"], ua["gpu_util_pct"], ub["tensor_util_pct"], ua["tensor_util_pct"]]:
            self.assertIn(f"{value:.1f}%", across)
        self.assertIn(f"{best['summary']['median'] / base['summary']['median']:.2f}x faster", across)

    def test_render_writes_the_report_with_its_utilisation_from_the_recorded_json(self):
        with tempfile.TemporaryDirectory() as out:
            shutil.copy(os.path.join(RECORDED, "ablation.json"), out)
            subprocess.run([sys.executable, os.path.join(ROOT, "bench", "ablation.py"), "--out", out, "--render"],
                           check=True, stdout=subprocess.DEVNULL)
            rendered = open(os.path.join(out, "report.md")).read()
        self.assertIn("## Utilisation, every configuration", rendered)
        self.assertIn("What the GPU was doing (synthetic, batch 256): NVML's GPU utilisation", rendered)
        base, best = run_of(self.runs, "synthetic", 256, "baseline"), run_of(self.runs, "synthetic", 256, "all")
        ratio = best["summary"]["median"] / base["summary"]["median"]
        self.assertIn(f"{ratio:.2f}x on synthetic data", rendered)

    def test_a_cpu_run_reads_unavailable(self):
        run = json.loads(json.dumps(run_of(self.runs, "synthetic", 256, "baseline")))
        run["command"] = run["command"].replace("--device cuda:0", "--device cpu")
        for e in run["epochs"]:
            for _, metric, _ in ablation.UTIL_COLUMNS:
                e[metric + "_mean"] = None
        u, _ = ablation.utilisation(run)
        self.assertEqual([ablation.format_figure(unit, u[m]) for _, m, unit in ablation.UTIL_COLUMNS],
                         ["unavailable"] * len(ablation.UTIL_COLUMNS))
        self.assertEqual(ablation.reading(run), "A CPU run: GPU utilisation does not apply.")


if __name__ == "__main__":
    unittest.main()
