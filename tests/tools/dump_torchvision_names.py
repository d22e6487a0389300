#!/usr/bin/env python3
"""Writes torchvision's state-dict layout (name, dtype, shape) and parameter count of every model rn50 registers.

Run with a Python that has torchvision (Debian's: /usr/bin/python3, torchvision 0.14); the output is the fixture
tests/fixtures/torchvision_<arch>.txt, against which tests/models/test_registry.cpp checks rn50's names, dtypes,
shapes and parameter count.

usage: dump_torchvision_names.py [--out DIR] [ARCH ...]
  DIR: default tests/fixtures beside this script; ARCH: default every model that has a fixture there already (a new
  port names itself: dump_torchvision_names.py alexnet).
"""
import argparse
import glob
import os
import sys

import torchvision

def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=os.path.join(here, "..", "fixtures"))
    parser.add_argument("archs", nargs="*")
    args = parser.parse_args()
    out_dir = args.out
    archs = args.archs or sorted(os.path.basename(f)[len("torchvision_"):-len(".txt")]
                                 for f in glob.glob(os.path.join(out_dir, "torchvision_*.txt")))
    for arch in archs:
        model = getattr(torchvision.models, arch)(weights=None)
        n_params = sum(p.numel() for p in model.parameters())
        with open(os.path.join(out_dir, f"torchvision_{arch}.txt"), "w") as f:
            f.write(f"# torchvision {torchvision.__version__} {arch}: {n_params} parameters\n")
            for name, t in model.state_dict().items():
                shape = "x".join(str(s) for s in t.shape) or "scalar"
                f.write(f"{name} {str(t.dtype).replace('torch.', '')} {shape}\n")
        print(f"{arch}: {n_params} parameters, {len(model.state_dict())} tensors")


if __name__ == "__main__":
    main()
