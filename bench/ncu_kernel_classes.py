#!/usr/bin/env python3
"""bench/ncu_kernel_classes.py: where a step's GPU time goes, by kernel class (convolution/matmul, BatchNorm,
LayerNorm, attention, GELU, copies and casts, other elementwise and pooling, optimizer), from
`ncu --metrics gpu__time_duration.sum --csv` output; one summary per file.

  ncu --clock-control none --metrics gpu__time_duration.sum --csv \
      build/rn50 train --config configs/optimized.yaml --data synthetic --cuda-graph=off --max-steps 10 ... > conv.csv
  python3 bench/ncu_kernel_classes.py --last-steps 4 conv.csv off.csv

--last-steps N keeps the kernels of the last N whole steps, each ending with rn50's fused SGD or AdamW kernel, so that
start-up work (autotuning, plan building, the first steps) never enters the split whatever its kernel count.
Without it every kernel in the file counts (for a window cut with ncu's --launch-skip / --launch-count).
--rates: profiled with more metrics than the time (percentages of peak such as
dram__throughput.avg.pct_of_peak_sustained_elapsed), each class and top kernel with their time-weighted means.
--ranges: profiled with `ncu --nvtx --print-nvtx-rename kernel`, which names each kernel after the innermost NVTX
range it was launched in (rn50's: "stem forward", "layer2.0 forward", "layer2.0 backward", "head forward", "weight
casts"; cuda/nvtx.h): the time of each layer forward and backward, in the model's order, then the kernels outside
any range by class (the stem's and head's backward, the loss, the optimizer).
"""
import re
import argparse
import collections
import csv
import sys

TIME = 'gpu__time_duration.sum'  # the metric every split is made of
# Time units ncu may print in its "Metric Unit" column, in nanoseconds.
UNITS = {'nsecond': 1.0, 'ns': 1.0, 'usecond': 1e3, 'us': 1e3, 'msecond': 1e6, 'ms': 1e6, 'second': 1e9, 's': 1e9}


def classify(name):
    """The class of one kernel by its (demangled) name."""
    n = name.lower()
    if 'pool' in n:  # max-pool and average-pool, forward and backward, rn50's own among them ("nhwc" in their names
        return 'elementwise/other'  # is no convolution, "rn50::ops::" no BatchNorm)
    # rn50's row kernels for LayerNorm models (LayerNorm, residual add, layer scale) and ATen's LayerNorm.
    if 'layer_norm' in n or 'layernorm' in n or 'scaled_residual' in n or 'finalize_columns' in n:
        return 'layernorm'
    # rn50's own BatchNorm kernels (fused BatchNorm, and fusion: conv's finalize and apply passes) live in rn50::ops;
    # cuDNN's and ATen's BatchNorm kernels say so in their names. (cuDNN's own cudnn::ops:: kernels are not rn50's.)
    if 'batch_norm' in n or 'batchnorm' in n or 'rn50::ops::' in n or n.startswith(('void ops::', 'ops::')):
        return 'batchnorm'
    if any(k in n for k in ['sgd', 'adam', 'multi_tensor', 'unscale', 'foreach', 'non_finite', 'amp_update']):
        return 'optimizer'
    # Flash, memory-efficient and cuDNN's fused attention (scaled_dot_product_attention's backends).
    if any(k in n for k in ['flash', 'fmha', 'attention', 'sdpa', 'mha_']):
        return 'attention'
    if any(k in n for k in ['conv', 'xmma', 'cutlass', 'sm90', 'gemm', 'dgrad', 'wgrad', 'fprop', 'implicit', 'cudnn',
                            'cask', 'nhwc', 'winograd', 'nvjet']):
        return 'convolution/matmul'
    if 'gelu' in n:
        return 'gelu'
    if 'copy' in n:  # copies and dtype casts (ATen's direct_copy_kernel, autocast's casts)
        return 'copy/cast'
    return 'elementwise/other'


