#!/usr/bin/env python3
"""The switch ablation: what each of rn50's single-GPU switches buys on this machine.

Runs rn50 over a matrix of configurations (the baseline, each switch alone on top of it, all switches but
one, all switches) at two batch sizes, on synthetic data (compute alone) and on JPEG files (the whole
pipeline: generated ImageNet-sized JPEGs unless --data-root names a dataset). Each configuration runs in
one process for 1 + REPEATS epochs of a fixed number of steps; the first epoch (start-up, cuDNN autotuning,
graph capture) is dropped and the others are the repeats (median and spread reported).

Writes OUT/ablation.json (every epoch record of every run), OUT/report.md (the headline, a table, what each
switch bought) and two pictures: OUT/images_per_s.svg and OUT/step_split.svg. Standard library only.

  bench/ablation.py --rn50 build/rn50 --out bench/results/DATE-MACHINE [--quick] [--data-root DIR]
"""
import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys

SOURCE_CLAIM = 2.7  # "the right switches make an A100 2.7 times faster than a 3090"

# Each switch: the arguments that turn it on, and those of the baseline (off).
SWITCHES = {
    "tf32": (["--tf32=on"], ["--tf32=off"]),
    "fp16": (["--precision", "fp16"], ["--precision", "fp32"]),
    "channels_last": (["--channels-last=on"], ["--channels-last=off"]),
    "cudnn_benchmark": (["--cudnn-benchmark=on"], ["--cudnn-benchmark=off"]),
    "cuda_graph": (["--cuda-graph=on"], ["--cuda-graph=off"]),
    "loader": (["--workers=-1", "--pin-memory=on", "--prefetch=4"], ["--workers=0", "--pin-memory=off", "--prefetch=1"]),
}


def configurations(names):
    """baseline, each alone, all but one, all: (label, set of switches on)."""
    out = [("baseline", frozenset())]
    out += [(f"+{s}", frozenset([s])) for s in names]
    out += [(f"all-{s}", frozenset(names) - {s}) for s in names]
    out.append(("all", frozenset(names)))
    return out


def switch_args(on, names):
    args = []
    for s in names:
        args += SWITCHES[s][0] if s in on else SWITCHES[s][1]
    return args


def run_one(opts, data, data_args, batch, steps, label, on, names, log_dir):
    out_dir = os.path.join(opts.work, f"{label}_{batch}_{data}")
    cmd = [opts.rn50, "train", *data_args, "--model", opts.model, "--device", opts.device, "--batch-size", str(batch),
           "--epochs", str(1 + opts.repeats), "--max-steps", str(steps), "--warmup-epochs", "0",
           "--validate=off", "--log-every", "1000000", "--image-size", str(opts.image_size),
           "--val-resize", str(opts.image_size), "--out-dir", out_dir, *switch_args(on, names)]
    if data == "synthetic":
        cmd += ["--synthetic-images", str(batch * steps)]
    if os.path.exists(os.path.join(out_dir, "metrics.jsonl")):
        os.remove(os.path.join(out_dir, "metrics.jsonl"))  # metrics are appended to; start clean
    with open(os.path.join(log_dir, f"{label}_{batch}_{data}.log"), "w") as log:
        code = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT).returncode
    records = []
    metrics = os.path.join(out_dir, "metrics.jsonl")
    if os.path.exists(metrics):
        records = [json.loads(l) for l in open(metrics) if '"type":"epoch"' in l]
    return {"label": label, "switches": sorted(on), "batch": batch, "data": data, "steps": steps,
            "command": " ".join(cmd), "exit_code": code, "epochs": records[1:], "warmup_epoch": records[:1]}


def summarise(run):
    rates = [e["images_per_s"] for e in run["epochs"]]
    if not rates:
        return None
    med = statistics.median(rates)

    def per_image(key):
        vals = [e.get(key) for e in run["epochs"] if e.get(key) is not None]
        if not vals:
            return None
        return statistics.median(v / (e["images"]) for v, e in zip(vals, run["epochs"]))

    return {"median": med, "min": min(rates), "max": max(rates),
            "spread_pct": 100.0 * (max(rates) - min(rates)) / med if med else 0.0,
            "split_ms_per_image": {
                "data wait": (per_image("data_wait_s") or 0) * 1e3,
                "copy + normalise": (per_image("input_s") or 0) * 1e3,
                "compute": ((per_image("forward_backward_s") or 0) + (per_image("optimizer_s") or 0)) * 1e3,
                "communication": (per_image("communication_s") or 0) * 1e3}}


