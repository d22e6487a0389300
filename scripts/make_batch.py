#!/usr/bin/env python3
"""scripts/make_batch.py: a stored batch for `rn50 infer`, with Python's standard library alone.

  python3 scripts/make_batch.py OUT.safetensors [--images N] [--size S] [--seed X]

Writes one F32 tensor `images` of shape [N, 3, S, S] (values from a seeded normal distribution, as normalised images
have), in the layout `safetensors.torch.save_file` writes: the file `rn50 infer --images` reads. For a batch of real
images, save a normalised tensor from Python with torch and safetensors instead.
"""
import argparse
import json
import os
import random
import struct
import sys


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out", help="the .safetensors file to write")
    p.add_argument("--images", type=int, default=2, help="N, 1 to 65536 (default 2)")
    p.add_argument("--size", type=int, default=64, help="S, the side in pixels, 1 to 4096 (default 64)")
    p.add_argument("--seed", type=int, default=0)
    opts = p.parse_args()
    if not 1 <= opts.images <= 65536 or not 1 <= opts.size <= 4096:
        sys.exit("make_batch.py: --images must be 1 to 65536 and --size 1 to 4096 (what rn50 infer takes)")
    count = opts.images * 3 * opts.size * opts.size
    rng = random.Random(opts.seed)
    data = struct.pack(f"<{count}f", *(rng.gauss(0.0, 1.0) for _ in range(count)))
    header = json.dumps({"images": {"dtype": "F32", "shape": [opts.images, 3, opts.size, opts.size],
                                    "data_offsets": [0, len(data)]}}).encode()
    header += b" " * (-len(header) % 8)
    tmp = opts.out + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(header)) + header + data)
    os.replace(tmp, opts.out)
    print(f"wrote {opts.out}: images [{opts.images}, 3, {opts.size}, {opts.size}], F32")


if __name__ == "__main__":
    main()
