#!/usr/bin/env python3
"""tests/bench/test_ncu_kernel_classes.py: bench/ncu_kernel_classes.py on made-up ncu CSV (no GPU): each class by
kernel name, the time units, --last-steps cutting whole steps at the fused SGD or AdamW kernel, and --ranges' per-layer
table from kernels named after rn50's NVTX ranges.

  python3 tests/bench/test_ncu_kernel_classes.py
"""
import argparse
import contextlib
import importlib.util
import io
import os
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
spec = importlib.util.spec_from_file_location("ncu", os.path.join(ROOT, "bench", "ncu_kernel_classes.py"))
ncu = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ncu)

SGD = "void rn50::cuda::kernels::(anonymous namespace)::fused_sgd_kernel<float>(const SgdSlice *)"


def write_csv(rows):
    """rows: (kernel name, unit, value); returns the path of an ncu-like CSV with a log line before it."""
    f = tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False)
    f.write("==PROF== Connected to process 1\n[2026-12-01] [info] a log line\n")
    f.write('"ID","Kernel Name","Metric Name","Metric Unit","Metric Value"\n')
    for i, (name, unit, value) in enumerate(rows):
        f.write(f'"{i}","{name}","gpu__time_duration.sum","{unit}","{value}"\n')
    f.close()
    return f.name


class Classify(unittest.TestCase):
    def test_names(self):
        cases = {
            "sm90_xmma_fprop_implicit_gemm_f16f16_f16f32_f32_nhwckrsc_nhwc": "convolution/matmul",
            "void gemm::warp_specialized_kernel_gmma_utmaldg<fprop::Warp_specialized_gmma_bn_apply": "convolution/matmul",
            "cudnn_generated_fort_native_sm80_convFwd_genStats_knob_21": "convolution/matmul",
            "void cudnn::batchnorm_fwtr_nhwc_semiPersist<__half, float>": "batchnorm",
            "void ops::<unnamed>::apply_kernel<__half, 8>(ops::ApplyArgs)": "batchnorm",
            "void rn50::ops::kernels::(anonymous namespace)::dx_kernel<__half, 8, 2>": "batchnorm",
            "void at::<unnamed>::max_pool_backward_nhwc<c10::Half, float>(const T1 *)": "elementwise/other",
            "void at::vectorized_elementwise_kernel<8, at::CUDAFunctor_add<c10::Half>>": "elementwise/other",
            SGD: "optimizer",
            # rn50's own max-pool is pooling, not BatchNorm, though it lives in rn50::ops
            "void rn50::ops::kernels::(anonymous namespace)::max_pool_forward_kernel<__half>": "elementwise/other",
            "void rn50::ops::kernels::(anonymous namespace)::layer_norm_forward_kernel<__half, float, __half>":
                "layernorm",
            "void rn50::ops::kernels::(anonymous namespace)::scaled_residual_backward_kernel<float, __half>": "layernorm",
            "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float, float>": "layernorm",
            "void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128>>": "attention",
            "cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_3": "attention",
            "void at::native::vectorized_elementwise_kernel<4, GeluCUDAKernelImpl<c10::Half>>": "gelu",
            "void at::native::unrolled_elementwise_kernel<direct_copy_kernel_cuda, float, c10::Half>": "copy/cast",
            "void rn50::cuda::kernels::(anonymous namespace)::fused_adamw_kernel(UpdateChunks)": "optimizer",
            "nvjet_hsh_256x128_64x4_1x2_h_bz_coopA_NTT": "convolution/matmul",
        }
        for name, cls in cases.items():
            self.assertEqual(ncu.classify(name), cls, name)


