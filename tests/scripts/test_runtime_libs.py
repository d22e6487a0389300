#!/usr/bin/env python3
"""tests/scripts/test_runtime_libs.py: scripts/runtime-libs.sh collect on small binaries built here (no Docker, no
GPU): a pattern that matches nothing fails, libs.txt names each library's Debian package or wheel, the binary loses
the build's search path, a library of no package keeps its second name as a link, and RN50_RUNTIME_AS_NEEDED drops
a needed-library entry that defines none of the library's imports, with what it alone pulled in.

  python3 tests/scripts/test_runtime_libs.py
"""
import os
import shutil
import subprocess
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "scripts", "runtime-libs.sh")


def run(*args, env=None, check=True):
    result = subprocess.run(args, capture_output=True, text=True, env={**os.environ, **(env or {})})
    if check and result.returncode != 0:
        raise AssertionError(f"{args} exited {result.returncode}: {result.stdout}{result.stderr}")
    return result


def needed(path):
    out = run("readelf", "-d", path).stdout
    return [line.split("[")[1].rstrip("]") for line in out.splitlines() if "(NEEDED)" in line]


def libs_txt(folder):
    """libs.txt's lines without its header, as {file: (package, version, source)}."""
    lines = open(os.path.join(folder, "libs.txt")).read().splitlines()
    assert lines[0].startswith("# FILE PACKAGE VERSION SOURCE"), lines[0]
    return {f: (p, v, s) for f, p, v, s in (line.split() for line in lines[1:])}