def svg_bars(path, title, groups, unit):
    """groups: list of (name, [(label, value)]) -> horizontal bars."""
    rows = [(g, l, v) for g, items in groups for l, v in items]
    width, bar_h, left = 900, 16, 330
    height = 40 + len(rows) * (bar_h + 4) + len(groups) * 14
    top = max([v for _, _, v in rows] + [1e-9])
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="11">',
             f'<text x="10" y="20" font-size="14">{title}</text>']
    y = 36
    for g, items in groups:
        parts.append(f'<text x="10" y="{y + 10}" font-weight="bold">{g}</text>')
        y += 14
        for label, value in items:
            w = (width - left - 90) * value / top
            parts.append(f'<text x="{left - 6}" y="{y + 12}" text-anchor="end">{label}</text>')
            parts.append(f'<rect x="{left}" y="{y}" width="{w:.1f}" height="{bar_h}" fill="#4878a8"/>')
            parts.append(f'<text x="{left + w + 4:.1f}" y="{y + 12}">{value:.0f} {unit}</text>')
            y += bar_h + 4
    parts.append("</svg>")
    open(path, "w").write("\n".join(parts))


def svg_stacked(path, title, rows):
    """rows: list of (label, {part: ms per image}) -> stacked horizontal bars."""
    colours = {"data wait": "#d95f02", "copy + normalise": "#7570b3", "compute": "#1b9e77", "communication": "#e7298a"}
    width, bar_h, left = 900, 16, 330
    height = 60 + len(rows) * (bar_h + 4)
    top = max([sum(p.values()) for _, p in rows] + [1e-9])
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="11">',
             f'<text x="10" y="20" font-size="14">{title}</text>']
    x = left
    for name, colour in colours.items():
        parts.append(f'<rect x="{x}" y="30" width="10" height="10" fill="{colour}"/><text x="{x + 14}" y="39">{name}</text>')
        x += 130
    y = 50
    for label, split in rows:
        parts.append(f'<text x="{left - 6}" y="{y + 12}" text-anchor="end">{label}</text>')
        x = left
        for name, colour in colours.items():
            w = (width - left - 90) * split.get(name, 0) / top
            parts.append(f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="{bar_h}" fill="{colour}"/>')
            x += w
        parts.append(f'<text x="{x + 4:.1f}" y="{y + 12}">{sum(split.values()):.3f} ms/img</text>')
        y += bar_h + 4
    parts.append("</svg>")
    open(path, "w").write("\n".join(parts))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rn50", default="build/rn50")
    p.add_argument("--out", required=True)
    p.add_argument("--work", default="/tmp/rn50-ablation")
    p.add_argument("--device", default="cuda:0")
    p.add_argument("--data-root", help="JPEG dataset (ImageNet layout) instead of generated files")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--model", default="resnet50")
    p.add_argument("--quick", action="store_true",
                   help="a smoke run of the tool itself: CPU, resnet18, 32 px, one batch size, one step, one repeat")
    opts = p.parse_args()
    if opts.quick:
        opts.device, opts.image_size, opts.model, opts.repeats, batches, steps = "cpu", 32, "resnet18", 1, [4], {4: 1}
    else:
        opts.image_size, batches, steps = 224, [256, 64], {256: 10, 64: 24}
    os.makedirs(opts.out, exist_ok=True)
    os.makedirs(opts.work, exist_ok=True)
    log_dir = os.path.join(opts.out, "logs")
    os.makedirs(log_dir, exist_ok=True)
    cpu = opts.device == "cpu"
    names = [s for s in SWITCHES if not (cpu and s == "fp16")]  # fp16 autocast needs CUDA

    data_root = opts.data_root
    if not data_root:
        data_root = os.path.join(opts.work, "jpeg")
        if not os.path.isdir(os.path.join(data_root, "train")):
            size = 48 if opts.quick else 375  # 375x500, like an average ImageNet photo
            per_class = 4 if opts.quick else 200
            subprocess.run([opts.rn50, "make-sample", "--out", data_root, "--classes", "16", "--per-class",
                            str(per_class), "--val-per-class", "1", "--size", str(size)], check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    datasets = [("synthetic", ["--data", "synthetic"]), ("jpeg", ["--data", "folder", "--data-root", data_root])]
    runs = []
    for data, data_args in datasets:
        for batch in batches:
            for label, on in configurations(names):
                run = run_one(opts, data, data_args, batch, steps[batch], label, on, names, log_dir)
                run["summary"] = summarise(run)
                runs.append(run)
                s = run["summary"]
                print(f"{data:9} b{batch:<4} {label:22} " + (f"{s['median']:9.0f} img/s  spread {s['spread_pct']:4.1f}%"
                      if s else f"failed (exit {run['exit_code']})"), flush=True)

    machine = {"date": datetime.date.today().isoformat(), "host": platform.node(), "device": opts.device,
               "command": " ".join(sys.argv)}
    json.dump({"machine": machine, "runs": runs}, open(os.path.join(opts.out, "ablation.json"), "w"), indent=1)

    # The report.
    lines = [f"# Switch ablation, {machine['date']} ({opts.device})", "", f"Command: `{machine['command']}`", ""]
    def get(data, batch, label):
        for r in runs:
            if r["data"] == data and r["batch"] == batch and r["label"] == label and r["summary"]:
                return r["summary"]["median"]
        return None
    head_batch = batches[0]
    for data in ["synthetic", "jpeg"]:
        base, best = get(data, head_batch, "baseline"), get(data, head_batch, "all")
        if base and best:
            lines.append(f"**{data}, batch {head_batch}: baseline {base:.0f} img/s, all switches {best:.0f} img/s: "
                         f"{best / base:.2f}x** (the source's claim: {SOURCE_CLAIM}x, A100 against RTX 3090).")
    lines += ["", "| data | batch | configuration | images/s (median) | min | max | spread | data wait | copy | compute | ms/img |",
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in runs:
        s = r["summary"]
        if not s:
            lines.append(f"| {r['data']} | {r['batch']} | {r['label']} | failed (exit {r['exit_code']}) | | | | | | | |")
            continue
        sp = s["split_ms_per_image"]
        lines.append(f"| {r['data']} | {r['batch']} | {r['label']} | {s['median']:.0f} | {s['min']:.0f} | {s['max']:.0f} | "
                     f"{s['spread_pct']:.1f}% | {sp['data wait']:.3f} | {sp['copy + normalise']:.3f} | {sp['compute']:.3f} | "
                     f"{sum(sp.values()):.3f} |")
    lines += ["", "## What each switch bought", "",
              "Alone: images/s of the baseline plus the switch, over the baseline. Last: all switches over all but this one.", "",
              "| data | batch | switch | alone | last |", "| --- | --- | --- | --- | --- |"]
    for data in ["synthetic", "jpeg"]:
        for batch in batches:
            base, best = get(data, batch, "baseline"), get(data, batch, "all")
            for s in names:
                alone, without = get(data, batch, f"+{s}"), get(data, batch, f"all-{s}")
                a = f"{alone / base:.2f}x" if alone and base else "-"
                l = f"{best / without:.2f}x" if best and without else "-"
                lines.append(f"| {data} | {batch} | {s} | {a} | {l} |")
    lines += ["", "Pictures: `images_per_s.svg`, `step_split.svg`. Every epoch record: `ablation.json`. Logs: `logs/`."]
    open(os.path.join(opts.out, "report.md"), "w").write("\n".join(lines) + "\n")

    groups = []
    for data in ["synthetic", "jpeg"]:
        for batch in batches:
            groups.append((f"{data}, batch {batch}", [(r["label"], r["summary"]["median"]) for r in runs
                                                      if r["data"] == data and r["batch"] == batch and r["summary"]]))
    svg_bars(os.path.join(opts.out, "images_per_s.svg"), "rn50: images/s per configuration (median)", groups, "img/s")
    svg_stacked(os.path.join(opts.out, "step_split.svg"), f"rn50: where a step's time goes, per image (batch {head_batch})",
                [(f"{r['data']} {r['label']}", r["summary"]["split_ms_per_image"]) for r in runs
                 if r["batch"] == head_batch and r["summary"]])
    failed = [r for r in runs if r["exit_code"] != 0]
    print(f"wrote {opts.out}/report.md ({len(runs)} runs, {len(failed)} failed)")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