def read_kernel_metrics(path):
    """Per profiled kernel in launch order: (name, {metric: value}), times in nanoseconds. ncu --csv writes a row per
    kernel and metric; the rows of one kernel share its ID."""
    rows = list(csv.reader(line for line in open(path) if line.startswith('"')))
    if not rows:
        raise SystemExit(f'{path}: no CSV rows (is it ncu --csv output?)')
    hdr = rows[0]
    ki, mi, vi = hdr.index('Kernel Name'), hdr.index('Metric Name'), hdr.index('Metric Value')
    ui = hdr.index('Metric Unit') if 'Metric Unit' in hdr else None
    ii = hdr.index('ID') if 'ID' in hdr else None
    out, ids = [], {}
    for n, r in enumerate(rows[1:]):
        value = float(r[vi].replace(',', ''))
        if r[mi] == TIME:
            scale = UNITS.get(r[ui].strip().lower(), None) if ui is not None else 1.0
            if scale is None:
                raise SystemExit(f'{path}: unknown time unit {r[ui]!r}')
            value *= scale
        key = r[ii] if ii is not None else n
        if key not in ids:
            ids[key] = len(out)
            out.append((r[ki], {}))
        out[ids[key]][1][r[mi]] = value
    return out


def read_kernels(path):
    """(name, nanoseconds) per profiled kernel, in launch order."""
    kernels = read_kernel_metrics(path)
    missing = [name for name, m in kernels if TIME not in m]
    if missing:
        raise SystemExit(f'{path}: {len(missing)} kernels without {TIME} (profile with --metrics {TIME},...)')
    return [(name, m[TIME]) for name, m in kernels]


def last_steps(kernels, n):
    """The kernels of the last n steps, each ending with the fused optimizer's kernel (SGD or AdamW); kernels are
    (name, time) or (name, metrics) pairs."""
    ends = [i for i, (name, _) in enumerate(kernels) if 'fused_sgd' in name or 'fused_adamw' in name]
    if len(ends) < n + 1:
        raise SystemExit(f'{len(ends)} fused optimizer kernels found: fewer than the {n} + 1 that {n} whole steps need')
    return kernels[ends[-n - 1] + 1:ends[-1] + 1]


def weighted_rates(kernels):
    """{metric: time-weighted mean} of every metric but the time over (name, {metric: value}) kernels."""
    time, sums = 0.0, collections.Counter()
    for _, m in kernels:
        t = m[TIME]
        time += t
        for k, v in m.items():
            if k != TIME:
                sums[k] += v * t
    return {k: v / time for k, v in sums.items()} if time else {}


def short_metric(name):
    """dram__throughput.avg.pct_of_peak_sustained_elapsed -> dram__throughput: the column's heading."""
    return name.split('.')[0]


def print_rates(path, args):
    """The class split with each class's time-weighted rates, then the kernels that took longest with theirs."""
    kernels = read_kernel_metrics(path)
    if any(TIME not in m for _, m in kernels):
        raise SystemExit(f'{path}: kernels without {TIME}')
    if args.last_steps:
        kernels = last_steps(kernels, args.last_steps)
    metrics = sorted({k for _, m in kernels for k in m if k != TIME})
    by_class, by_name = collections.defaultdict(list), collections.defaultdict(list)
    for name, m in kernels:
        by_class[classify(name)].append((name, m))
        by_name[(classify(name), name[:80])].append((name, m))
    total = sum(m[TIME] for _, m in kernels)
    per = args.last_steps or 1
    print(f'{path} {len(kernels)} kernels, {total / 1e6 / per:.2f} ms a step; rates in % of peak, time-weighted')
    print('  ' + f'{"class or kernel":<86} {"ms/step":>8} ' + ' '.join(f'{short_metric(k)[:22]:>22}' for k in metrics))
    for groups, top in ((by_class, None), (by_name, args.top)):
        ranked = sorted(groups.items(), key=lambda kv: -sum(m[TIME] for _, m in kv[1]))[:top]
        for key, ks in ranked:
            label = key if isinstance(key, str) else f'{key[0][:5]} {key[1]}'
            rates = weighted_rates(ks)
            ms = sum(m[TIME] for _, m in ks) / 1e6 / per
            print(f'  {label[:86]:<86} {ms:8.3f} ' + ' '.join(f'{rates.get(k, float("nan")):22.1f}' for k in metrics))


