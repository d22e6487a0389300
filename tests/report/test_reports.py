#!/usr/bin/env python3
"""tests/report/test_reports.py: rn50 report and rn50 compare as a user runs them: the page of a fresh CPU run (made
by rn50 train itself) parses as HTML, its pictures as SVG, and its figures are the metrics file's, as are its
TensorBoard event file's (read by a reader of this file's own: framing, masked CRC-32C, Event's fields) and its
summary.csv's; and the samples that bench/results/rebuild.sh writes from the recorded runs in
bench/results/2026-12-01-reports/inputs agree with each other (a page is its row of compare.json, compare.md is
compare.json).

  python3 tests/report/test_reports.py --rn50 build/rn50 --work DIR
"""
import argparse
import csv
import html
import html.parser
import json
import os
import re
import shutil
import statistics
import struct
import subprocess
import sys
import unittest
import xml.etree.ElementTree as ET

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SAMPLES = "bench/results/2026-12-01-reports"
KEPT_PAGE = "h200-x2-fp16-cl-eager"  # a page whose run is a row of the comparison
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


def crc32c(data):
    """CRC-32C bit by bit, from the Castagnoli polynomial (reflected 0x82f63b78)."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def masked_crc32c(data):
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def protobuf_fields(data):
    """A protobuf message's fields as (number, wire type, value): varints and fixed widths as ints, others bytes."""
    fields, at = [], 0

    def varint():
        nonlocal at
        value = shift = 0
        while True:
            byte = data[at]
            at += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                return value

    while at < len(data):
        key = varint()
        number, wire = key >> 3, key & 7
        if wire == 0:
            fields.append((number, wire, varint()))
        elif wire in (1, 5):
            size = 8 if wire == 1 else 4
            fields.append((number, wire, int.from_bytes(data[at:at + size], "little")))
            at += size
        elif wire == 2:
            size = varint()
            fields.append((number, wire, data[at:at + size]))
            at += size
        else:
            raise ValueError(f"wire type {wire}")
    assert at == len(data), "a field runs past its message"
    return fields


def read_event_file(path):
    """TFRecord records with their masked CRC-32Cs checked, each decoded as event.proto's Event: a list of dicts with
    wall_time, step and file_version or the Summary's (tag, simple_value) pairs."""
    with open(path, "rb") as f:
        raw = f.read()
    events, at = [], 0
    while at < len(raw):
        header = raw[at:at + 8]
        assert int.from_bytes(raw[at + 8:at + 12], "little") == masked_crc32c(header), f"length CRC at {at}"
        length = int.from_bytes(header, "little")
        data = raw[at + 12:at + 12 + length]
        assert int.from_bytes(raw[at + 12 + length:at + 16 + length], "little") == masked_crc32c(data), f"CRC at {at}"
        at += 16 + length
        event = {"step": 0, "values": []}
        for number, wire, value in protobuf_fields(data):
            if number == 1:
                assert wire == 1
                event["wall_time"] = struct.unpack("<d", value.to_bytes(8, "little"))[0]
            elif number == 2:
                event["step"] = value
            elif number == 3:
                event["file_version"] = value.decode()
            elif number == 5:
                for vnumber, _, v in protobuf_fields(value):
                    assert vnumber == 1
                    parts = {n: (w, x) for n, w, x in protobuf_fields(v)}
                    assert parts[2][0] == 5, "simple_value is a float"
                    simple_value = struct.unpack("<f", parts[2][1].to_bytes(4, "little"))[0]
                    event["values"].append((parts[1][1].decode(), simple_value))
        events.append(event)
    return events


def as_float32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def assert_offline_page(test, page):
    """The page parses (every element closed, in order), its 13 pictures as SVG; it loads nothing, runs no script."""
    parser = StrictTags()
    parser.feed(page)
    parser.close()
    test.assertEqual(parser.errors, [])
    test.assertEqual(parser.stack, [])
    svgs = re.findall(r"<svg .*?</svg>", page, re.S)
    test.assertEqual(len(svgs), 13)
    for svg in svgs:
        test.assertEqual(ET.fromstring(svg).tag, "{http://www.w3.org/2000/svg}svg")
    test.assertNotIn("https://", page)
    test.assertEqual(re.findall(r"<script[^>]*>", page), ['<script type="application/json" id="rn50-data">'])


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
        assert_offline_page(self, self.page)

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

    def test_its_tensorboard_events_are_the_metrics_files(self):
        files = [f for f in os.listdir(self.run_dir) if "tfevents" in f]
        self.assertEqual(len(files), 1, files)
        self.assertRegex(files[0], r"^events\.out\.tfevents\.\d{10}\.")
        events = read_event_file(os.path.join(self.run_dir, files[0]))
        self.assertEqual(events[0].get("file_version"), "brain.Event:2")
        points = {}
        for e in events[1:]:
            self.assertEqual(len(e["values"]), 1)  # one scalar an Event
            tag, value = e["values"][0]
            points.setdefault(tag, []).append((e["step"], value))
        records = metrics_records(f"{self.run_dir}/metrics.jsonl")
        for tag, key in [("train/loss", "loss"), ("train/lr", "lr"), ("train/images_per_s", "images_per_s")]:
            self.assertEqual(points[tag], [(r["step"], as_float32(r[key])) for r in records["step"]], tag)
        for tag, key, scale in [("epoch/train_loss", "train_loss", 1), ("epoch/val_loss", "val_loss", 1),
                                ("epoch/top1", "top1", 100), ("epoch/top5", "top5", 100),
                                ("epoch/images_per_s", "images_per_s", 1), ("epoch/data_wait_s", "data_wait_s", 1)]:
            self.assertEqual(points[tag], [(r["epoch"], as_float32(scale * r[key])) for r in records["epoch"]], tag)
        self.assertNotIn("train/gpu_util_pct", points)  # null on the CPU: left out, never 0

    def test_summary_csv_is_the_metrics_files_epochs(self):
        with open(f"{self.run_dir}/summary.csv") as f:
            rows = list(csv.DictReader(f))
        records = metrics_records(f"{self.run_dir}/metrics.jsonl")["epoch"]
        self.assertEqual(len(rows), len(records))
        for row, r in zip(rows, records):
            self.assertEqual(list(row), ["epoch", "train_loss", "eval_loss", "eval_top1", "eval_top5", "lr",
                                         "images_per_s", "wall_s", "data_wait_s"])
            self.assertEqual(int(row["epoch"]), r["epoch"])
            for column, key in [("train_loss", "train_loss"), ("eval_loss", "val_loss"), ("lr", "lr"),
                                ("images_per_s", "images_per_s"), ("wall_s", "wall_s"), ("data_wait_s", "data_wait_s")]:
                self.assertEqual(float(row[column]), r[key], column)
            self.assertAlmostEqual(float(row["eval_top1"]), 100 * r["top1"], places=9)
            self.assertAlmostEqual(float(row["eval_top5"]), 100 * r["top5"], places=9)

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


