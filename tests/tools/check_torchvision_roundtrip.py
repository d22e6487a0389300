#!/usr/bin/env python3
"""Checks one registered model's weights against torchvision in both directions (run where torch and torchvision
exist; Debian's /usr/bin/python3 has torchvision 0.14 with torch 1.13).

  torchvision -> rn50: a torchvision model with random weights (BatchNorm statistics, norms' affine parameters,
                       zero-initialised biases, layer scales and heads randomised too, so every tensor matters) saved
                       as safetensors; `rn50 infer --model ARCH` computes the logits of a stored batch.
  rn50 -> torchvision: `rn50 train --init-from` that file on a tiny sample with 4 classes (fine-tuning: all but the
                       classifier loaded), two steps of 4 images at 64 px (a ViT: one of 1 image at its 224 px, which
                       takes half a minute on a 2-core CPU), `rn50 export`; torchvision's model loads the export with
                       load_state_dict(strict=True), and it and `rn50 infer` compute the logits of the same batch.

Both in FP32 (TF32 off on a GPU), the models in evaluation mode. A logit passes when |rn50 - torchvision| is at most
1e-4 of max(|torchvision|, floor), the floor being 1% of the batch's largest |logit| (a logit near zero is compared
against that instead of its own size). Prints a markdown table; exits 0 when every row passes, 1 when one fails, 77
(ctest's skip) when this Python has no torchvision.

The safetensors files are read and written here (8-byte little-endian header length, JSON header, raw little-endian
data), as Debian has no python3-safetensors. WORK_DIR, empty or an earlier round trip's, is emptied first and removed when every row passes (a ViT's
leaves 1.3 GB, all the models' together 6 GB); a failure keeps it to look at.

usage: check_torchvision_roundtrip.py RN50_BINARY WORK_DIR [--arch resnet50] [--device cpu] [--batch 2]
"""
import argparse
import json
import os
import shutil
import struct
import subprocess
import sys

try:
    import numpy
    import torch
    import torchvision
except ImportError as e:
    print(f"skipped: {sys.executable} cannot import torch and torchvision ({e})")
    sys.exit(77)

REL_TOLERANCE = 1e-4
FLOOR = 0.01  # of the batch's largest |logit|
SAMPLE_CLASSES = 4

DTYPES = {torch.float32: "F32", torch.float64: "F64", torch.float16: "F16", torch.int64: "I64", torch.int32: "I32",
          torch.uint8: "U8", torch.bool: "BOOL"}
NUMPY = {"F32": numpy.float32, "F64": numpy.float64, "F16": numpy.float16, "I64": numpy.int64, "I32": numpy.int32,
         "U8": numpy.uint8, "BOOL": numpy.bool_}