RANGE = re.compile(r'(stem|head|layer\d+\.\d+) (forward|backward)|weight casts|bottleneck backward')


def layer_order(layer):
    """stem, layer1.0, layer1.1, ..., layer4.2, head: the model's order."""
    if layer == 'stem':
        return (0, 0, 0)
    if layer == 'head':
        return (2, 0, 0)
    stage, block = layer[len('layer'):].split('.')
    return (1, int(stage), int(block))


def print_ranges(path, args):
    """Each layer's forward and backward time a step, then what ran outside rn50's ranges, by class."""
    kernels = read_kernels(path)
    if args.last_steps:
        kernels = last_steps(kernels, args.last_steps)
    per = args.last_steps or 1
    layers, other, outside = collections.defaultdict(lambda: [0.0, 0.0]), collections.Counter(), collections.Counter()
    for name, ns in kernels:
        m = RANGE.search(name)
        if m and m.group(1):
            layers[m.group(1)][m.group(2) == 'backward'] += ns
        elif m:
            other[m.group(0)] += ns
        else:
            outside[classify(name)] += ns
    total = sum(ns for _, ns in kernels)
    print(f'{path} {len(kernels)} kernels, {total / 1e6 / per:.2f} ms a step; ms a step per range')
    print(f'  {"layer":<12} {"forward":>8} {"backward":>9} {"both":>8} {"share":>6}')
    for layer in sorted(layers, key=layer_order):
        f, b = (t / 1e6 / per for t in layers[layer])
        print(f'  {layer:<12} {f:8.3f} {b:9.3f} {f + b:8.3f} {100 * (f + b) * 1e6 * per / total:5.1f}%')
    for name, ns in other.most_common():
        print(f'  {name:<31} {ns / 1e6 / per:8.3f} {100 * ns / total:5.1f}%')
    for c, ns in outside.most_common():
        print(f'  outside: {c:<22} {ns / 1e6 / per:8.3f} {100 * ns / total:5.1f}%')
    if not layers:
        print('  no kernel carries a range name: was ncu run with --nvtx --print-nvtx-rename kernel?')


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--last-steps', type=int, default=0, help='only the last N whole steps (0: every kernel)')
    ap.add_argument('--top', type=int, default=12, help='the N kernels that took longest (default 12)')
    ap.add_argument('--rates', action='store_true',
                    help="each class's and top kernel's other metrics (percentages of peak: tensor pipes, DRAM), "
                         'weighted by the kernels\' time')
    ap.add_argument('--ranges', action='store_true',
                    help='per NVTX range (ncu --nvtx --print-nvtx-rename kernel): each layer forward and backward')
    ap.add_argument('files', nargs='+')
    args = ap.parse_args()
    failed = False
    for path in args.files:
        try:
            summarise(path, args)
        except SystemExit as e:  # one file cut short (ncu timed out) leaves the others' summaries
            print(e)
            failed = True
    if failed:
        sys.exit(1)


def summarise(path, args):
    """One file's split by class and its kernels that took longest."""
    if args.ranges:
        print_ranges(path, args)
        return
    if args.rates:
        print_rates(path, args)
        return
    kernels = read_kernels(path)
    if args.last_steps:
        kernels = last_steps(kernels, args.last_steps)
    tot, names = collections.Counter(), collections.Counter()
    for name, ns in kernels:
        c = classify(name)
        tot[c] += ns
        names[(c, name[:90])] += ns
    s = sum(tot.values())
    steps = f', the last {args.last_steps} steps: {s / 1e6 / args.last_steps:.2f} ms a step' if args.last_steps else ''
    print(f'{path} {len(kernels)} kernels, {s / 1e6:.1f} ms{steps}')
    for c, t in tot.most_common():
        print(f'  {c:20s} {t / 1e6:8.2f} ms {100 * t / s:5.1f}%')
    for (c, n), t in names.most_common(args.top):
        print(f'     {c[:5]} {t / 1e6:6.2f} ms  {n}')


if __name__ == '__main__':
    main()