class Collect(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="rn50_runtime_libs_")
        src = os.path.join(cls.tmp, "main.c")
        with open(src, "w") as f:
            f.write('#include <stdio.h>\n#include <zlib.h>\nint main(void) { puts(zlibVersion()); return 0; }\n')
        # A build tree's binary: a search path into a folder that stands for the pip install.
        cls.binary = os.path.join(cls.tmp, "rn50")
        run("cc", src, "-o", cls.binary, "-lz", "-Wl,-rpath," + os.path.join(cls.tmp, "site", "torch", "lib"))
        # A library linked as Debian linked LibTorch: it needs libbz2 but imports nothing from it.
        lib_src = os.path.join(cls.tmp, "trim.c")
        with open(lib_src, "w") as f:
            f.write('#include <zlib.h>\nconst char* trim_version(void) { return zlibVersion(); }\n')
        cls.libdir = os.path.join(cls.tmp, "libs")
        os.makedirs(cls.libdir)
        run("cc", "-shared", "-fPIC", lib_src, "-o", os.path.join(cls.libdir, "libtrim.so"),
            "-Wl,--no-as-needed", "-lz", "-lbz2")
        user = os.path.join(cls.tmp, "user.c")
        with open(user, "w") as f:
            f.write('#include <stdio.h>\nconst char* trim_version(void);\n'
                    'int main(void) { puts(trim_version()); return 0; }\n')
        cls.trim_user = os.path.join(cls.tmp, "trim_user")
        run("cc", user, "-o", cls.trim_user, "-L" + cls.libdir, "-ltrim", "-Wl,-rpath," + cls.libdir)
        # A wheel's library: a copy of zlib under a made-up distribution whose RECORD lists it.
        site = os.path.join(cls.tmp, "site")
        os.makedirs(os.path.join(site, "fakewheel"))
        os.makedirs(os.path.join(site, "fakewheel-1.2.3.dist-info"))
        zlib = run("sh", "-c", "ldd " + cls.binary + " | awk '$1 ~ /^libz[.]so/ {print $3}'").stdout.strip()
        cls.wheel_lib = os.path.join(site, "fakewheel", "libwheel.so.1")
        shutil.copy(zlib, cls.wheel_lib)
        with open(os.path.join(site, "fakewheel-1.2.3.dist-info", "METADATA"), "w") as f:
            f.write("Metadata-Version: 2.1\nName: fakewheel\nVersion: 1.2.3\n")
        with open(os.path.join(site, "fakewheel-1.2.3.dist-info", "RECORD"), "w") as f:
            f.write("fakewheel/libwheel.so.1,,\nfakewheel-1.2.3.dist-info/METADATA,,\n")
        cls.site = site
        # A library of no package, and a second name of it.
        cls.loose = os.path.join(cls.tmp, "loose")
        os.makedirs(cls.loose)
        shutil.copy(zlib, os.path.join(cls.loose, "libloose.so.1"))
        os.symlink("libloose.so.1", os.path.join(cls.loose, "libloose.so"))

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp)

    def test_a_pattern_that_matches_nothing_fails(self):
        out = os.path.join(self.tmp, "none")
        result = run("bash", SCRIPT, "collect", self.binary, out, os.path.join(self.tmp, "nowhere", "*.so*"),
                     check=False)
        self.assertEqual(result.returncode, 1, result.stdout + result.stderr)
        self.assertIn("nowhere/*.so*: no such file (a library pattern that matches nothing?)", result.stderr)
        self.assertEqual(len(result.stderr.strip().splitlines()), 1, result.stderr)

    def test_packages_wheels_links_and_no_search_path(self):
        out = os.path.join(self.tmp, "collected")
        run("bash", SCRIPT, "collect", self.binary, out, self.wheel_lib,
            os.path.join(self.loose, "libloose.so.1"), os.path.join(self.loose, "libloose.so"),
            env={"PYTHONPATH": self.site})
        libs = libs_txt(out)
        zlib = [f for f in libs if f.startswith("lib/libz.so")]
        self.assertEqual(len(zlib), 1, libs)
        package, version, source = libs[zlib[0]]
        self.assertEqual(source, "deb")
        self.assertEqual(version, run("dpkg-query", "-W", "-f=${Version}", package).stdout)
        self.assertEqual(libs["lib/libwheel.so.1"], ("fakewheel", "1.2.3", "pip"))
        self.assertEqual(libs["lib/libloose.so.1"], ("-", "-", "-"))
        self.assertEqual(libs["lib/libloose.so"], ("-", "-", "-"))
        self.assertTrue(os.path.islink(os.path.join(out, "lib", "libloose.so")))
        self.assertFalse(os.path.islink(os.path.join(out, "lib", "libloose.so.1")))
        self.assertTrue(os.path.exists(os.path.join(out, "licenses", package)))
        dynamic = run("readelf", "-d", self.binary).stdout
        self.assertIn("RUNPATH", dynamic)  # what the copy must lose
        copied = os.path.join(out, "bin", "rn50")
        self.assertNotIn("PATH", run("readelf", "-d", copied).stdout)
        self.assertEqual(needed(copied), needed(self.binary))
        self.assertEqual(run(copied, env={"LD_LIBRARY_PATH": os.path.join(out, "lib")}).stdout.strip(),
                         run(self.binary).stdout.strip())

    def test_as_needed_drops_what_a_library_imports_nothing_from(self):
        before = needed(os.path.join(self.libdir, "libtrim.so"))
        self.assertTrue(any(n.startswith("libbz2.so") for n in before), before)
        out = os.path.join(self.tmp, "trimmed")
        result = run("bash", SCRIPT, "collect", self.trim_user, out, env={"RN50_RUNTIME_AS_NEEDED": "libtrim.so"})
        self.assertIn("libtrim.so without 1 libraries it imports nothing from: libbz2.so", result.stdout)
        after = needed(os.path.join(out, "lib", "libtrim.so"))
        self.assertEqual(after, [n for n in before if not n.startswith("libbz2.so")])
        libs = libs_txt(out)
        self.assertFalse([f for f in libs if "libbz2" in f], libs)
        self.assertFalse([f for f in os.listdir(os.path.join(out, "lib")) if "libbz2" in f])
        self.assertEqual(libs["lib/libtrim.so"], ("-", "-", "-"))
        self.assertEqual(os.path.getsize(os.path.join(self.libdir, "libtrim.so")),
                         os.path.getsize(os.path.join(out, "lib", "libtrim.so")))
        # The trimmed set runs, and loads no libbz2.
        env = {"LD_LIBRARY_PATH": os.path.join(out, "lib"), "LD_DEBUG": "libs"}
        ran = run(os.path.join(out, "bin", "rn50"), env=env)
        self.assertEqual(ran.stdout.strip(), run(self.trim_user).stdout.strip())
        self.assertNotIn("libbz2", ran.stderr)
        self.assertIn(os.path.join(out, "lib", "libtrim.so"), ran.stderr)

    def test_a_library_the_binary_does_not_load_cannot_be_trimmed(self):
        result = run("bash", SCRIPT, "collect", self.binary, os.path.join(self.tmp, "bad"),
                     env={"RN50_RUNTIME_AS_NEEDED": "libtrim.so"}, check=False)
        self.assertEqual(result.returncode, 1)
        self.assertIn("RN50_RUNTIME_AS_NEEDED: " + self.binary + " does not load libtrim.so", result.stderr)


if __name__ == "__main__":
    unittest.main()
