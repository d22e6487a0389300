#!/usr/bin/env python3
# tests/tools/check_kernel_spills.py: the fused ResNet-50 step's own BatchNorm, apply and max-pool kernels (half, 16-byte
# vectors) keep their registers: compiled for sm_90 with ptxas's report, none of them spills to local memory. A spill
# there cost the stem's dx pass about half of the DRAM bandwidth its bytes need (docs/fused-kernels.md). Exits 1 naming
# each kernel that spills, and each pattern no kernel matches (a renamed kernel). Needs nvcc and c++filt, no GPU.
import argparse
import os
import re
import subprocess
import sys
import tempfile

# Source files, and the kernels in them that must not spill (regular expressions on the demangled names).
GUARDED = {
    "ops/batch_norm_kernels.cu": [
        r"stats_kernel<__half, 8>",
        r"normalize_kernel<__half, 8,",
        r"backward_reduce_kernel<__half, 8,",
        r"dx_kernel<__half, 8, \(rn50::ops::kernels::impl::GradSource\)1>",  # kStored: a block's output BatchNorm
        r"backward_reduce_from_kernel<__half, 8,",
        r"dx_from_kernel<__half, 8,",
        r"dx_block_kernel<__half, 8>",  # the stem's dx by the pool's output blocks (PoolPlan::two_by_two)
    ],
    "ops/conv_bn_kernels.cu": [
        r"apply_kernel<__half, 8>",  # the block outputs (with ReLU's bits) and the prologues run as passes
        r"dbn_apply_kernel<__half, 8>",
    ],
    "ops/max_pool_kernels.cu": [
        r"max_pool_forward_kernel<__half, 8, true,",
        r"max_pool_backward_kernel<__half, 8, true,",
        r"max_pool_backward_block_kernel<__half, 8>",
    ],
}


def parse(ptxas_text, demangle):
    """{demangled kernel name: (registers, spill store bytes, spill load bytes)} from ptxas -v output."""
    kernels, current = {}, None
    for line in ptxas_text.splitlines():
        m = re.search(r"Compiling entry function '(\S+)'", line)
        if m:
            current = demangle(m.group(1))
            kernels[current] = [0, 0, 0]
            continue
        if current is None:
            continue
        m = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", line)
        if m:
            kernels[current][1:] = [int(m.group(1)), int(m.group(2))]
        m = re.search(r"Used (\d+) registers", line)
        if m:
            kernels[current][0] = int(m.group(1))
    return {k: tuple(v) for k, v in kernels.items()}


def check(kernels, patterns):
    """Lines naming each guarded kernel that spills and each pattern that matches none; and a line per match."""
    problems, report = [], []
    for pattern in patterns:
        matched = [k for k in kernels if re.search(pattern, k)]
        if not matched:
            problems.append(f"no kernel matches {pattern!r}")
        for k in matched:
            registers, stores, loads = kernels[k]
            report.append(f"{registers:4d} registers, {stores:4d}/{loads:4d} bytes spilled: {k[:140]}")
            if stores or loads:
                problems.append(f"spills {stores} bytes (loads {loads}): {k}")
    return problems, report


def self_test():
    """The check fails where it should: made-up ptxas output with one guarded kernel spilling, one clean."""
    text = "\n".join([
        "ptxas info    : Compiling entry function 'A' for 'sm_90'",
        "ptxas info    : Function properties for A",
        "    128 bytes stack frame, 208 bytes spill stores, 204 bytes spill loads",
        "ptxas info    : Used 64 registers, used 0 barriers, 128 bytes cumulative stack size",
        "ptxas info    : Compiling entry function 'B' for 'sm_90'",
        "ptxas info    : Function properties for B",
        "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads",
        "ptxas info    : Used 110 registers, used 0 barriers",
    ])
    names = {"A": "void dx_from_kernel<__half, 8, G>(P)", "B": "void stats_kernel<__half, 8>(P)"}
    kernels = parse(text, names.get)
    assert kernels == {names["A"]: (64, 208, 204), names["B"]: (110, 0, 0)}, kernels
    problems, _ = check(kernels, [r"dx_from_kernel<__half, 8,", r"stats_kernel<__half, 8>", r"gone_kernel"])
    assert len(problems) == 2 and "208" in problems[0] and "gone_kernel" in problems[1], problems
    problems, _ = check(kernels, [r"stats_kernel<__half, 8>"])
    assert problems == [], problems
    print("check_kernel_spills: self-test passed")


def main():
    ap = argparse.ArgumentParser(description="ptxas spills of the fused step's BatchNorm and max-pool kernels")
    ap.add_argument("--nvcc", default="nvcc")
    ap.add_argument("--root", default=os.path.join(os.path.dirname(__file__), "..", ".."))
    ap.add_argument("--self-test", action="store_true")
    args = ap.parse_args()
    if args.self_test:
        self_test()
        return 0
    root = os.path.abspath(args.root)
    cache = {}

    def demangle(name):
        if name not in cache:
            cache[name] = subprocess.run(["c++filt", name], capture_output=True, text=True, check=True).stdout.strip()
        return cache[name]

    problems = []
    with tempfile.TemporaryDirectory() as tmp:
        for source, patterns in GUARDED.items():
            run = subprocess.run([args.nvcc, "-std=c++17", "-I", root, "-DRN50_SASS_ARCHS=\"90\"",
                                  "-DRN50_PTX_ARCHS=\"90\"", "-arch=sm_90", "-O3", "-Xptxas", "-v", "-c",
                                  os.path.join(root, source), "-o", os.path.join(tmp, "k.o")],
                                 capture_output=True, text=True)
            if run.returncode != 0:
                print(run.stderr[-2000:], file=sys.stderr)
                print(f"check_kernel_spills: nvcc failed on {source}", file=sys.stderr)
                return 1
            found, report = check(parse(run.stderr, demangle), patterns)
            print(f"{source}:")
            for line in report:
                print("  " + line)
            problems += [f"{source}: {p}" for p in found]
    for p in problems:
        print("check_kernel_spills: " + p, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
