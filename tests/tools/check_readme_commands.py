#!/usr/bin/env python3
"""tests/tools/check_readme_commands.py: every `rn50 ...` line of the README's code blocks runs as written.

  python3 tests/tools/check_readme_commands.py --rn50 build/rn50 --work DIR [--readme README.md] [--list]

The command lines are the lines of the README's fenced code blocks that start with `rn50 `, in the order they
appear. A block right after the comment `<!-- check_readme_commands: skip (why) -->` is one that needs what a CPU
machine lacks (a GPU, ImageNet) and is not run. Each line runs in DIR, in README order (a line may use what an
earlier one made), through bash with `rn50` standing for the binary, and must exit 0. What this adds to DIR before
the first line, so that the lines run as written from the repository root:

  configs/, bench/     links to the repository's folders (the configurations, the recorded results)
  batch.safetensors    a stored batch for `rn50 infer`, written by scripts/make_batch.py: F32 `images` [2,3,64,64]

No option is added to any line: the README's examples are small enough themselves. The first line that fails is
named, with the end of its output, and the script exits 1.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SKIP = re.compile(r"<!--\s*check_readme_commands:\s*skip\b.*?-->")
FENCE = re.compile(r"^\s*(```|~~~)")
TIMEOUT_S = 600


def command_lines(readme):
    """(line number, command) for every rn50 line of a fenced block, and the number of lines in skipped blocks."""
    commands, skipped = [], 0
    in_block = skip_next = skip_block = False
    with open(readme) as f:
        for number, line in enumerate(f, 1):
            if FENCE.match(line):
                if in_block:
                    in_block = False
                else:
                    in_block, skip_block, skip_next = True, skip_next, False
                continue
            if in_block:
                text = line.strip()
                if text.startswith("rn50 "):
                    if skip_block:
                        skipped += 1
                    else:
                        commands.append((number, text))
            elif SKIP.search(line):
                skip_next = True
            elif line.strip():
                skip_next = False  # the comment marks the block right after it, not one further down
    return commands, skipped


def prepare(work):
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    for folder in ["configs", "bench"]:
        os.symlink(os.path.join(ROOT, folder), os.path.join(work, folder))
    # As the README says: with scripts/make_batch.py (stdlib only), which this runs as a user would.
    subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "make_batch.py"), os.path.join(work, "batch.safetensors")],
                   check=True, stdout=subprocess.DEVNULL)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rn50", required=True, help="the rn50 binary")
    p.add_argument("--work", required=True, help="a folder to run in (removed first, and again when every command passed)")
    p.add_argument("--readme", default=os.path.join(ROOT, "README.md"))
    p.add_argument("--list", action="store_true", help="print the command lines and exit")
    opts = p.parse_args()
    readme = os.path.relpath(opts.readme)
    commands, skipped = command_lines(opts.readme)
    if opts.list:
        for number, command in commands:
            print(f"{readme}:{number}: {command}")
        print(f"({skipped} lines in blocks marked as needing a GPU are not run)")
        return 0
    if len(commands) < 3:
        print(f"check_readme_commands: found only {len(commands)} rn50 lines in {readme}'s code blocks",
              file=sys.stderr)
        return 1
    rn50 = os.path.abspath(opts.rn50)
    if not os.access(rn50, os.X_OK):
        print(f"check_readme_commands: {opts.rn50} is not an executable", file=sys.stderr)
        return 1
    work = os.path.abspath(opts.work)
    prepare(work)
    env = dict(os.environ, RN50_README_BINARY=rn50)
    for number, command in commands:
        start = time.monotonic()
        script = 'rn50() { "$RN50_README_BINARY" "$@"; }\n' + command
        try:
            done = subprocess.run(["bash", "-c", script], cwd=work, env=env, stdin=subprocess.DEVNULL,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=TIMEOUT_S)
            rc, output = done.returncode, done.stdout
        except subprocess.TimeoutExpired as e:
            rc, output = f"killed after {TIMEOUT_S} s", (e.stdout or b"").decode(errors="replace")
        seconds = time.monotonic() - start
        if rc != 0:
            tail = "\n".join(output.rstrip().splitlines()[-20:])
            print(f"{readme}:{number}: FAILED (exit {rc}, {seconds:.1f} s): {command}\n{tail}", file=sys.stderr)
            return 1
        print(f"{readme}:{number}: ok ({seconds:.1f} s): {command}")
    print(f"check_readme_commands: all {len(commands)} command lines ran; {skipped} marked as needing a GPU not run")
    shutil.rmtree(work, ignore_errors=True)  # ~450 MB of runs and weights; a failure keeps them to look at
    return 0


if __name__ == "__main__":
    sys.exit(main())
