#!/usr/bin/env python3
"""The switch ablation: what each of rn50's single-GPU switches buys on this machine.

Runs rn50 over a matrix of configurations (the baseline, each switch alone on top of it, all switches but
one, all switches) at two batch sizes, on synthetic data (compute alone) and on JPEG files (the whole
pipeline: generated ImageNet-sized JPEGs unless --data-root names a dataset). Each configuration runs in
one process for 1 + REPEATS epochs of a fixed number of steps; the first epoch (start-up, cuDNN autotuning,
graph capture) is dropped and the others are the repeats (median and spread reported).

Writes OUT/ablation.json (every epoch record of every run, and the GPU's name), OUT/report.md (the headline, what
each switch bought, what the GPU was doing, a table; every configuration's utilisation: NVML's GPU utilisation next to
SM, tensor-pipe and DRAM activity, power and clock, with a sentence reading them; with --price-per-hour the cost of an
ImageNet epoch) and two self-contained SVG pictures:
OUT/images_per_s.svg (median images/s per configuration, min..max as an error bar) and OUT/step_split.svg
(each configuration's step time as data wait, host-to-device copy, compute, communication, between steps). Standard
library only (no matplotlib).

  bench/ablation.py --rn50 build/rn50 --out bench/results/DATE-ablation [--quick] [--steps 256:6,64:14] [--data-root DIR]
                    [--price-per-hour P] [--resume] [--render]
"""
import argparse
import datetime
import json
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import time
from xml.sax.saxutils import escape

SOURCE_CLAIM = 2.7  # "the right switches make an A100 2.7 times faster than a 3090"
IMAGENET_TRAIN_IMAGES = 1281167

# Each switch: the arguments that turn it on, and those of the baseline (off).
SWITCHES = {
    "tf32": (["--tf32=on"], ["--tf32=off"]),
    "fp16": (["--precision", "fp16"], ["--precision", "fp32"]),
    "channels_last": (["--channels-last=on"], ["--channels-last=off"]),
    "cudnn_benchmark": (["--cudnn-benchmark=on"], ["--cudnn-benchmark=off"]),
    "cuda_graph": (["--cuda-graph=on"], ["--cuda-graph=off"]),
    "fusion": (["--fusion=conv"], ["--fusion=off"]),
    "wgrad_stream": (["--wgrad-stream=on"], ["--wgrad-stream=off"]),
    "conv_prologue": (["--conv-prologue=timed"], ["--conv-prologue=fused"]),
    "batched_casts": (["--batched-casts=on"], ["--batched-casts=off"]),
    "stem_channels": (["--stem-channels", "4"], ["--stem-channels", "3"]),
    "fuse_stem_pool": (["--fuse-stem-pool=on"], ["--fuse-stem-pool=off"]),
    "loader": (["--workers=-1", "--pin-memory=on", "--prefetch=4"], ["--workers=0", "--pin-memory=off", "--prefetch=1"]),
}


# A switch that acts only with another on (the weight gradients' second stream, the prologues' timed placement and the
# batched weight casts are fusion: conv's; the stem's BatchNorm inside its pool needs fusion): not run alone on the
# baseline, where it would equal the baseline; measured by removing it from the full set.
REQUIRES = {"wgrad_stream": "fusion", "conv_prologue": "fusion", "batched_casts": "fusion", "fuse_stem_pool": "fusion"}


def applies(data, switch):
    """Synthetic batches are made on the device: there is no loader to switch."""
    return not (data == "synthetic" and switch == "loader")


def configurations(names):
    """baseline, each alone, all but one, all: (label, set of switches on)."""
    out = [("baseline", frozenset())]
    out += [(f"+{s}", frozenset([s])) for s in names if s not in REQUIRES]
    out += [(f"all-{s}", frozenset(names) - {s}) for s in names]
    out.append(("all", frozenset(names)))
    return out


def switch_args(on, names):
    args = []
    for s in names:
        args += SWITCHES[s][0] if s in on else SWITCHES[s][1]
    return args


def settings_mismatch(run, opts, steps):
    """Why a saved run was not made with these options ("" when it was): steps, repeats, model, device, size."""
    if run["steps"] != steps.get(run["batch"]):
        return f"{run['steps']} steps, these options make {steps.get(run['batch'])}"
    if run["exit_code"] == 0 and len(run["epochs"]) != opts.repeats:
        return f"{len(run['epochs'])} repeats, these options make {opts.repeats}"
    words = run["command"].split()
    for flag, value in [("--model", opts.model), ("--device", opts.device), ("--image-size", str(opts.image_size))]:
        got = words[words.index(flag) + 1] if flag in words else None
        if got != value:
            return f"{flag} {got}, these options give {value}"
    return ""


