#!/usr/bin/env python3
"""Writes torchvision's state-dict layout (name, dtype, shape) and parameter count of every model rn50 registers.

Run with a Python that has torchvision (Debian's: /usr/bin/python3, torchvision 0.14); the output is the fixture
tests/fixtures/torchvision_<arch>.txt, against which tests/models/test_registry.cpp checks rn50's names, dtypes,
shapes and parameter count.

usage: dump_torchvision_names.py [OUT_DIR]   (default: tests/fixtures beside this script)
"""
import os
import sys

import torchvision

# rn50's registry (models/registry.cpp), in its order.
ARCHS = ["resnet18", "resnet34", "resnet50", "resnet101", "resnet152", "resnext50_32x4d", "convnext_tiny",
         "vit_b_16", "efficientnet_b0"]


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "..", "fixtures")
    for arch in ARCHS:
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