def save_safetensors(tensors, path):
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        array = t.detach().cpu().contiguous().numpy()
        raw = array.astype(array.dtype.newbyteorder("<"), copy=False).tobytes()
        header[name] = {"dtype": DTYPES[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # the data starts 8-byte aligned
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for raw in blobs:
            f.write(raw)


def load_safetensors(path):
    with open(path, "rb") as f:
        blob = f.read()
    (length,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + length])
    header.pop("__metadata__", None)
    out = {}
    for name, entry in header.items():
        begin, end = entry["data_offsets"]
        dtype = numpy.dtype(NUMPY[entry["dtype"]]).newbyteorder("<")
        array = numpy.frombuffer(blob, dtype=dtype, count=(end - begin) // dtype.itemsize, offset=8 + length + begin)
        out[name] = torch.from_numpy(array.astype(dtype.newbyteorder("="))).reshape(entry["shape"])
    return out


def run(*args):
    result = subprocess.run([str(a) for a in args], capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"failed ({result.returncode}): {' '.join(map(str, args))}\n{result.stdout}\n{result.stderr}")
    return result.stdout + result.stderr


def randomise(model):
    """Random values wherever torchvision's initialisation leaves a tensor constant, so the comparison sees it."""
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, torch.nn.BatchNorm2d):
                module.running_mean.normal_(0, 0.1)
                module.running_var.uniform_(0.5, 1.5)
            if isinstance(module, (torch.nn.BatchNorm2d, torch.nn.LayerNorm)):
                module.weight.normal_(1, 0.1)
                module.bias.normal_(0, 0.1)
        for name, p in model.named_parameters():
            if name.endswith("layer_scale"):  # ConvNeXt's 1e-6: the residual branches would vanish
                p.uniform_(0.1, 0.5)
            elif p.numel() > 1 and bool((p == p.flatten()[0]).all()):
                p.normal_(0, 0.02)  # zero biases, ViT's head and class token


def compare(ours, theirs):
    """(largest relative error with the floor, largest absolute error, largest |logit|)."""
    if ours.shape != theirs.shape:
        sys.exit(f"logits of shape {list(ours.shape)} from rn50, {list(theirs.shape)} from torchvision")
    diff = (ours.double() - theirs.double()).abs()
    largest = theirs.double().abs().max().item()
    scale = theirs.double().abs().clamp(min=FLOOR * largest)
    return (diff / scale).max().item(), diff.max().item(), largest


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("rn50")
    parser.add_argument("work")
    parser.add_argument("--arch", default="resnet50")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--batch", type=int, default=2, help="images in the compared batch")
    args = parser.parse_args()
    # Only an earlier round trip's folder is emptied: a mistyped WORK_DIR must not cost anyone their files.
    if os.path.isdir(args.work) and os.listdir(args.work):
        if not os.path.exists(os.path.join(args.work, "images.safetensors")):
            sys.exit(f"{args.work} is not empty and not an earlier round trip's folder (no images.safetensors)")
        shutil.rmtree(args.work)
    os.makedirs(args.work, exist_ok=True)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    device = torch.device(args.device)
    w = lambda name: os.path.join(args.work, name)
    fixed = args.arch.startswith("vit_")  # a ViT takes its own image size only
    train_size = 224 if fixed else 64
    torch.manual_seed(0)
    images = torch.randn(args.batch, 3, 224, 224)
    save_safetensors({"images": images}, w("images.safetensors"))
    rows = []

    def tv_logits(model):
        model.eval().to(device)
        with torch.no_grad():
            return model(images.to(device)).cpu()

    def rn50_logits(weights, out, *model):
        run(args.rn50, "infer", "--weights", weights, *model, "--images", w("images.safetensors"), "--out", out,
            "--device", args.device)
        return load_safetensors(out)["logits"]

    # torchvision -> rn50
    torch.manual_seed(1)
    tv = getattr(torchvision.models, args.arch)(weights=None, num_classes=1000)
    randomise(tv)
    save_safetensors(tv.state_dict(), w("torchvision.safetensors"))
    theirs = tv_logits(tv)
    ours = rn50_logits(w("torchvision.safetensors"), w("tv_logits.safetensors"), "--model", args.arch)
    rows.append(("torchvision state_dict -> rn50 infer", *compare(ours, theirs)))

    # rn50 -> torchvision, starting from those weights with another class count
    run(args.rn50, "make-sample", "--out", w("sample"), "--classes", SAMPLE_CLASSES, "--per-class", 4,
        "--val-per-class", 1, "--size", 64)
    log = run(args.rn50, "train", "--data-root", w("sample"), "--model", args.arch, "--device", args.device,
              "--epochs", 1, "--max-steps", 1 if fixed else 2, "--batch-size", 1 if fixed else 4,
              "--image-size", train_size, "--val-resize", train_size, "--warmup-epochs", 0, "--validate=off",
              "--report=off", "--init-from", w("torchvision.safetensors"), "--out-dir", w("run"))
    finetune = [l.split("] ", 2)[-1] for l in log.splitlines() if "init_from" in l and "loaded" in l]
    run(args.rn50, "export", "--checkpoint", w("run/checkpoint.safetensors"), "--out", w("rn50.safetensors"))
    tv = getattr(torchvision.models, args.arch)(weights=None, num_classes=SAMPLE_CLASSES)
    tv.load_state_dict(load_safetensors(w("rn50.safetensors")), strict=True)
    theirs = tv_logits(tv)
    ours = rn50_logits(w("rn50.safetensors"), w("rn50_logits.safetensors"))
    rows.append(("rn50 export -> torchvision load_state_dict(strict=True)", *compare(ours, theirs)))

    print(f"{args.arch}: torch {torch.__version__}, torchvision {torchvision.__version__}, device {args.device}, "
          f"FP32, {args.batch} images of 224 px\n")
    print(f"| direction | largest relative error per logit (floor {FLOOR:g} of the largest) | largest absolute error "
          f"| largest logit | passes (< {REL_TOLERANCE:g}) |\n| --- | --- | --- | --- | --- |")
    ok = True
    for name, rel, absolute, largest in rows:
        print(f"| {name} | {rel:.3e} | {absolute:.3e} | {largest:.3g} | {'yes' if rel < REL_TOLERANCE else 'NO'} |")
        ok &= rel < REL_TOLERANCE
    start = finetune[-1] if finetune else "NO init_from line"
    print(f"\nfine-tuning start (1000 torchvision classes -> {SAMPLE_CLASSES} sample classes): {start}")
    ok &= bool(finetune) and "all but the classifier" in finetune[-1]
    if ok:
        shutil.rmtree(args.work, ignore_errors=True)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