def run_one(opts, data, data_args, batch, steps, label, on, names, log_dir):
    out_dir = os.path.join(opts.work, f"{label}_{batch}_{data}")
    cmd = [opts.rn50, "train", *data_args, "--model", opts.model, "--device", opts.device, "--batch-size", str(batch),
           "--epochs", str(1 + opts.repeats), "--max-steps", str(steps), "--warmup-epochs", "0",
           "--validate=off", "--log-every", "1000000", "--image-size", str(opts.image_size),
           "--val-resize", str(opts.image_size), "--out-dir", out_dir, "--checkpoint=off", *switch_args(on, names),
           # One plan cache for the matrix: fusion: conv's plans and prologues are timed by the first run that meets
           # each shape and taken by the others (the timed epochs come after the first either way).
           "--plan-cache", os.path.join(opts.work, "fusion-conv-plans.txt")]
    if data == "synthetic":
        cmd += ["--synthetic-images", str(batch * steps)]
    if os.path.exists(os.path.join(out_dir, "metrics.jsonl")):
        os.remove(os.path.join(out_dir, "metrics.jsonl"))  # metrics are appended to; start clean
    # No '+' in file names: some tools (the GPU machine's file transfer among them) refuse it.
    with open(os.path.join(log_dir, f"{label.replace('+', 'only-')}_{batch}_{data}.log"), "w") as log:
        started = time.monotonic()
        code = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT).returncode
        process_s = time.monotonic() - started
    records = []
    metrics = os.path.join(out_dir, "metrics.jsonl")
    if os.path.exists(metrics):
        records = [json.loads(l) for l in open(metrics) if '"type":"epoch"' in l]
    # The start table's device row ("NVIDIA H200 (sm_90, ...)", or "cpu"), for the machine's name.
    device = re.search(r"\] \[info\]\s+\(device\)\s+(.*)", open(log.name).read())
    return {"label": label, "switches": sorted(on), "batch": batch, "data": data, "steps": steps,
            "command": " ".join(cmd), "exit_code": code, "epochs": records[1:], "warmup_epoch": records[:1],
            "process_s": process_s, "device": device.group(1).strip() if device else ""}


# The parts of a step in the split picture: record keys (seconds per epoch) summed into each part.
STEP_PARTS = {
    "data wait": ["data_wait_s"],
    "host-to-device copy": ["input_s"],
    "compute": ["forward_backward_s", "optimizer_s"],
    "communication": ["communication_s"],
    "between steps": ["between_steps_s"],  # the device waiting for the host to queue the next step
}
PART_COLOURS = {"data wait": "#d95f02", "host-to-device copy": "#7570b3", "compute": "#1b9e77", "communication": "#e7298a",
                "between steps": "#666666"}


def summarise(run):
    epochs = run["epochs"]
    rates = [e["images_per_s"] for e in epochs]
    if not rates:
        return None
    med = statistics.median(rates)

    def per_step_ms(keys):
        # Median over the repeats; a key that is null (unavailable, e.g. communication on one process) counts 0.
        return statistics.median(sum(e.get(k) or 0 for k in keys) / e["steps"] for e in epochs) * 1e3

    return {"median": med, "min": min(rates), "max": max(rates),
            "spread_pct": 100.0 * (max(rates) - min(rates)) / med if med else 0.0,
            "wall_ms_per_step": per_step_ms(["wall_s"]),
            "split_ms_per_step": {part: per_step_ms(keys) for part, keys in STEP_PARTS.items()}}


# The utilisation columns and their reading: the rules of report/reading.cpp (rn50 compare, rn50 report), held to the
# same cases by tests/fixtures/utilisation_readings.json. (heading, the sampler's metric, unit); the epoch records'
# key is the metric + "_mean", and each figure is the median of the repeats.
UTIL_COLUMNS = [("GPU util (NVML)", "gpu_util_pct", "%"), ("memory util (NVML)", "mem_bw_util_pct", "%"),
                ("SM active", "sm_util_pct", "%"), ("SM occupancy", "sm_occupancy_pct", "%"),
                ("tensor active", "tensor_util_pct", "%"), ("DRAM bandwidth", "dram_bw_util_pct", "%"),
                ("power", "power_w", " W"), ("SM clock", "sm_clock_mhz", " MHz")]
BUSY, KEPT_BUSY, SM_FILLED, NO_TENSOR, DRAM_BOUND, INPUT_WAIT = 80, 95, 60, 2, 70, 0.10


