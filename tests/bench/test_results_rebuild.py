#!/usr/bin/env python3
"""tests/bench/test_results_rebuild.py: bench/results/rebuild.sh writes every page and picture of bench/results
from the committed inputs into a folder of its own: each ablation.json's report.md and two SVGs, the comparison's
compare.md, compare.json and three SVGs, a page per recorded run; the HTML parses (every element closed), each SVG
parses as XML, each Markdown page has its tables, and nothing depends on the folder it was written to.

  python3 tests/bench/test_results_rebuild.py --rn50 build/rn50 --work DIR
"""
import argparse
import filecmp
import glob
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
RESULTS = os.path.join(ROOT, "bench", "results")
REPORTS = "2026-12-01-reports"
SVG = "{http://www.w3.org/2000/svg}svg"
VOID = {"meta", "br", "img", "input", "link", "hr"}
OPTS = None


class Tags(html.parser.HTMLParser):
    """Every element closed, in order."""
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack, self.errors = [], []

    def handle_starttag(self, tag, attrs):
        if tag not in VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag):
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes {self.stack[-1] if self.stack else 'nothing'}")
            return
        self.stack.pop()


def tables(md):
    """The Markdown tables of a page: each a list of its rows' cells, the header first."""
    found, rows = [], []
    for line in md.splitlines() + [""]:
        if line.startswith("|"):
            rows.append([c.strip() for c in line.strip().strip("|").split("|")])
        elif rows:
            found.append(rows)
            rows = []
    return found


def expected_outputs():
    out = []
    for json_path in sorted(glob.glob(os.path.join(RESULTS, "*", "ablation.json"))):
        folder = os.path.basename(os.path.dirname(json_path))
        out += [f"{folder}/{name}" for name in ["report.md", "images_per_s.svg", "step_split.svg"]]
    out += [f"{REPORTS}/compare/{name}" for name in
            ["compare.md", "compare.json", "throughput.svg", "utilisation.svg", "cost.svg"]]
    for run in sorted(os.listdir(os.path.join(RESULTS, REPORTS, "inputs"))):
        out.append(f"{REPORTS}/reports/{run}.html")
    return out


def rebuild(out):
    shutil.rmtree(out, ignore_errors=True)
    done = subprocess.run([os.path.join(RESULTS, "rebuild.sh"), OPTS.rn50, out], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


class Rebuild(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.out = os.path.join(OPTS.work, "first")
        cls.log = rebuild(cls.out)

    def path(self, name):
        return os.path.join(self.out, name)

    def test_every_page_and_picture_is_written(self):
        expected = expected_outputs()
        self.assertGreaterEqual(len(expected), 13)
        for name in expected:
            with self.subTest(name):
                self.assertTrue(os.path.isfile(self.path(name)), f"rebuild.sh did not write {name}")
                self.assertGreater(os.path.getsize(self.path(name)), 0, name)
                self.assertIn(name, self.log)

    def test_every_svg_parses(self):
        svgs = [n for n in expected_outputs() if n.endswith(".svg")]
        self.assertGreaterEqual(len(svgs), 7)
        for name in svgs:
            with self.subTest(name):
                self.assertEqual(ET.parse(self.path(name)).getroot().tag, SVG)

    def test_every_page_is_well_formed_with_its_pictures(self):
        pages = [n for n in expected_outputs() if n.endswith(".html")]
        self.assertGreaterEqual(len(pages), 1)
        for name in pages:
            with self.subTest(name):
                page = open(self.path(name)).read()
                parser = Tags()
                parser.feed(page)
                parser.close()
                self.assertEqual(parser.errors, [])
                self.assertEqual(parser.stack, [])
                svgs = re.findall(r"<svg .*?</svg>", page, re.S)
                self.assertGreaterEqual(len(svgs), 1)
                for svg in svgs:
                    self.assertEqual(ET.fromstring(svg).tag, SVG)
                run = os.path.basename(name)[:-len(".html")]
                self.assertIn(f"Written by rn50 report from bench/results/{REPORTS}/inputs/{run}.</p>", page)

    def test_each_ablation_report_has_its_tables(self):
        for name in [n for n in expected_outputs() if n.endswith("/report.md")]:
            with self.subTest(name):
                md = open(self.path(name)).read()
                self.assertIn("**Headline (batch 256)", md)
                self.assertIn("![images/s per configuration](images_per_s.svg)", md)
                runs = json.load(open(os.path.join(RESULTS, os.path.dirname(name), "ablation.json")))["runs"]
                per_run = [t for t in tables(md) if t[0][:3] == ["data", "batch", "configuration"]]
                self.assertEqual(len(per_run), 2, "the speed table and the utilisation table")
                for t in per_run:
                    self.assertEqual(len(t) - 2, len([r for r in runs if r.get("summary")]), "a row per run")

    def test_the_comparison_has_its_tables(self):
        md = open(self.path(f"{REPORTS}/compare/compare.md")).read()
        rows = json.load(open(self.path(f"{REPORTS}/compare/compare.json")))["rows"]
        self.assertGreaterEqual(len(rows), 2)
        for heading in ["## Speed", "## Utilisation", "## Cost", "## Where each row comes from"]:
            self.assertIn(heading, md)
        speed = tables(md.split("## Speed", 1)[1])[0]
        self.assertEqual(speed[0][:3], ["#", "machine", "configuration"])
        self.assertEqual([r[1] for r in speed[2:]], [r["machine"] for r in rows])

    def test_nothing_depends_on_the_output_folder(self):
        other = os.path.join(OPTS.work, "second")
        rebuild(other)
        for name in expected_outputs():
            with self.subTest(name):
                self.assertTrue(filecmp.cmp(self.path(name), os.path.join(other, name), shallow=False), name)
                self.assertNotIn(OPTS.work, open(self.path(name)).read())


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--rn50", required=True)
    p.add_argument("--work", required=True)
    OPTS, rest = p.parse_known_args()
    OPTS.work = os.path.abspath(OPTS.work)
    unittest.main(argv=[sys.argv[0]] + rest)
