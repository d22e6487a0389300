# Reads probe3.sh's logs: per run, epochs 4-5 against synthetic; every hardware call over 40 ms with its batch's
# bytes and pixels against the slot's earlier maxima, and nvJPEG's allocations and frees during the call.
import glob, json, os, re, statistics, sys
d = sys.argv[1]
epochs = lambda name: [r for r in map(json.loads, open(os.path.join(d, name + ".jsonl")))
                       if r.get("type") == "epoch" and r["epoch"] >= 4]
syn = statistics.mean(r["images_per_s"] for r in epochs("synthetic"))
print(f"synthetic epochs 4-5: {syn:.0f} img/s")
for f in sorted(glob.glob(os.path.join(d, "gpu_*.log"))):
    name = os.path.basename(f)[:-4]
    rs = epochs(name)
    rate = statistics.mean(r["images_per_s"] for r in rs)
    print(f"== {name}: epochs 4-5 {[round(r['images_per_s']) for r in rs]} ({100 * (1 - rate / syn):.1f}% below), between"
          f" steps ms {[round(1e3 * r['between_steps_s'], 1) for r in rs]}")
    events, calls = [], []
    maxima = {}  # slot -> (bytes, max_bytes, pixels, max_pixels) so far
    for line in open(f):
        if m := re.match(r"TRACE (alloc|free) (\w+) size=(\d+)(?: raw=(\d+))?", line):
            events.append(f"{m[1]} {m[2]} {int(m[3]) / 2**20:.1f}MiB" + (" RAW" if m[4] == "1" else ""))
        elif m := re.match(r"TRACE call t_end=[\d.]+ seq=(\d+) call_ms=([\d.]+) n=\d+ slot=(\d+) bytes=(\d+) "
                           r"max_bytes=(\d+) pixels=(\d+) max_pixels=(\d+)", line):
            seq, ms, slot = int(m[1]), float(m[2]), int(m[3])
            v = tuple(int(m[i]) for i in range(4, 8))
            prev = maxima.get(slot, (0, 0, 0, 0))
            new_max = [k for k, a, b in zip(("bytes", "max_bytes", "pixels", "max_pixels"), v, prev) if a > b]
            maxima[slot] = tuple(max(a, b) for a, b in zip(v, prev))
            calls.append((seq, ms, slot, v, new_max, events))
            events = []
    slow = [c for c in calls if c[1] > 40]
    fast = [c for c in calls if c[1] <= 40]
    with_events = lambda cs: sum(bool(c[5]) for c in cs)
    print(f"   calls: {len(calls)}; over 40 ms: {len(slow)} ({with_events(slow)} with nvJPEG allocations or frees);"
          f" the rest: {len(fast)} ({with_events(fast)} with)")
    for seq, ms, slot, v, new_max, ev in calls:
        if ms > 40 or ev:
            print(f"   seq {seq:3d} slot {slot} {ms:5.1f} ms  {v[0] / 2**20:.2f} MiB, max file {v[1] / 1024:.0f} KiB, "
                  f"{v[2] / 1e6:.1f} Mpx, max {v[3]}; new maxima {new_max}; {ev[:6]}{' ...' if len(ev) > 6 else ''}")