def utilisation(run):
    """{metric: median of the epoch means, or None where unavailable}, and the input wait's share of the wall time."""
    def med(values):
        values = [v for v in values if v is not None]
        return statistics.median(values) if values else None
    u = {metric: med(e.get(metric + "_mean") for e in run["epochs"]) for _, metric, _ in UTIL_COLUMNS}
    wait = med(e["data_wait_s"] / e["wall_s"] for e in run["epochs"] if e.get("data_wait_s") is not None and e.get("wall_s"))
    return u, wait


def format_figure(unit, value):
    if value is None:
        return "unavailable"
    return f"{value:.1f}%" if unit == "%" else f"{value:.0f}{unit}"


def switch_facts(command):
    """What an rn50 command line switched: precision, tf32, fusion, cuda_graph and channels_last (None: not given)."""
    words, settings = command.split(), {}
    for i, w in enumerate(words):
        if not w.startswith("--") or len(w) < 3:
            continue
        key, _, value = w[2:].partition("=")
        if not value:
            value = words[i + 1] if i + 1 < len(words) and not words[i + 1].startswith("--") else "on"
        settings[key.replace("-", "_")] = value
    flag = lambda k: None if k not in settings else settings[k] == "on"
    return {"precision": settings.get("precision", ""), "tf32": settings.get("tf32", ""),
            "fusion": settings.get("fusion", ""), "cuda_graph": flag("cuda_graph"),
            "channels_last": flag("channels_last"), "cuda": settings.get("device", "cuda").startswith("cuda")}


def read_utilisation(cuda, u, wait, facts):
    """The sentence that reads a configuration's utilisation for the user (report/reading.cpp's rules)."""
    waits = wait is not None and wait >= INPUT_WAIT
    if not cuda:
        return "A CPU run: GPU utilisation does not apply." + (
            f" The step waited for its input {100 * wait:.0f}% of the time." if waits else "")
    gpu = u.get("gpu_util_pct")
    if gpu is None:
        return "No NVML readings were recorded (NVML unavailable, or a MIG instance)."
    head = f"The GPU was busy {gpu:.1f}% of the time (NVML)"
    if waits and gpu < BUSY:
        return head + (f", and the step waited for its input {100 * wait:.0f}% of the time: the input pipeline is the "
                       "limit (more decode workers, pin_memory, prefetch, or decode: gpu).")
    if gpu < BUSY:
        return head + (f": it sat idle {100 - gpu:.0f}% of the time, waiting for the host to queue work ("
                       + ("" if facts.get("cuda_graph") else "a CUDA graph or ") + "a larger batch closes the gaps).")
    overlap = ""  # the host's wait costs time only where the GPU ran out of queued steps meanwhile
    if waits and gpu >= KEPT_BUSY:
        overlap = (f" The host waited for input {100 * wait:.0f}% of the time, but the GPU stayed busy: the wait "
                   "overlapped queued steps.")
    elif waits:
        overlap = (f" The host waited for input {100 * wait:.0f}% of the time and the GPU was idle {100 - gpu:.0f}%: "
                   "part of the wait is lost time.")
    tensor, sm, dram = u.get("tensor_util_pct"), u.get("sm_util_pct"), u.get("dram_bw_util_pct")
    if tensor is None:
        return head + (", but SM and tensor-core activity were not recorded (GPM: Hopper and newer): NVML's figure "
                       "only says that some kernel was running, not how much of the GPU it used.") + overlap
    sms = f", its SMs {sm:.1f}%" if sm is not None else ""
    if sm is not None and sm < SM_FILLED:
        return head + sms + (f": kernels ran but left {100 - sm:.0f}% of the SMs idle (small kernels: a larger batch "
                             "fills them).") + overlap
    if tensor < NO_TENSOR:
        how = ("in true FP32 (tf32: off)" if facts.get("precision") == "fp32" and facts.get("tf32") == "off"
               else "on the ordinary FP32 units")
        return (head + f" but its tensor cores only {tensor:.1f}%: the step runs {how}; TF32 or fp16/bf16 autocast "
                "moves the convolutions onto the tensor cores." + overlap)
    tensors = f", its tensor cores {tensor:.1f}%"
    if dram is not None and dram >= DRAM_BOUND:
        return (head + sms + tensors + f" and DRAM bandwidth {dram:.1f}%: memory bandwidth is the limit"
                + (" (fusion: bn saves memory passes)." if facts.get("fusion") == "off" else ".") + overlap)
    dram_text = f" and DRAM bandwidth {dram:.1f}%" if dram is not None else ""
    if waits and gpu < KEPT_BUSY:
        return (head + sms + tensors + dram_text + f": the input is what is left to remove: the host waited for it "
                f"{100 * wait:.0f}% of the time and the GPU was idle {100 - gpu:.0f}% (more decode workers, pin_memory, "
                "prefetch, or decode: gpu).")
    ways = [w for w, off in [("fp16 or bf16 autocast", facts.get("precision") == "fp32"),
                             ("channels_last", facts.get("channels_last") is False),
                             ("fusion: bn", facts.get("fusion") == "off")] if off]
    if not facts.get("precision") and not facts.get("fusion"):
        advice = " (faster kernels: fp16/bf16, channels_last, fusion: bn)"
    else:
        advice = f" (faster kernels: {', '.join(ways)})" if ways else ""
    return (head + sms + tensors + dram_text + ": no idle time or input wait is left to remove; what remains is inside the kernels" + advice + "."
            + overlap)


