#!/usr/bin/env python3
"""tests/scripts/test_rn50_entry.py: scripts/rn50-entry puts the image's compat libraries first on LD_LIBRARY_PATH
for drivers older than 570, read from the proprietary and the open kernel modules' /proc/driver/nvidia/version, and
leaves everything as it is for newer drivers, without the compat folder or without the driver (a fake root; a fake
rn50 on PATH prints what it was given).

  python3 tests/scripts/test_rn50_entry.py
"""
import os
import subprocess
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ENTRY = os.path.join(ROOT, "scripts", "rn50-entry")

PROPRIETARY = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  {}  Sat Aug 19 01:15:15 UTC 2023\n" \
              "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n"
OPEN = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  {}  Release Build  " \
       "(dvs-builder@U16-I3-B03-4-3)  Thu Aug 17 21:16:19 UTC 2023\nGCC version:  gcc version 12.2.0\n"


class Entry(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.root = os.path.join(self.dir.name, "root")
        self.compat = os.path.join(self.root, "opt", "rn50", "compat")
        bin_dir = os.path.join(self.dir.name, "bin")
        os.makedirs(bin_dir)
        fake = os.path.join(bin_dir, "rn50")
        with open(fake, "w") as f:
            f.write('#!/bin/sh\necho "args=$*"\necho "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"\n'
                    'echo "RN50_CUDA_COMPAT=${RN50_CUDA_COMPAT:-}"\n')
        os.chmod(fake, 0o755)
        self.path = bin_dir + os.pathsep + "/usr/bin:/bin"

    def tearDown(self):
        self.dir.cleanup()

    def host(self, version_text=None, compat=True):
        if version_text is not None:
            os.makedirs(os.path.join(self.root, "proc", "driver", "nvidia"))
            with open(os.path.join(self.root, "proc", "driver", "nvidia", "version"), "w") as f:
                f.write(version_text)
        if compat:
            os.makedirs(self.compat)
            open(os.path.join(self.compat, "libcuda.so.580.95.05"), "w").close()
            os.symlink("libcuda.so.580.95.05", os.path.join(self.compat, "libcuda.so.1"))

    def entry(self, library_path=None):
        env = {"PATH": self.path, "RN50_ENTRY_ROOT": self.root}
        if library_path is not None:
            env["LD_LIBRARY_PATH"] = library_path
        out = subprocess.run(["sh", ENTRY, "doctor", "--quick"], capture_output=True, text=True, env=env, check=True)
        return dict(line.split("=", 1) for line in out.stdout.splitlines())

    def test_an_old_proprietary_driver_gets_the_compat_libraries_first(self):
        self.host(PROPRIETARY.format("535.104.05"))
        got = self.entry("/opt/rn50/nccl-plugin")
        self.assertEqual(got["args"], "doctor --quick")
        self.assertEqual(got["LD_LIBRARY_PATH"], self.compat + ":/opt/rn50/nccl-plugin")
        self.assertEqual(got["RN50_CUDA_COMPAT"], f"driver 535: CUDA forward compatibility from {self.compat}")

    def test_an_old_open_kernel_module_driver_too(self):
        self.host(OPEN.format("550.127.05"))
        got = self.entry()
        self.assertEqual(got["LD_LIBRARY_PATH"], self.compat)
        self.assertTrue(got["RN50_CUDA_COMPAT"].startswith("driver 550: "), got)

    def test_a_new_enough_driver_keeps_its_own_libcuda(self):
        for text in (PROPRIETARY.format("570.124.06"), OPEN.format("580.95.05")):
            with self.subTest(text=text[:60]):
                self.tearDown()
                self.setUp()
                self.host(text)
                got = self.entry("/opt/rn50/nccl-plugin")
                self.assertEqual(got["LD_LIBRARY_PATH"], "/opt/rn50/nccl-plugin")
                self.assertEqual(got["RN50_CUDA_COMPAT"], "")

    def test_no_driver_no_compat_folder_or_an_unreadable_version_change_nothing(self):
        for version_text, compat in ((None, True), (PROPRIETARY.format("535.104.05"), False),
                                     ("NVRM version: something else\n", True), ("", True)):
            with self.subTest(version=version_text, compat=compat):
                self.tearDown()
                self.setUp()
                self.host(version_text, compat)
                got = self.entry()
                self.assertEqual(got["LD_LIBRARY_PATH"], "")
                self.assertEqual(got["RN50_CUDA_COMPAT"], "")


if __name__ == "__main__":
    unittest.main()
