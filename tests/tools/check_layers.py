#!/usr/bin/env python3
# tests/tools/check_layers.py: no source folder includes a header of a folder above it in the layering (the order of
# add_subdirectory in the top-level CMakeLists.txt), and a subfolder sits below its parent: it includes none of its
# parent folder's own files nor a sibling subfolder's (input/gpu_decode/ knows nothing of input/source.h). Exits 1
# naming each include that breaks either rule.
import os
import re
import sys

# Headers only some folders may include, and folder pairs kept apart although the order would allow it.
CONFINED = {"core/config.h": ("core", "trainer", "commands")}
APART = {("trainer", "ops"): "the training engine reaches the fused ops only through the model"}


def self_test():
    """The check fails where it should: a made-up tree with one include of each kind that breaks a rule."""
    import subprocess
    import tempfile
    with tempfile.TemporaryDirectory() as t:
        open(os.path.join(t, "CMakeLists.txt"), "w").write(
            "".join(f"add_subdirectory({d})\n" for d in ["core", "codecs", "data", "ops", "input", "bench", "trainer"]))
        files = {"core/a.h": '#include "trainer/x.h"\n',  # a folder below
                 "data/f.h": '#include "core/config.h"\n',  # the configuration outside its folders
                 "trainer/g.h": '#include "ops/h.h"\n',  # a pair kept apart
                 "input/gpu_decode/b.h": '#include "input/source.h"\n',  # the parent's own file
                 "bench/ops/c.h": '#include "bench/decode/d.h"\n',  # a sibling subfolder
                 "input/ok.h": '#include "input/gpu_decode/b.h"\n#include "data/e.h"\n'}  # both fine
        for name, text in files.items():
            os.makedirs(os.path.join(t, os.path.dirname(name)), exist_ok=True)
            open(os.path.join(t, name), "w").write(text)
        out = subprocess.run([sys.executable, __file__, t], capture_output=True, text=True)
        found = [l.split(":")[0] for l in out.stdout.splitlines() if "includes" in l and ": " in l]
        assert out.returncode == 1 and sorted(found) == ["bench/ops/c.h", "core/a.h", "data/f.h",
                                                      "input/gpu_decode/b.h", "trainer/g.h"], out.stdout
    print("self-test: the five breaking includes found, the two fine ones not")


if sys.argv[1:] == ["--self-test"]:
    self_test()
    sys.exit(0)
root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")
cmake = open(os.path.join(root, "CMakeLists.txt")).read()
order = re.findall(r"^add_subdirectory\((\w+)\)", cmake, re.M)
order = [d for d in order if d != "tests"]
rank = {d: i for i, d in enumerate(order)}
if len(rank) < 5:
    sys.exit(f"found only {order} in CMakeLists.txt's add_subdirectory lines")
bad = []
checked = 0
for folder in order:
    for base, _, files in os.walk(os.path.join(root, folder)):
        for name in files:
            if not name.endswith((".h", ".cpp", ".cu", ".cuh")):
                continue
            path = os.path.join(base, name)
            rel = os.path.relpath(path, root)
            here = os.path.dirname(rel).split(os.sep)  # [folder, subfolder, ...]
            for n, line in enumerate(open(path, encoding="utf-8"), 1):
                m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
                if not m or "/" not in m.group(1):
                    continue
                checked += 1
                parts = m.group(1).split("/")
                target = parts[0]
                if target not in rank:
                    bad.append(f"{rel}:{n}: includes {m.group(1)}, from no source folder")
                elif rank[target] > rank[folder]:
                    bad.append(f"{rel}:{n}: {folder}/ includes {target}/, which comes after it ({' < '.join(order)})")
                elif m.group(1) in CONFINED and folder not in CONFINED[m.group(1)]:
                    bad.append(f"{rel}:{n}: includes {m.group(1)}, which only {', '.join(CONFINED[m.group(1)])} may: "
                               "each part takes its own options, built from the configuration in trainer/options.cpp")
                elif (folder, target) in APART:
                    bad.append(f"{rel}:{n}: {folder}/ includes {target}/: {APART[(folder, target)]}")
                elif target == folder and len(here) > 1:
                    # Inside one folder: a subfolder may include only its own subtree (and folders before its parent).
                    there = parts[:-1]
                    if there[: len(here)] != here and not (len(there) > len(here) and there[: len(here)] == here):
                        if len(there) <= len(here) and here[: len(there)] == there:
                            what = f"its parent {'/'.join(there)}/'s own file"
                        else:
                            what = f"the sibling {'/'.join(there)}/"
                        bad.append(f"{rel}:{n}: {'/'.join(here)}/ includes {what} {m.group(1)}: a subfolder sits below "
                                   "its parent and beside its siblings")
for b in bad:
    print(b)
subfolders = sorted({os.path.relpath(b, root) for f in order for b, _, names in os.walk(os.path.join(root, f))
                     if b != os.path.join(root, f) and any(x.endswith((".h", ".cpp", ".cu", ".cuh")) for x in names)})
print(f"{checked} includes checked across {len(order)} folders and {len(subfolders)} subfolders ({', '.join(subfolders)}); "
      f"{len(bad)} break the layering")
sys.exit(1 if bad else 0)