def read_across(rows):
    """rows: [(name, images/s, utilisation)]: where NVML's figure ranks the configurations against their speed."""
    known = [r for r in rows if r[2].get("gpu_util_pct") is not None and r[2].get("tensor_util_pct") is not None
             and r[1] > 0]
    if not known:
        return ""
    slow, fast = min(known, key=lambda r: r[1]), max(known, key=lambda r: r[1])
    if fast[1] < 1.5 * slow[1] or fast[2]["gpu_util_pct"] > slow[2]["gpu_util_pct"] + 2:
        return ""
    return (f"NVML's GPU utilisation (what nvidia-smi shows) reads {slow[2]['gpu_util_pct']:.1f}% for {slow[0]} and "
            f"{fast[2]['gpu_util_pct']:.1f}% for {fast[0]}, which trains {fast[1] / slow[1]:.2f}x faster; their tensor "
            f"cores read {slow[2]['tensor_util_pct']:.1f}% and {fast[2]['tensor_util_pct']:.1f}%. NVML counts the time "
            "in which any kernel ran, not how much of the GPU it used: read the SM and tensor-core columns.")


def svg_document(width, height, body):
    return "\n".join([f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
                      f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">',
                      f'<rect width="{width}" height="{height}" fill="white"/>', *body, "</svg>"]) + "\n"


def svg_bars(path, title, groups, unit):
    """groups: [(group name, [(label, median, low, high)])] -> horizontal bars, low..high as an error bar."""
    width, bar_h, left, right = 960, 16, 170, 170
    n = sum(len(items) for _, items in groups)
    height = 50 + n * (bar_h + 4) + len(groups) * 16
    top = max([high for _, items in groups for *_, high in items] + [1e-9])
    scale = (width - left - right) / top
    body = [f'<text x="10" y="20" font-size="14">{escape(title)}</text>',
            f'<text x="10" y="36" fill="#555">bar: median of the repeats; whisker: min..max</text>']
    y = 46
    for group, items in groups:
        body.append(f'<text x="10" y="{y + 11}" font-weight="bold">{escape(group)}</text>')
        y += 16
        for label, median, low, high in items:
            mid = y + bar_h / 2
            body += [f'<text x="{left - 6}" y="{y + 12}" text-anchor="end">{escape(label)}</text>',
                     f'<rect x="{left}" y="{y}" width="{median * scale:.1f}" height="{bar_h}" fill="#4878a8"/>',
                     f'<line x1="{left + low * scale:.1f}" y1="{mid}" x2="{left + high * scale:.1f}" y2="{mid}" stroke="black"/>',
                     f'<line x1="{left + low * scale:.1f}" y1="{y + 3}" x2="{left + low * scale:.1f}" y2="{y + bar_h - 3}" stroke="black"/>',
                     f'<line x1="{left + high * scale:.1f}" y1="{y + 3}" x2="{left + high * scale:.1f}" y2="{y + bar_h - 3}" stroke="black"/>',
                     f'<text x="{left + high * scale + 6:.1f}" y="{y + 12}">{median:.0f} {escape(unit)} '
                     f'({low:.0f}..{high:.0f})</text>']
            y += bar_h + 4
    open(path, "w").write(svg_document(width, height, body))


