#!/usr/bin/env python3
"""bench/torch_reference.py: the PyTorch reference for rn50's step speed: a torchvision model (ResNet-50 by default,
--model for any other rn50 has) trained on synthetic batches on one GPU as rn50's optimized configuration trains it
(fp16 autocast, channels-last, cuDNN autotuning, label smoothing 0.1; SGD with momentum 0.9 and weight decay 1e-4, or
for ConvNeXt and ViT AdamW with fused=True and weight decay 0.05, as their recipes train them), eagerly, replayed from a
CUDA graph of the whole step, or compiled with torch.compile. PyTorch's GradScaler reads found-inf on the host every step (a sync rn50's device-side
loss scaler does not make), so by default the reference runs without loss scaling: its fastest form; --grad-scaler
adds it. --zero-grad none drops the gradients each step (PyTorch's default; the recorded references kept and zeroed
them). Prints one JSON line per mode: images/s over the timed steps, the compile or capture time, and the peak
memory. --profile N adds, per mode, where N steps' GPU time goes: torch.profiler's kernels summed by name and by class
(matrix products, attention, convolution, normalisation, activation, elementwise, copies, optimizer), per step.

  python3 bench/torch_reference.py --modes eager compile --batch 256 --steps 100 [--model vit_b_16]
  python3 bench/torch_reference.py --model vit_b_16 --modes eager compile --profile 5 --profile-out vit.json
"""
import argparse
import collections
import json
import re
import time

import torch
import torch.nn.functional as F
import torchvision


def make_step(model, opt, scaler, images, labels, set_to_none=False):
    def step():
        opt.zero_grad(set_to_none=set_to_none)
        with torch.autocast("cuda", dtype=torch.float16):
            loss = F.cross_entropy(model(images), labels, label_smoothing=0.1)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        return loss
    return step


ADAMW_MODELS = ("convnext", "vit")

# Kernel classes by name, first match wins: compile's Triton kernels first (their names say what they fused), then
# cuDNN/cuBLAS/CUTLASS, then ATen's own kernels.
KERNEL_CLASSES = [
    ("optimizer", r"adam|sgd|multi_tensor|foreach|amp_|non_finite"),
    ("attention", r"flash|fmha|attention|sdpa|softmax"),
    ("triton fused", r"^triton_"),
    ("matmul", r"gemm|nvjet|cublas|cutlass.*(?:gemm|tensorop)|sm90_xmma_gemm|splitk"),
    ("convolution", r"conv|dgrad|wgrad|fprop|implicit|xmma|cudnn|depthwise|winograd|nhwc"),
    ("normalisation", r"layer_norm|layernorm|batch_norm|batchnorm|rms_norm|welford|gammabeta|cuComputeGradGammaBeta"),
    ("activation", r"gelu|silu|relu|sigmoid|tanh"),
    ("copy/layout", r"copy|transpose|permute|cat|contiguous|memcpy|memset|fill"),
    ("reduction", r"reduce|sum|mean|norm"),
    ("elementwise", r"elementwise|vectorized|unrolled"),
]


def kernel_class(name):
    n = name.lower()
    for cls, pattern in KERNEL_CLASSES:
        if re.search(pattern, n):
            return cls
    return "other"


def profile_steps(run_step, steps):
    """GPU time per step by kernel name and by class, from torch.profiler's CUDA activity over `steps` steps."""
    from torch.profiler import ProfilerActivity, profile
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            run_step()
        torch.cuda.synchronize()
    by_name = collections.defaultdict(lambda: [0.0, 0])
    for e in prof.events():
        if e.device_type != torch.autograd.DeviceType.CUDA:
            continue
        by_name[e.name][0] += (e.time_range.end - e.time_range.start) / 1e3 / steps  # ms a step (times in us)
        by_name[e.name][1] += 1
    by_class = collections.defaultdict(float)
    for name, (ms, _) in by_name.items():
        by_class[kernel_class(name)] += ms
    total = sum(by_class.values())
    kernels = sorted(((ms, count / steps, name) for name, (ms, count) in by_name.items()), reverse=True)
    return {"gpu_ms_per_step": round(total, 3),
            "classes": {c: round(ms, 3) for c, ms in sorted(by_class.items(), key=lambda kv: -kv[1])},
            "kernels": [{"ms": round(ms, 3), "calls": calls, "class": kernel_class(name), "name": name[:200]}
                        for ms, calls, name in kernels[:60]]}