class Steps(unittest.TestCase):
    def test_units_and_last_steps(self):
        step = [("sm90_xmma_fprop", "usecond", "2"), ("void at::vectorized_elementwise_kernel<8>", "nsecond", "1,000"),
                (SGD, "msecond", "0.001")]
        path = write_csv([("autotune_conv_candidate", "msecond", "50")] + step * 3)
        try:
            kernels = ncu.read_kernels(path)
            self.assertEqual(len(kernels), 10)
            self.assertEqual([t for _, t in kernels[1:4]], [2000.0, 1000.0, 1000.0])
            last = ncu.last_steps(kernels, 2)  # the start-up kernel and the first step are left out
            self.assertEqual(len(last), 6)
            self.assertEqual(sum(t for _, t in last), 8000.0)
            with self.assertRaises(SystemExit):
                ncu.last_steps(kernels, 3)  # three SGD kernels bound only two whole steps
        finally:
            os.unlink(path)

    def test_adamw_ends_a_step_too(self):
        adamw = "void rn50::cuda::kernels::(anonymous namespace)::fused_adamw_kernel(UpdateChunks)"
        path = write_csv([("nvjet_hsh", "usecond", "3"), (adamw, "usecond", "1")] * 3)
        try:
            self.assertEqual(sum(t for _, t in ncu.last_steps(ncu.read_kernels(path), 2)), 8000.0)
        finally:
            os.unlink(path)

    def test_metrics_of_one_kernel_share_its_id_and_rates_weigh_by_time(self):
        dram = "dram__throughput.avg.pct_of_peak_sustained_elapsed"
        f = tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False)
        f.write('"ID","Kernel Name","Metric Name","Metric Unit","Metric Value"\n')
        for i, (name, us, pct) in enumerate([("nvjet_a", "3", "10"), ("void at::add_kernel", "1", "90"),
                                             (SGD, "1", "50")]):
            f.write(f'"{i}","{name}","gpu__time_duration.sum","usecond","{us}"\n')
            f.write(f'"{i}","{name}","{dram}","%","{pct}"\n')
        f.close()
        try:
            kernels = ncu.read_kernel_metrics(f.name)
            self.assertEqual(len(kernels), 3)
            self.assertEqual(kernels[0], ("nvjet_a", {"gpu__time_duration.sum": 3000.0, dram: 10.0}))
            self.assertEqual(ncu.read_kernels(f.name)[1], ("void at::add_kernel", 1000.0))
            rates = ncu.weighted_rates(kernels)
            self.assertAlmostEqual(rates[dram], (3 * 10 + 1 * 90 + 1 * 50) / 5)
            self.assertEqual(ncu.short_metric(dram), "dram__throughput")
        finally:
            os.unlink(f.name)

    def test_unknown_unit_is_refused(self):
        path = write_csv([(SGD, "cycle", "5")])
        try:
            with self.assertRaises(SystemExit):
                ncu.read_kernels(path)
        finally:
            os.unlink(path)


class Ranges(unittest.TestCase):
    def test_layers_in_the_models_order_forward_and_backward_and_the_rest_by_class(self):
        step = [("stem forward", "usecond", "1"), ("layer1.0 forward", "usecond", "2"),
                ("layer10.2 forward", "usecond", "3"), ("layer2.1 forward", "usecond", "4"),
                ("head forward", "usecond", "1"), ("layer2.1 backward", "usecond", "5"),
                ("layer1.0 backward", "usecond", "6"), ("weight casts", "usecond", "1"),
                ("void at::native::max_pool_backward_nhwc<c10::Half>", "usecond", "2"), (SGD, "usecond", "1")]
        path = write_csv(step * 3)
        try:
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                ncu.print_ranges(path, argparse.Namespace(last_steps=2))
            lines = out.getvalue().splitlines()
            self.assertIn("20 kernels, 0.03 ms a step", lines[0])  # the last 2 of 3 steps, 26 us each
            rows = [line.split() for line in lines[2:]]
            self.assertEqual([r[0] for r in rows[:5]], ["stem", "layer1.0", "layer2.1", "layer10.2", "head"])
            self.assertEqual(rows[1][1:4], ["0.002", "0.006", "0.008"])  # layer1.0: forward, backward, both
            self.assertEqual(rows[2][1:4], ["0.004", "0.005", "0.009"])
            text = out.getvalue()
            self.assertIn("weight casts", text)
            self.assertIn("outside: elementwise/other", text)  # the max-pool's backward, outside any range
            self.assertIn("outside: optimizer", text)
        finally:
            os.unlink(path)

    def test_a_profile_without_ranges_says_so(self):
        path = write_csv([("sm90_xmma_fprop", "usecond", "2"), (SGD, "usecond", "1")])
        try:
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                ncu.print_ranges(path, argparse.Namespace(last_steps=0))
            self.assertIn("--print-nvtx-rename kernel", out.getvalue())
        finally:
            os.unlink(path)


if __name__ == "__main__":
    unittest.main()
