#!/usr/bin/env python3
"""Checks rn50's weights against torchvision in both directions (run where torch and torchvision exist).

  rn50 -> torchvision: a short rn50 run, `rn50 export`, torchvision.models.resnet50 loads the file
                       (strict), and both compute logits of the same random batch.
  torchvision -> rn50: a torchvision ResNet-50 (random weights, randomised BatchNorm statistics) saved as
                       safetensors, `rn50 infer` loads it, logits compared; `rn50 train --init-from` starts
                       from it with another class count (fine-tuning).
Both in FP32 with TF32 off. Passing: relative error ||a - b|| / ||b|| under 1e-5. Prints a markdown table.

usage: check_torchvision_roundtrip.py RN50_BINARY WORK_DIR [--device cuda:0]
"""
import argparse
import os
import subprocess
import sys

import torch
import torchvision
from safetensors.torch import load_file, save_file

TOLERANCE = 1e-5


def run(*args):
    result = subprocess.run([str(a) for a in args], capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"failed ({result.returncode}): {' '.join(map(str, args))}\n{result.stdout}\n{result.stderr}")
    return result.stdout + result.stderr


def rel_err(a, b):
    return ((a.double() - b.double()).norm() / b.double().norm()).item()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("rn50")
    parser.add_argument("work")
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    os.makedirs(args.work, exist_ok=True)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    device = torch.device(args.device)
    w = lambda name: os.path.join(args.work, name)
    torch.manual_seed(0)
    images = torch.randn(4, 3, 224, 224)
    save_file({"images": images.contiguous()}, w("images.safetensors"))
    rows = []

    # rn50 -> torchvision
    run(args.rn50, "train", "--data", "synthetic", "--device", args.device, "--model", "resnet50", "--epochs", "1",
        "--max-steps", "3", "--batch-size", "8", "--image-size", "64", "--val-resize", "64", "--synthetic-images", "64",
        "--warmup-epochs", "0", "--validate=off", "--out-dir", w("run"))
    run(args.rn50, "export", "--checkpoint", w("run/checkpoint.safetensors"), "--out", w("rn50.safetensors"))
    tv = torchvision.models.resnet50(num_classes=1000)
    tv.load_state_dict(load_file(w("rn50.safetensors")), strict=True)
    tv.eval().to(device)
    with torch.no_grad():
        tv_logits = tv(images.to(device)).cpu()
    run(args.rn50, "infer", "--weights", w("rn50.safetensors"), "--images", w("images.safetensors"),
        "--out", w("rn50_logits.safetensors"), "--device", args.device)
    rows.append(("rn50 export -> torchvision load_state_dict(strict=True)",
                 rel_err(load_file(w("rn50_logits.safetensors"))["logits"], tv_logits)))

    # torchvision -> rn50
    torch.manual_seed(1)
    tv = torchvision.models.resnet50(num_classes=1000)
    with torch.no_grad():
        for m in tv.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.normal_(0, 0.1)
                m.running_var.uniform_(0.5, 1.5)
                m.weight.normal_(1, 0.1)
                m.bias.normal_(0, 0.1)
    save_file({k: v.contiguous() for k, v in tv.state_dict().items()}, w("torchvision.safetensors"))
    tv.eval().to(device)
    with torch.no_grad():
        tv_logits = tv(images.to(device)).cpu()
    run(args.rn50, "infer", "--weights", w("torchvision.safetensors"), "--model", "resnet50",
        "--images", w("images.safetensors"), "--out", w("tv_logits.safetensors"), "--device", args.device)
    rows.append(("torchvision state_dict -> rn50 infer",
                 rel_err(load_file(w("tv_logits.safetensors"))["logits"], tv_logits)))
    run(args.rn50, "make-sample", "--out", w("sample"), "--classes", "4", "--per-class", "4", "--val-per-class", "1",
        "--size", "64")
    log = run(args.rn50, "train", "--data-root", w("sample"), "--device", args.device, "--epochs", "1",
              "--batch-size", "4", "--image-size", "64", "--val-resize", "64", "--validate=off",
              "--init-from", w("torchvision.safetensors"), "--out-dir", w("finetune"))
    finetune = [l.split("] ", 2)[-1] for l in log.splitlines() if "init_from" in l and "loaded" in l]

    print(f"torch {torch.__version__}, torchvision {torchvision.__version__}, device {args.device}, TF32 off\n")
    print("| direction | relative error of logits | passes (< 1e-5) |\n| --- | --- | --- |")
    ok = True
    for name, err in rows:
        print(f"| {name} | {err:.3e} | {'yes' if err < TOLERANCE else 'NO'} |")
        ok &= err < TOLERANCE
    print(f"\nfine-tuning start (1000 torchvision classes -> 4 sample classes): {finetune[-1] if finetune else 'NO init_from line'}")
    ok &= bool(finetune) and "all but the classifier" in finetune[-1]
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