def run(mode, batch, steps, warmup, grad_scaler, name, optimizer, profile=0, zero_grad="zeros"):
    torch.manual_seed(0)
    torch.backends.cudnn.benchmark = True
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    model = getattr(torchvision.models, name)().cuda().to(memory_format=torch.channels_last)
    if optimizer == "auto":
        optimizer = "adamw" if name.startswith(ADAMW_MODELS) else "sgd"
    if optimizer == "adamw":
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.05, fused=True)
    else:
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    images = torch.randn(batch, 3, 224, 224, device="cuda").to(memory_format=torch.channels_last)
    labels = torch.randint(0, 1000, (batch,), device="cuda")
    torch.cuda.reset_peak_memory_stats()
    start = time.time()
    if mode == "compile":
        model = torch.compile(model)
    scaler = torch.amp.GradScaler("cuda", enabled=grad_scaler and mode != "graph")  # a graph cannot sync for it
    # Eager and compiled steps may drop the gradients (--zero-grad none, PyTorch's default): autograd then keeps each
    # new gradient rather than adding it to zeros. A graph needs them kept.
    step = make_step(model, opt, scaler, images, labels, set_to_none=zero_grad == "none" and mode != "graph")
    if mode == "graph":
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(warmup):
                step()
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        opt.zero_grad(set_to_none=False)
        with torch.cuda.graph(graph):
            step()
        run_step = graph.replay
    else:
        for _ in range(warmup):
            step()
        run_step = step
    torch.cuda.synchronize()
    setup_s = time.time() - start
    # Timed in windows of 10 steps: the median window is the rate (the first windows can still be warming up).
    rates = []
    for _ in range(max(1, steps // 10)):
        t0 = torch.cuda.Event(enable_timing=True)
        t1 = torch.cuda.Event(enable_timing=True)
        t0.record()
        for _ in range(10):
            run_step()
        t1.record()
        t1.synchronize()
        rates.append(10 * batch / (t0.elapsed_time(t1) / 1e3))
    rates.sort()
    profiled = profile_steps(run_step, profile) if profile else None
    return {"profile": profiled} | {"model": name, "optimizer": optimizer, "mode": mode, "zero_grad": zero_grad if mode != "graph" else "zeros", "batch": batch, "images_per_s": rates[len(rates) // 2], "min": rates[0], "max": rates[-1],
            "windows": len(rates), "setup_s": round(setup_s, 1), "grad_scaler": scaler.is_enabled(),
            "peak_allocated_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2),
            "peak_reserved_gib": round(torch.cuda.max_memory_reserved() / 2**30, 2),
            "torch": torch.__version__, "gpu": torch.cuda.get_device_name()}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--modes", nargs="+", default=["eager", "compile"], choices=["eager", "graph", "compile"])
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--steps", type=int, default=100, help="timed steps (in windows of 10)")
    p.add_argument("--warmup", type=int, default=15)
    p.add_argument("--grad-scaler", action="store_true", help="fp16 loss scaling with torch.amp.GradScaler")
    p.add_argument("--model", default="resnet50", help="a torchvision model name")
    p.add_argument("--optimizer", default="auto", choices=["auto", "sgd", "adamw"],
                   help="auto: AdamW for ConvNeXt and ViT, SGD otherwise")
    p.add_argument("--zero-grad", default="zeros", choices=["zeros", "none"],
                   help="zero_grad(set_to_none=False), as the recorded references ran, or set_to_none=True (eager and "
                        "compile only)")
    p.add_argument("--profile", type=int, default=0, metavar="N", help="after timing, profile N steps' kernels")
    p.add_argument("--profile-out", help="the profiles as JSON lines (default: in the printed line)")
    args = p.parse_args()
    for mode in args.modes:
        r = run(mode, args.batch, args.steps, args.warmup, args.grad_scaler, args.model, args.optimizer, args.profile,
                args.zero_grad)
        profiled = r.pop("profile")
        if profiled and args.profile_out:
            with open(args.profile_out, "a") as f:
                f.write(json.dumps({"model": args.model, "mode": mode, "images_per_s": r["images_per_s"]} | profiled) + "\n")
            print(f"# {args.model} {mode}: {profiled['gpu_ms_per_step']} GPU ms a step: " +
                  ", ".join(f"{c} {ms}" for c, ms in profiled["classes"].items()), flush=True)
        elif profiled:
            r["profile"] = profiled
        print(json.dumps(r), flush=True)


if __name__ == "__main__":
    main()
