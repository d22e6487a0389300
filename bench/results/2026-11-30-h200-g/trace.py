# Reads probe1.sh's logs: per run, epochs 4-5 img/s and between-steps ms; the hardware calls over 40 ms, with
# their place in the epoch and the NVML samples that overlap them.
import glob, json, os, re, statistics, sys
d = sys.argv[1]
for log in sorted(glob.glob(os.path.join(d, "*.log"))):
    name = os.path.basename(log)[:-4]
    try:
        rs = [r for r in map(json.loads, open(os.path.join(d, name + ".jsonl"))) if r.get("type") == "epoch"]
    except OSError:
        continue
    steady = [r for r in rs if r["epoch"] >= 4]
    if not steady: continue
    print(f"== {name}: epochs 4-5 {[round(r['images_per_s']) for r in steady]} img/s; between steps ms "
          f"{[round(1e3 * (r.get('between_steps_s') or 0), 1) for r in steady]}; slowest call ms "
          f"{[round(1e3 * (r.get('gpu_decode_slowest_hardware_call_s') or 0), 1) for r in steady]}")
    steps, calls, nvml = [], [], []
    for line in open(log):
        if m := re.match(r"TRACE step t_queued=([\d.]+) epoch=(\d+) s=(\d+)", line):
            steps.append((float(m[1]), int(m[2]), int(m[3])))
        elif m := re.match(r"TRACE call t_end=([\d.]+) seq=(\d+) call_ms=([\d.]+)", line):
            calls.append((float(m[1]), int(m[2]), float(m[3])))
        elif m := re.match(r"TRACE nvml t_end=([\d.]+) ms=([\d.]+)", line):
            nvml.append((float(m[1]), float(m[2])))
    if nvml:
        v = sorted(x[1] for x in nvml)
        print(f"   NVML samples: {len(v)}, median {statistics.median(v):.2f} ms, p99 {v[int(0.99 * (len(v) - 1))]:.2f}, max {v[-1]:.2f}")
    if len(steps) > 1:
        gaps = [b[0] - a[0] for a, b in zip(steps, steps[1:]) if a[1] == b[1] and a[1] >= 3]
        if gaps:
            g = sorted(gaps)
            print(f"   host step-to-step (epochs 4-5) ms: median {statistics.median(g):.1f}, max {g[-1]:.1f}")
    if not calls: continue
    cm = sorted(c[2] for c in calls)
    print(f"   hardware calls: {len(cm)}, median {statistics.median(cm):.1f} ms, p90 {cm[int(0.9 * (len(cm) - 1))]:.1f}, max {cm[-1]:.1f}")
    for t_end, seq, ms in calls:
        if ms < 40: continue
        start = t_end - ms
        before = [s for s in steps if s[0] <= start]
        where = f"after step e{before[-1][1]} s{before[-1][2]} queued {start - before[-1][0]:.1f} ms before" if before else "before any step"
        over = [f"{n[1]:.1f}" for n in nvml if n[0] >= start and n[0] - n[1] <= t_end]
        print(f"   slow call seq {seq}: {ms:.1f} ms, {where}; NVML samples overlapping (ms): {over}")