def svg_stacked(path, title, groups):
    """groups: [(group name, [(label, {part: ms per step}, wall ms per step)])] -> stacked horizontal bars."""
    width, bar_h, left, right = 960, 16, 170, 170
    n = sum(len(items) for _, items in groups)
    height = 70 + n * (bar_h + 4) + len(groups) * 16
    top = max([max(sum(split.values()), wall) for _, items in groups for _, split, wall in items] + [1e-9])
    scale = (width - left - right) / top
    body = [f'<text x="10" y="20" font-size="14">{escape(title)}</text>',
            '<text x="10" y="36" fill="#555">data wait: host blocked on the loader; the other parts: device time on the '
            'compute stream (they can overlap the wait); black tick: wall time per step</text>']
    x = left
    for part, colour in PART_COLOURS.items():
        body.append(f'<rect x="{x}" y="44" width="10" height="10" fill="{colour}"/><text x="{x + 14}" y="53">{part}</text>')
        x += 140
    y = 64
    for group, items in groups:
        body.append(f'<text x="10" y="{y + 11}" font-weight="bold">{escape(group)}</text>')
        y += 16
        for label, split, wall in items:
            body.append(f'<text x="{left - 6}" y="{y + 12}" text-anchor="end">{escape(label)}</text>')
            x = left
            for part, colour in PART_COLOURS.items():
                w = split.get(part, 0) * scale
                body.append(f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="{bar_h}" fill="{colour}">'
                            f'<title>{part}: {split.get(part, 0):.2f} ms</title></rect>')
                x += w
            body += [f'<line x1="{left + wall * scale:.1f}" y1="{y - 1}" x2="{left + wall * scale:.1f}" y2="{y + bar_h + 1}" '
                     f'stroke="black" stroke-width="2"/>',
                     f'<text x="{max(x, left + wall * scale) + 6:.1f}" y="{y + 12}">{sum(split.values()):.1f} ms '
                     f'(wall {wall:.1f})</text>']
            y += bar_h + 4
    open(path, "w").write(svg_document(width, height, body))


# How each switch reads in the headline: (on, off).
SWITCH_WORDS = {
    "tf32": ("TF32", "true FP32"),
    "fp16": ("fp16 autocast", "fp32"),
    "channels_last": ("channels-last", "NCHW"),
    "cudnn_benchmark": ("cuDNN autotune", "no autotune"),
    "cuda_graph": ("CUDA graph", "eager"),
    "fusion": ("BatchNorm fused into the convolutions", "separate BatchNorm, add and ReLU kernels"),
    "wgrad_stream": ("weight gradients beside the data gradients", "weight gradients in line"),
    "conv_prologue": ("each prologue fused or separate, the faster per shape", "every prologue fused"),
    "batched_casts": ("the blocks' weight casts in one launch each way", "a cast per weight"),
    "stem_channels": ("the stem convolution on 4 input channels", "the stem convolution on the image's 3 channels"),
    "fuse_stem_pool": ("the stem's BatchNorm+ReLU inside its max-pool", "BatchNorm+ReLU and max-pool apart"),
    "loader": ("pinned all-core prefetching loader", "decoding on the training thread into pageable memory"),
}


def reading(run):
    u, wait = utilisation(run)
    facts = switch_facts(run["command"])
    return read_utilisation(facts["cuda"], u, wait, facts)


