#!/usr/bin/env python3
"""Writes torchvision's state-dict layout (name, dtype, shape) for the ResNets rn50 mirrors.

Run on a machine with torchvision; the output is the fixture tests/fixtures/torchvision_<arch>.txt,
against which tests/models/test_resnet.cpp checks rn50's names and shapes.
"""
import sys
import torchvision

out_dir = sys.argv[1] if len(sys.argv) > 1 else "."
for arch in ["resnet18", "resnet34", "resnet50", "resnet101", "resnet152"]:
    model = getattr(torchvision.models, arch)(weights=None)
    n_params = sum(p.numel() for p in model.parameters())
    with open(f"{out_dir}/torchvision_{arch}.txt", "w") as f:
        f.write(f"# torchvision {torchvision.__version__} {arch}: {n_params} parameters\n")
        for name, t in model.state_dict().items():
            shape = "x".join(str(s) for s in t.shape) or "scalar"
            f.write(f"{name} {str(t.dtype).replace('torch.', '')} {shape}\n")
