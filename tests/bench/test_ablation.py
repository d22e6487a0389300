#!/usr/bin/env python3
"""tests/bench/test_ablation.py: runs bench/ablation.py --quick (the whole matrix on the CPU) and checks what it
writes: ablation.json, report.md (headline with the ratio next to the source's 2.7x, costs, both pictures
referenced) and the two SVG pictures, parsed as XML. Also the GPU matrix's shape: a switch that needs another
(wgrad_stream, conv_prologue, batched_casts and fuse_stem_pool, which act only with fusion) is only removed from the
full set, never run alone on the baseline. And a stop by SIGTERM mid-run: the command's time kept, the run killed.

  tests/bench/test_ablation.py --rn50 build/rn50 --out DIR --work DIR
"""
import argparse
import json
import os
import re
import signal
import stat
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

SVG = "{http://www.w3.org/2000/svg}"
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def check(condition, message):
    if not condition:
        print(f"FAILED: {message}", file=sys.stderr)
        sys.exit(1)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rn50", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--work", required=True)
    opts = p.parse_args()
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    import ablation
    labels = [label for label, _ in ablation.configurations(list(ablation.SWITCHES))]
    for switch in ablation.REQUIRES:
        check(f"all-{switch}" in labels and f"+{switch}" not in labels,
              f"{switch}: expected only all-{switch} in the GPU matrix, got {labels}")
    check(len(labels) == 2 * len(ablation.SWITCHES) + 2 - len(ablation.REQUIRES),
          f"{len(labels)} configurations for {len(ablation.SWITCHES)} switches")
    for name in ["report.md", "images_per_s.svg", "step_split.svg", "ablation.json"]:
        if os.path.exists(os.path.join(opts.out, name)):
            os.remove(os.path.join(opts.out, name))  # nothing left over from an earlier run counts
    code = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "ablation.py"), "--rn50", opts.rn50, "--out", opts.out,
                           "--work", opts.work, "--quick", "--price-per-hour", "2.5"]).returncode
    check(code == 0, f"ablation.py --quick exited with {code}")

    runs = json.load(open(os.path.join(opts.out, "ablation.json")))["runs"]
    # Quick mode on the CPU: baseline, 7 alone, 7 all-but-one, all (no fp16 nor the switches that need fusion), on JPEG
    # data; the same on synthetic data but for +loader and all-loader (no loader there: they would equal the baseline
    # and "all").
    check(len(runs) == 30, f"30 runs expected, got {len(runs)}")
    check(not any(r["data"] == "synthetic" and "loader" in r["label"] for r in runs), "a loader run on synthetic data")
    check(all(r["summary"] for r in runs), "a run without a summary")

    bars = ET.parse(os.path.join(opts.out, "images_per_s.svg")).getroot()
    check(bars.tag == SVG + "svg", f"images_per_s.svg: root is {bars.tag}")
    medians = [r for r in bars.iter(SVG + "rect") if r.get("fill") == "#4878a8"]
    check(len(medians) == len(runs), f"images_per_s.svg: {len(medians)} bars for {len(runs)} runs")
    check(len(list(bars.iter(SVG + "line"))) == 3 * len(runs), "images_per_s.svg: one error bar (3 lines) per run")
    widest = max(float(r.get("width")) for r in medians)
    fastest = max(runs, key=lambda r: r["summary"]["median"])
    check(float(medians[runs.index(fastest)].get("width")) >= widest - 0.1,  # bars in run order, widths to 0.1
          "images_per_s.svg: the fastest run's bar is not the widest")

    split = ET.parse(os.path.join(opts.out, "step_split.svg")).getroot()
    check(split.tag == SVG + "svg", f"step_split.svg: root is {split.tag}")
    parts = [r for r in split.iter(SVG + "rect") if r.find(SVG + "title") is not None]
    check(len(parts) == 5 * len(runs), f"step_split.svg: {len(parts)} bar parts for {len(runs)} runs (5 each)")
    texts = " ".join(t.text or "" for t in split.iter(SVG + "text"))
    for part in ["data wait", "host-to-device copy", "compute", "communication", "between steps"]:
        check(part in texts, f"step_split.svg: no legend entry '{part}'")

    report = open(os.path.join(opts.out, "report.md")).read()
    headline = [l for l in report.splitlines() if l.startswith("**Headline")]
    check(len(headline) == 1, "report.md: no headline line")
    check(re.search(r"\): \d+\.\d\dx on JPEG files .*; \d+\.\d\dx on synthetic data .*The source claims 2\.7x", headline[0]),
          f"no ratios next to the source's 2.7x in: {headline[0]}")
    check("optimized configuration (TF32, " in headline[0] and "baseline (true FP32, " in headline[0],
          f"baseline or optimized unnamed: {headline[0]}")
    check("alone on top of the baseline: tf32 " in report and "removing it from the full set costs: " in report,
          "report.md: no 'which switch bought what'")
    check(re.search(r"Cost of one ImageNet epoch \(1,281,167 images\) at 2\.5/h", report), "report.md: no cost section")
    check(re.search(r"- jpeg: baseline [\d.e+-]+ \([\d.]+ h\), optimized [\d.e+-]+ \([\d.]+ h\)", report),
          "report.md: no baseline and optimized cost")
    check("(images_per_s.svg)" in report and "(step_split.svg)" in report, "report.md: pictures not referenced")
    check(all(r["process_s"] > 0 for r in runs), "a run without its process time")
    check(re.search(r"Time: [\d.]+ minutes for 30 runs", report), "report.md: no time for the matrix")
    check(re.search(r"The whole command \(every call of it, with --resume\): [\d.]+ minutes", report),
          "report.md: no time for the whole command")

    # --render writes the same report again from ablation.json alone (a run cut short by a time limit).
    os.remove(os.path.join(opts.out, "report.md"))
    code = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "ablation.py"), "--out", opts.out, "--render",
                           "--price-per-hour", "2.5"]).returncode
    check(code == 0, f"ablation.py --render exited with {code}")
    check(open(os.path.join(opts.out, "report.md")).read() == report, "report.md from --render differs")

    # --resume keeps the successful runs of a cut-short run and makes only the missing ones; the kept runs after
    # the last missing one stay in ablation.json too.
    saved = json.load(open(os.path.join(opts.out, "ablation.json")))
    middle = len(saved["runs"]) // 2
    missing = [saved["runs"].pop(middle), saved["runs"].pop(0)]
    json.dump(saved, open(os.path.join(opts.out, "ablation.json"), "w"))
    resume = [sys.executable, os.path.join(ROOT, "bench", "ablation.py"), "--rn50", opts.rn50, "--out", opts.out,
              "--work", opts.work, "--quick", "--resume"]
    result = subprocess.run(resume, capture_output=True, text=True)
    check(result.returncode == 0, f"ablation.py --resume exited with {result.returncode}: {result.stderr}")
    check(f"resuming: {len(runs) - 2} successful runs" in result.stdout,
          f"resume kept other than {len(runs) - 2} runs: {result.stdout}")
    check(result.stdout.count(" img/s ") == 2, f"resume ran other than the 2 missing runs: {result.stdout}")
    resumed = json.load(open(os.path.join(opts.out, "ablation.json")))
    check(len(resumed["runs"]) == len(runs),
          f"ablation.json holds {len(resumed['runs'])} runs after resuming, not {len(runs)}")
    check([(r["data"], r["label"]) for r in resumed["runs"]] == [(r["data"], r["label"]) for r in runs],
          "resumed runs out of order")
    kept = [r for r in resumed["runs"] if (r["data"], r["label"]) not in {(m["data"], m["label"]) for m in missing}]
    check(kept == saved["runs"], "resume changed a kept run")
    check("then, resumed:" in resumed["machine"]["command"], "the resumed command is not recorded")
    # Runs made with other options are not mixed in: one line, nonzero exit, the file untouched.
    resumed["runs"][0]["steps"] = 5
    json.dump(resumed, open(os.path.join(opts.out, "ablation.json"), "w"))
    other = subprocess.run(resume, capture_output=True, text=True)
    check(other.returncode != 0 and "other settings" in other.stderr and "5 steps" in other.stderr,
          f"resume over runs made with other options was not refused: {other.returncode} {other.stderr}")
    check(json.load(open(os.path.join(opts.out, "ablation.json"))) == resumed, "a refused resume changed the file")
    check_stopped_command_keeps_its_time(opts.work)
    print("ablation quick run: report and pictures well-formed; resume redoes only what is missing; a stopped "
          "command keeps its time")


