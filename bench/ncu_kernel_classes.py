#!/usr/bin/env python3
"""bench/ncu_kernel_classes.py: where a step's GPU time goes, by kernel class (convolution/matmul, BatchNorm,
elementwise, optimizer), from `ncu --metrics gpu__time_duration.sum --csv` output; one summary per file.

  ncu --clock-control none --metrics gpu__time_duration.sum --csv --launch-skip 2500 --launch-count 1200 \
      build/rn50 train --config configs/optimized.yaml --data synthetic --cuda-graph=off --max-steps 12 ... > off.csv
  python3 bench/ncu_kernel_classes.py off.csv bn.csv
"""
import collections
import csv
import sys

# rn50's fused BatchNorm kernels live in namespace ops; cuDNN's and ATen's BatchNorm kernels say so in their names.
def classify(name):
    n = name.lower()
    if 'batch_norm' in n or 'batchnorm' in n or n.startswith('void ops::') or n.startswith('ops::'):
        return 'batchnorm'
    if 'sgd' in n or 'multi_tensor' in n or 'unscale' in n or 'foreach' in n or 'non_finite' in n or 'amp_update' in n:
        return 'optimizer'
    if any(k in n for k in ['conv', 'xmma', 'cutlass', 'sm90', 'gemm', 'dgrad', 'wgrad', 'fprop', 'implicit', 'cudnn', 'cask', 'nhwc', 'winograd']):
        return 'convolution/matmul'
    return 'elementwise/other'
for path in sys.argv[1:]:
    rows = [r for r in csv.reader(l for l in open(path) if l.startswith('"'))]
    hdr = rows[0]; ki = hdr.index('Kernel Name'); vi = hdr.index('Metric Value')
    tot = collections.Counter(); names = collections.Counter()
    for r in rows[1:]:
        t = float(r[vi].replace(',', '')) / 1e3
        c = classify(r[ki]); tot[c] += t; names[(c, r[ki][:90])] += t
    s = sum(tot.values())
    print(path, f'{len(rows)-1} kernels, {s/1e3:.1f} ms')
    for c, t in tot.most_common(): print(f'  {c:20s} {t/1e3:8.2f} ms {100*t/s:5.1f}%')
    for (c, n), t in names.most_common(12): print(f'     {c[:5]} {t/1e3:6.2f} ms  {n}')
