#!/usr/bin/env python3
"""tests/report/test_reports.py: rn50 report and rn50 compare as a user runs them: the page of a fresh CPU run (made
by rn50 train itself) parses as HTML, its pictures as SVG, and its figures are the metrics file's; and the committed
samples in bench/results/2026-12-01-reports are what make.sh writes from their recorded inputs, byte for byte.

  python3 tests/report/test_reports.py --rn50 build/rn50 --work DIR
"""
import argparse
import html.parser
import json
import os
import re
import shutil
import subprocess
import sys
import unittest
import xml.etree.ElementTree as ET

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SAMPLES = os.path.join("bench", "results", "2026-12-01-reports")
VOID = {"meta", "br", "img", "input", "link", "hr"}
OPTS = None


class StrictTags(html.parser.HTMLParser):
    """Every element closed, in order; the inline SVGs' text kept to parse as XML."""
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack, self.errors, self.data_json = [], [], None

    def handle_starttag(self, tag, attrs):
        if tag not in VOID:
            self.stack.append((tag, dict(attrs)))

    def handle_endtag(self, tag):
        if not self.stack or self.stack[-1][0] != tag:
            self.errors.append(f"</{tag}> closes {self.stack[-1][0] if self.stack else 'nothing'}")
            return
        self.stack.pop()

    def handle_data(self, data):
        if self.stack and self.stack[-1][0] == "script" and self.stack[-1][1].get("id") == "rn50-data":
            self.data_json = data


def metrics_records(path):
    out = {"epoch": [], "step": []}
    with open(path) as f:
        lines = f.readlines()
    for line in lines:
        try:
            r = json.loads(line)
        except ValueError:
            continue
        if isinstance(r, dict) and r.get("type") in out:
            out[r["type"]].append({k: v for k, v in r.items() if k != "type"})
    return out


class CpuRunReport(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        work = OPTS.work
        shutil.rmtree(work, ignore_errors=True)
        os.makedirs(work)
        subprocess.run([OPTS.rn50, "make-sample", "--out", f"{work}/data", "--classes", "3", "--per-class", "8",
                        "--val-per-class", "2", "--size", "32"], check=True, stdout=subprocess.DEVNULL)
        cls.run_dir = f"{work}/run"
        train = subprocess.run([OPTS.rn50, "train", "--data-root", f"{work}/data", "--out-dir", cls.run_dir,
                                "--device", "cpu", "--model", "resnet18", "--image-size", "32", "--val-resize", "32",
                                "--batch-size", "4", "--workers", "1", "--epochs", "3", "--log-every", "2",
                                "--warmup-epochs", "0", "--checkpoint=off"], capture_output=True, text=True)
        assert train.returncode == 0, train.stdout + train.stderr
        with open(f"{cls.run_dir}/report.html") as f:
            cls.page = f.read()  # written by rn50 train at its end

    def test_the_page_parses_and_every_picture_is_svg(self):
        parser = StrictTags()
        parser.feed(self.page)
        parser.close()
        self.assertEqual(parser.errors, [])
        self.assertEqual(parser.stack, [])
        svgs = re.findall(r"<svg .*?</svg>", self.page, re.S)
        self.assertEqual(len(svgs), 13)
        for svg in svgs:
            self.assertEqual(ET.fromstring(svg).tag, "{http://www.w3.org/2000/svg}svg")
        self.assertNotIn("https://", self.page)
        self.assertEqual(re.findall(r"<script[^>]*>", self.page), ['<script type="application/json" id="rn50-data">'])

    def test_its_figures_are_the_metrics_files(self):
        parser = StrictTags()
        parser.feed(self.page)
        data = json.loads(parser.data_json)
        records = metrics_records(f"{self.run_dir}/metrics.jsonl")
        self.assertEqual(len(records["epoch"]), 3)
        self.assertEqual(data["epochs"], records["epoch"])
        self.assertEqual(data["steps"], records["step"])
        rows = re.findall(r"<tr><td>(\d+)</td><td>[^<]*</td><td>([^<]*)</td><td>([^<]*)</td><td>([^<]*)</td>"
                          r"<td>([^<]*)</td>", self.page)
        self.assertEqual(len(rows), 3)
        for (epoch, rate, train_loss, _, top1), e in zip(rows, records["epoch"]):
            self.assertEqual(int(epoch), e["epoch"])
            self.assertEqual(rate, f"{e['images_per_s']:.1f}")
            self.assertEqual(train_loss, f"{e['train_loss']:.4f}")
            self.assertEqual(top1, f"{100 * e['top1']:.2f}%")
        self.assertIn("A CPU run: GPU utilisation does not apply.", self.page)

    def test_a_torn_line_is_counted_and_the_page_still_written(self):
        torn = f"{OPTS.work}/torn"
        shutil.copytree(self.run_dir, torn)
        with open(f"{torn}/metrics.jsonl", "a") as f:
            f.write('{"type":"epoch","epo')
        out = subprocess.run([OPTS.rn50, "report", torn], capture_output=True, text=True)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn("1 lines skipped", out.stdout)
        with open(f"{torn}/report.html") as f:
            self.assertIn("1 skipped (torn, not JSON, or not a record of rn50 train)", f.read())


class CommittedSamples(unittest.TestCase):
    def test_make_sh_writes_the_committed_samples_again(self):
        out = os.path.join(OPTS.work, "samples")
        shutil.rmtree(out, ignore_errors=True)
        env = dict(os.environ, RN50=os.path.abspath(OPTS.rn50))
        subprocess.run([os.path.join(SAMPLES, "make.sh"), out], cwd=ROOT, env=env, check=True)
        written = sorted(os.path.relpath(os.path.join(d, f), out) for d, _, fs in os.walk(out) for f in fs)
        self.assertGreaterEqual(len(written), 9)
        for name in written:
            with self.subTest(name):
                with open(os.path.join(ROOT, SAMPLES, name)) as a, open(os.path.join(out, name)) as b:
                    committed, rendered = a.read(), b.read()
                self.assertEqual(rendered, committed,
                                 f"{SAMPLES}/{name} is stale: run {SAMPLES}/make.sh from the repository root")
        for svg in [n for n in written if n.endswith(".svg")]:
            ET.parse(os.path.join(out, svg))
        with open(os.path.join(out, "compare", "compare.json")) as f:
            compare = json.load(f)
        machines = {r["machine"] for r in compare["rows"]}
        self.assertTrue({"CPU (2 cores)", "H200 x1", "H200 x2"} <= machines, machines)
        for row in compare["rows"]:  # every row names the recorded file it came from
            self.assertTrue(os.path.exists(os.path.join(ROOT, row["source"].split(" (")[0].split(": ")[0])),
                            row["source"])


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--rn50", required=True)
    p.add_argument("--work", required=True)
    OPTS, rest = p.parse_known_args()
    unittest.main(argv=[sys.argv[0]] + rest)