def check_stopped_command_keeps_its_time(work):
    """A time limit's SIGTERM in the middle of a run: ablation.json records the command's time up to the signal (which
    --resume adds to), the exit status says which signal, and the run in flight does not outlive the command."""
    folder = os.path.join(work, "stopped")
    os.makedirs(folder, exist_ok=True)
    fake = os.path.join(folder, "slow-rn50")
    pid_file = os.path.join(folder, "run.pid")
    for leftover in [pid_file, os.path.join(folder, "out", "ablation.json")]:
        if os.path.exists(leftover):
            os.remove(leftover)
    with open(fake, "w") as f:  # make-sample succeeds at once; a training run outlasts the test
        f.write(f'#!/bin/sh\n[ "$1" = make-sample ] && exit 0\necho $$ > {pid_file}\nexec sleep 60\n')
    os.chmod(fake, os.stat(fake).st_mode | stat.S_IXUSR)
    out = os.path.join(folder, "out")
    started = time.monotonic()
    command = subprocess.Popen([sys.executable, os.path.join(ROOT, "bench", "ablation.py"), "--rn50", fake,
                                "--out", out, "--work", os.path.join(folder, "work"), "--quick"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while not os.path.exists(pid_file) and time.monotonic() < deadline:
        time.sleep(0.05)
    check(os.path.exists(pid_file), "the fake rn50's first run never started")
    time.sleep(1.0)  # a second inside the run, which the recorded time must include
    command.send_signal(signal.SIGTERM)
    code = command.wait(timeout=30)
    elapsed = time.monotonic() - started
    check(code == 128 + signal.SIGTERM, f"ablation.py stopped by SIGTERM exited with {code}")
    saved = json.load(open(os.path.join(out, "ablation.json")))
    recorded = saved["machine"]["command_s"]
    check(1.0 <= recorded <= elapsed, f"command_s {recorded} after a stop at {elapsed:.2f} s (at least 1.0 expected)")
    check(saved["runs"] == [], f"a run cut short was recorded: {saved['runs']}")
    run_pid = int(open(pid_file).read())
    gone = False
    for _ in range(100):  # the kill is sent before ablation.py exits; the process may take a moment to be reaped
        try:
            os.kill(run_pid, 0)
        except ProcessLookupError:
            gone = True
            break
        time.sleep(0.05)
    check(gone, f"the run in flight (pid {run_pid}) outlived the stopped command")


if __name__ == "__main__":
    main()
