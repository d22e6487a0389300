#!/usr/bin/env python3
# tests/tools/check_layers.py: no source folder includes a header of a folder above it in the layering (the order of
# add_subdirectory in the top-level CMakeLists.txt); exits 1 naming each include that breaks it.
import os
import re
import sys

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
            for n, line in enumerate(open(path, encoding="utf-8"), 1):
                m = re.match(r'\s*#\s*include\s+"([^"/]+)/', line)
                if not m:
                    continue
                checked += 1
                target = m.group(1)
                if target not in rank:
                    bad.append(f"{rel}:{n}: includes {m.group(0).split()[-1]}, from no source folder")
                elif rank[target] > rank[folder]:
                    bad.append(f"{rel}:{n}: {folder}/ includes {target}/, which comes after it ({' < '.join(order)})")
for b in bad:
    print(b)
print(f"{checked} includes checked across {len(order)} folders; {len(bad)} break the layering")
sys.exit(1 if bad else 0)