def write_report(opts, machine, runs, names, batches):
    """report.md: the headline, what each switch bought, costs, the pictures, the table."""
    def median(data, batch, label):
        for r in runs:
            if r["data"] == data and r["batch"] == batch and r["label"] == label and r["summary"]:
                return r["summary"]["median"]
        return None

    batch = batches[0]
    lines = [f"# Switch ablation, {machine['date']} ({machine['device']})", "", f"Command: `{machine['command']}`", ""]
    ratios = []
    ends = {data: (median(data, batch, "baseline"), median(data, batch, "all")) for data in ["jpeg", "synthetic"]}
    for data, what in [("jpeg", "JPEG files (the whole pipeline)"), ("synthetic", "synthetic data (compute alone)")]:
        base, best = ends[data]
        if base and best:
            ratios.append(f"{best / base:.2f}x on {what}, {base:.0f} -> {best:.0f} img/s")
        else:
            ratios.append(f"no ratio on {what}: the baseline or the optimized run failed (logs/)")
    lines.append(f"**Headline (batch {batch}): the optimized configuration ("
                 + ", ".join(SWITCH_WORDS[s][0] for s in names) + ") over the baseline ("
                 + ", ".join(SWITCH_WORDS[s][1] for s in names) + "): " + "; ".join(ratios)
                 + f". The source claims {SOURCE_CLAIM}x (A100 against RTX 3090).**")
    for data in ["jpeg", "synthetic"]:
        base, best = ends[data]
        alone, last = [], []
        for s in (s for s in names if applies(data, s)):
            a, w = median(data, batch, f"+{s}"), median(data, batch, f"all-{s}")
            if a and base:
                alone.append(f"{s} {a / base:.2f}x")
            if w and best:
                last.append(f"{s} {100 * (1 - w / best):.0f}%" if w <= best else f"{s} nothing ({w / best:.2f}x faster without)")
        lines += ["", f"Which switch bought what ({data}, batch {batch}): alone on top of the baseline: "
                  + (", ".join(alone) or "-") + "; removing it from the full set costs: " + (", ".join(last) or "-") + "."]
    # What the GPU was doing: NVML's figure against the finer ones, baseline and optimized at the headline's batch.
    def found(data, b, label):
        return next((r for r in runs if r["data"] == data and r["batch"] == b and r["label"] == label and r["summary"]),
                    None)
    for data in ["synthetic", "jpeg"]:
        ends_runs = [(name, found(data, batch, label)) for name, label in [("the baseline", "baseline"),
                                                                           ("the optimized run", "all")]]
        ends_runs = [(name, r) for name, r in ends_runs if r]
        if not ends_runs:
            continue
        across = read_across([(name, r["summary"]["median"], utilisation(r)[0]) for name, r in ends_runs])
        lines += ["", f"What the GPU was doing ({data}, batch {batch}): " + (across + " " if across else "")
                  + " ".join(f"{name[0].upper() + name[1:]}: {reading(r)}" for name, r in ends_runs)]
    # The matrix's own time (the goal: under 10 minutes on one H200), from each run's process time.
    timed = [r["process_s"] for r in runs if r.get("process_s") is not None]
    if timed:
        untimed = len(runs) - len(timed)
        data_s = machine.get("data_s")
        lines += ["", f"Time: {sum(timed) / 60:.1f} minutes for {len(timed)} runs, start to exit of each process"
                  + (f" ({untimed} runs made before the time was recorded are not in it)" if untimed else "")
                  + (f", plus {data_s:.0f} s making the JPEG files" if data_s else "") + "."]
    if machine.get("command_s"):
        lines += [f"The whole command (every call of it, with --resume): {machine['command_s'] / 60:.1f} minutes."]
    if opts.price_per_hour:
        lines += ["", f"Cost of one ImageNet epoch ({IMAGENET_TRAIN_IMAGES:,} images) at {opts.price_per_hour:g}/h, batch {batch}:", ""]
        for data in ["jpeg", "synthetic"]:
            parts = []
            for name, label in [("baseline", "baseline"), ("optimized", "all")]:
                rate = median(data, batch, label)
                if rate:
                    hours = IMAGENET_TRAIN_IMAGES / rate / 3600
                    parts.append(f"{name} {hours * opts.price_per_hour:.4g} ({hours:.2f} h)")
            lines.append(f"- {data}: " + (", ".join(parts) or "-"))
    lines += ["", "![images/s per configuration](images_per_s.svg)", "", "![where a step's time goes](step_split.svg)", "",
              "| data | batch | configuration | images/s (median) | min | max | spread | ms/step: data wait | copy | compute | wall |",
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in runs:
        s = r["summary"]
        if not s:
            lines.append(f"| {r['data']} | {r['batch']} | {r['label']} | failed (exit {r['exit_code']}) | | | | | | | |")
            continue
        sp = s["split_ms_per_step"]
        lines.append(f"| {r['data']} | {r['batch']} | {r['label']} | {s['median']:.0f} | {s['min']:.0f} | {s['max']:.0f} | "
                     f"{s['spread_pct']:.1f}% | {sp['data wait']:.2f} | {sp['host-to-device copy']:.2f} | {sp['compute']:.2f} | "
                     f"{s['wall_ms_per_step']:.2f} |")
    lines += ["", "## Utilisation, every configuration", "",
              "Medians of the repeats' epoch means. NVML's GPU utilisation is what nvidia-smi shows: the share of time "
              "in which any kernel ran; SM activity, occupancy, tensor-pipe activity and DRAM bandwidth come from GPM "
              "(Hopper and newer); unavailable where the GPU or the run has none. Data wait: the host blocked on the "
              "loader, over the wall time.", "",
              "| data | batch | configuration | images/s | " + " | ".join(h for h, _, _ in UTIL_COLUMNS) + " | data wait |",
              "| --- | --- | --- | --- | " + " | ".join("---" for _ in UTIL_COLUMNS) + " | --- |"]
    for r in runs:
        if not r["summary"]:
            continue
        u, wait = utilisation(r)
        lines.append(f"| {r['data']} | {r['batch']} | {r['label']} | {r['summary']['median']:.0f} | "
                     + " | ".join(format_figure(unit, u[metric]) for _, metric, unit in UTIL_COLUMNS)
                     + f" | {format_figure('%', None if wait is None else 100 * wait)} |")
    lines += ["", "What each configuration's figures say:", ""]
    lines += [f"- {r['data']}, batch {r['batch']}, {r['label']}: {reading(r)}" for r in runs if r["summary"]]
    lines += ["", "## What each switch bought, every batch", "",
              "Alone: images/s of the baseline plus the switch, over the baseline. Last: all switches over all but this one.", "",
              "| data | batch | switch | alone | last |", "| --- | --- | --- | --- | --- |"]
    for data in ["synthetic", "jpeg"]:
        for b in batches:
            base, best = median(data, b, "baseline"), median(data, b, "all")
            for s in names:
                alone, without = median(data, b, f"+{s}"), median(data, b, f"all-{s}")
                a = f"{alone / base:.2f}x" if alone and base else "-"
                l = f"{best / without:.2f}x" if best and without else "-"
                lines.append(f"| {data} | {b} | {s} | {a} | {l} |")
    lines += ["", "Every epoch record: `ablation.json`. Logs: `logs/`."]
    open(os.path.join(opts.out, "report.md"), "w").write("\n".join(lines) + "\n")


def write_pictures(opts, runs, batches):
    groups = [(data, b, [r for r in runs if r["data"] == data and r["batch"] == b and r["summary"]])
              for data in ["synthetic", "jpeg"] for b in batches]
    svg_bars(os.path.join(opts.out, "images_per_s.svg"), "rn50: images/s per configuration",
             [(f"{data}, batch {b}", [(r["label"], r["summary"]["median"], r["summary"]["min"], r["summary"]["max"])
                                      for r in rs]) for data, b, rs in groups], "img/s")
    svg_stacked(os.path.join(opts.out, "step_split.svg"), "rn50: where a step's time goes (ms per step, median)",
                [(f"{data}, batch {b}", [(r["label"], r["summary"]["split_ms_per_step"], r["summary"]["wall_ms_per_step"])
                                         for r in rs]) for data, b, rs in groups])


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rn50", default="build/rn50")
    p.add_argument("--out", required=True)
    p.add_argument("--work", default="/tmp/rn50-ablation")
    p.add_argument("--device", default="cuda:0")
    p.add_argument("--data-root", help="JPEG dataset (ImageNet layout) instead of generated files")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--steps", default="256:6,64:14",
                   help="BATCH:STEPS,...: the batch sizes and the steps of each epoch (the first epoch, dropped, "
                        "included); the 2026-11-30 H200 report used 256:10,64:24")
    p.add_argument("--model", default="resnet50")
    p.add_argument("--price-per-hour", type=float, default=0,
                   help="instance price per hour (any currency): the report adds the cost of an ImageNet epoch")
    p.add_argument("--resume", action="store_true",
                   help="keep the successful runs already in OUT/ablation.json (a run cut short by a time limit) "
                        "and run only the rest")
    p.add_argument("--render", action="store_true",
                   help="write the report and pictures again from OUT/ablation.json (of a finished or cut-short run)")
    p.add_argument("--quick", action="store_true",
                   help="a smoke run of the tool itself: CPU, resnet18, 32 px, one batch size, one step, one repeat")
    opts = p.parse_args()
    if opts.price_per_hour < 0:
        p.error("--price-per-hour must not be negative")
    if opts.render:
        saved = json.load(open(os.path.join(opts.out, "ablation.json")))
        runs, machine, names = saved["runs"], saved["machine"], saved["switches"]
        batches = sorted({r["batch"] for r in runs}, reverse=True)
        write_report(opts, machine, runs, names, batches)
        write_pictures(opts, runs, batches)
        print(f"wrote {opts.out}/report.md again ({len(runs)} runs)")
        return
    if opts.quick:
        opts.device, opts.image_size, opts.model, opts.repeats, batches, steps = "cpu", 32, "resnet18", 1, [4], {4: 1}
    else:
        opts.image_size = 224
        try:
            steps = {int(b): int(n) for b, n in (pair.split(":") for pair in opts.steps.split(","))}
        except ValueError:
            p.error(f"--steps wants BATCH:STEPS,... (got {opts.steps!r})")
        if not steps or min(steps) < 1 or min(steps.values()) < 1:
            p.error(f"--steps: batch sizes and steps must be positive (got {opts.steps!r})")
        batches = list(steps)
    os.makedirs(opts.out, exist_ok=True)
    os.makedirs(opts.work, exist_ok=True)
    log_dir = os.path.join(opts.out, "logs")
    os.makedirs(log_dir, exist_ok=True)
    cpu = opts.device == "cpu"
    # fp16 autocast needs CUDA; on the CPU fusion runs as bn (ATen's ops), without the side stream, the timed prologues,
    # the batched casts or rn50's stem-pool kernel, so the switches that act only with it are left out.
    names = [s for s in SWITCHES if not (cpu and (s == "fp16" or s in REQUIRES))]

    command_started = time.monotonic()  # the whole command's time, against the 10-minute goal
    data_root = opts.data_root
    data_s = 0.0  # making the JPEG files, part of the matrix's time
    if not data_root:
        data_root = os.path.join(opts.work, "jpeg")
        if not os.path.isdir(os.path.join(data_root, "train")):
            size = 48 if opts.quick else 375  # 375x500, like an average ImageNet photo
            per_class = 4 if opts.quick else 200
            started = time.monotonic()
            shutil.rmtree(data_root, ignore_errors=True)  # a stopped run's partial folder: make-sample wants a new one
            subprocess.run([opts.rn50, "make-sample", "--out", data_root, "--classes", "16", "--per-class",
                            str(per_class), "--val-per-class", "1", "--size", str(size)], check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            data_s = time.monotonic() - started
    datasets = [("synthetic", ["--data", "synthetic"]), ("jpeg", ["--data", "folder", "--data-root", data_root])]
    machine = {"date": datetime.date.today().isoformat(), "host": platform.node(), "device": opts.device,
               "command": " ".join(sys.argv), "data_s": data_s}  # command_s: set by save()
    earlier_command_s = 0.0  # with --resume, the cut-short commands' time before this one
    runs, pending = [], {}  # pending: kept runs not yet reached, saved with the others (a cut-short resume loses none)
    saved_path = os.path.join(opts.out, "ablation.json")
    if opts.resume and os.path.exists(saved_path):
        saved = json.load(open(saved_path))
        for r in saved["runs"]:
            why = settings_mismatch(r, opts, steps)
            if why:
                sys.exit(f"ablation.py: --resume: {saved_path} was made with other settings ({r['label']}, batch "
                         f"{r['batch']}, {r['data']}: {why}); resume with the same options, or start a new --out")
        pending = {(r["data"], r["batch"], r["label"]): r for r in saved["runs"] if r["exit_code"] == 0}
        machine["command"] = saved["machine"]["command"] + "; then, resumed: " + machine["command"]
        machine["date"] = saved["machine"]["date"]
        machine["data_s"] = saved["machine"].get("data_s", 0.0) + data_s
        earlier_command_s = saved["machine"].get("command_s")  # None: made before the command's time was recorded
        print(f"resuming: {len(pending)} successful runs in {saved_path}", flush=True)

    def save():
        # This command's time so far, plus the cut-short commands' before it (all of them, if each recorded it).
        machine["command_s"] = (None if earlier_command_s is None
                                else earlier_command_s + time.monotonic() - command_started)
        with open(saved_path, "w") as f:
            json.dump({"machine": machine, "switches": names, "runs": runs + list(pending.values())}, f, indent=1)

    def stopped(signum, _frame):
        # A time limit's SIGTERM or a Ctrl-C: the time until now counts toward the whole command's, which --resume adds
        # to; the run in flight is lost (subprocess.run kills it) and made again by --resume.
        save()
        sys.exit(128 + signum)

    signal.signal(signal.SIGTERM, stopped)
    signal.signal(signal.SIGINT, stopped)

    for data, data_args in datasets:
        for batch in batches:
            for label, on in configurations(names):
                toggled = label.split("+", 1)[1] if label.startswith("+") else label.removeprefix("all-")
                if not applies(data, toggled):
                    continue  # it would equal the baseline or "all"
                if (data, batch, label) in pending:
                    runs.append(pending.pop((data, batch, label)))
                    continue
                run = run_one(opts, data, data_args, batch, steps[batch], label, on, names, log_dir)
                run["summary"] = summarise(run)
                if "gpu" not in machine and run.get("device"):
                    machine["gpu"] = run["device"]  # rn50 compare names the machine by it
                runs.append(run)
                s = run["summary"]
                print(f"{data:9} b{batch:<4} {label:22} " + (f"{s['median']:9.0f} img/s  spread {s['spread_pct']:4.1f}%"
                      if s else f"failed (exit {run['exit_code']})"), flush=True)
                save()  # after every run: a run cut short by a time limit keeps what it measured (--render reports it)
    save()

    write_report(opts, machine, runs, names, batches)
    write_pictures(opts, runs, batches)
    failed = [r for r in runs if r["exit_code"] != 0]
    print(f"wrote {opts.out}/report.md ({len(runs)} runs, {len(failed)} failed)")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