class RebuiltSamples(unittest.TestCase):
    """A page and the comparison as bench/results/rebuild.sh writes them from the recorded runs: each consistent on
    its own and with the other."""
    @classmethod
    def setUpClass(cls):
        out = os.path.join(OPTS.work, "rebuilt")
        shutil.rmtree(out, ignore_errors=True)
        subprocess.run([os.path.join(ROOT, "bench", "results", "rebuild.sh"), OPTS.rn50, out], check=True,
                       stdout=subprocess.DEVNULL)
        cls.samples = os.path.join(out, os.path.basename(SAMPLES))
        with open(os.path.join(cls.samples, "compare", "compare.json")) as f:
            cls.compare = json.load(f)
        with open(os.path.join(cls.samples, "reports", f"{KEPT_PAGE}.html")) as f:
            cls.page = f.read()
        cls.parser = StrictTags()
        cls.parser.feed(cls.page)

    def test_the_page_parses_and_every_picture_is_svg(self):
        assert_offline_page(self, self.page)

    def test_the_page_is_its_row_of_the_comparison(self):
        rows = [r for r in self.compare["rows"] if r["configuration"] == KEPT_PAGE]
        self.assertEqual(len(rows), 1, [r["configuration"] for r in self.compare["rows"]])
        row = rows[0]
        self.assertTrue(row["source"].startswith(f"{SAMPLES}/inputs/{KEPT_PAGE} ("), row["source"])
        self.assertIn(f"Written by rn50 report from {SAMPLES}/inputs/{KEPT_PAGE}.</p>", self.page)
        epochs = json.loads(self.parser.data_json)["epochs"]
        self.assertTrue(row["first_epoch_dropped"])
        measured = epochs[1:]
        self.assertEqual(row["epochs_measured"], len(measured))
        self.assertGreaterEqual(len(measured), 1)
        median = lambda key: statistics.median(e[key] for e in measured)
        self.assertEqual(row["images_per_s"], median("images_per_s"))
        for key, value in row["utilisation"].items():
            with self.subTest(key):
                self.assertIsNotNone(value)
                self.assertEqual(value, median(key))
        self.assertAlmostEqual(row["allreduce_ms_per_step"],
                               1000 * statistics.median(e["communication_s"] / e["steps"] for e in measured), places=9)
        self.assertAlmostEqual(row["imagenet_epoch_s"], self.compare["imagenet_train_images"] / row["images_per_s"],
                               places=6)
        self.assertIn(f" {row['images_per_s']:.0f} images/s (median of the epochs after the first)", self.page)
        reading = re.search(r'<p class="reading" id="reading"><b>What the utilisation says:</b> (.*?)</p>', self.page)
        self.assertIsNotNone(reading)
        self.assertEqual(html.unescape(reading.group(1)), row["reading"])

    def test_compare_md_and_its_pictures_are_compare_json(self):
        with open(os.path.join(self.samples, "compare", "compare.md")) as f:
            md = f.read()
        rows = self.compare["rows"]
        self.assertTrue({"CPU (2 cores)", "H200 x1", "H200 x2"} <= {r["machine"] for r in rows})
        speed = md.split("## Speed", 1)[1].split("\n## ", 1)[0]
        table = re.findall(r"^\| (\d+) \| ([^|]+) \| ([^|]+) \| [^|]+ \| (\d+) x (\d+) \|", speed, re.M)
        self.assertEqual(table, [(str(i), r["machine"], r["configuration"], str(r["batch"]), str(r["processes"]))
                                 for i, r in enumerate(rows, 1)])
        sources = md.split("## Where each row comes from", 1)[1]
        for i, r in enumerate(rows, 1):
            self.assertIn(f"{i}. {r['source']}", sources)
        for svg in ["throughput.svg", "utilisation.svg", "cost.svg"]:
            with self.subTest(svg):
                self.assertEqual(ET.parse(os.path.join(self.samples, "compare", svg)).getroot().tag,
                                 "{http://www.w3.org/2000/svg}svg")


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--rn50", required=True)
    p.add_argument("--work", required=True)
    OPTS, rest = p.parse_known_args()
    unittest.main(argv=[sys.argv[0]] + rest)
