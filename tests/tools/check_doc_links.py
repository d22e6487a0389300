#!/usr/bin/env python3
# tests/tools/check_doc_links.py: every relative link of the repository's markdown files (README.md, docs/, bench/,
# the results pages) names a file or folder that exists, and its #anchor a heading (or an HTML id) of that file, by
# GitHub's rules: lowercase, punctuation other than '-' and '_' dropped, spaces to '-', a repeated heading numbered.
# Web links are not fetched. Exits 1 naming each link that does not resolve.
#   check_doc_links.py ROOT | --self-test
import functools
import os
import re
import sys

SKIP_DIRS = {".git", "build", "node_modules"}  # and any folder whose name starts with "build" or "."
INLINE = re.compile(r"(?<!!)\[[^\]]*\]\(([^()\s]+(?:\([^()\s]*\))?[^()\s]*)(?:\s+\"[^\"]*\")?\)")
IMAGE = re.compile(r"!\[[^\]]*\]\(([^()\s]+)\)")
REFERENCE = re.compile(r"^\s{0,3}\[[^\]]+\]:\s+(\S+)", re.M)
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
HTML_ID = re.compile(r"<[^>]+\b(?:id|name)=\"([^\"]+)\"")


def markdown_files(root):
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.startswith((".", "build")))
        for name in sorted(files):
            if name.endswith(".md"):
                yield os.path.join(folder, name)


def without_code(text):
    """The text with fenced blocks and inline code spans blanked (their brackets are not links)."""
    text = re.sub(r"^(```|~~~).*?^\1[^\n]*$", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.M | re.S)
    return re.sub(r"`[^`\n]*`", "``", text)


def slug(heading):
    text = re.sub(r"<[^>]+>", "", heading)  # inline HTML
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)  # a link's text stays
    text = text.replace("`", "").lower()
    text = "".join(c for c in text if c.isalnum() or c in " -_")
    return text.replace(" ", "-")


@functools.lru_cache(maxsize=None)
def anchors(path):
    found, seen = set(), {}
    text = re.sub(r"^(```|~~~).*?^\1[^\n]*$", "", open(path, encoding="utf-8").read(), flags=re.M | re.S)
    for line in text.splitlines():
        m = HEADING.match(line)
        if m:
            base = slug(m.group(2))
            n = seen.get(base, 0)
            seen[base] = n + 1
            found.add(base if n == 0 else f"{base}-{n}")
        found.update(HTML_ID.findall(line))
    return found


def check_file(path, root):
    text = without_code(open(path, encoding="utf-8").read())
    targets = INLINE.findall(text) + IMAGE.findall(text) + REFERENCE.findall(text)
    problems = []
    for target in targets:
        target = target.strip("<>")
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):  # http:, https:, mailto: ...
            continue
        file_part, _, anchor = target.partition("#")
        resolved = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part else path
        rel = os.path.relpath(path, root)
        if not os.path.exists(resolved):
            problems.append(f"{rel}: link to {target}: no such file")
        elif anchor and resolved.endswith(".md") and anchor not in anchors(resolved):
            problems.append(f"{rel}: link to {target}: no heading '#{anchor}' in {os.path.relpath(resolved, root)}")
    return problems


def check(root):
    problems, count = [], 0
    for path in markdown_files(root):
        count += 1
        problems += check_file(path, root)
    return problems, count


def self_test():
    """The check fails where it should, and passes what GitHub resolves."""
    import tempfile
    with tempfile.TemporaryDirectory() as t:
        os.makedirs(os.path.join(t, "docs"))
        open(os.path.join(t, "docs", "a.md"), "w").write(
            "# Title\n\n## The `key`'s value: 3% of it\n\n## Again\n\n## Again\n\n<a id=\"here\"></a>\n"
            "```\n[not a link](missing.md)\n```\n")
        open(os.path.join(t, "README.md"), "w").write(
            "[ok](docs/a.md#the-keys-value-3-of-it) [ok](docs/a.md#again-1) [ok](docs/a.md#here) [ok](docs/)\n"
            "[web](https://example.com/x.md) `[code](gone.md)` ![picture](docs/a.md)\n"
            "[bad file](docs/b.md) [bad anchor](docs/a.md#again-2) [self](#nothing)\n[ref]: docs/c.md\n")
        problems, _ = check(t)
        expected = ["docs/b.md: no such file", "#again-2", "#nothing", "docs/c.md: no such file"]
        ok = len(problems) == len(expected) and all(any(e in p for p in problems) for e in expected)
        print("\n".join(problems))
        print("self-test " + ("passed" if ok else "FAILED"))
        return 0 if ok else 1


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    if len(sys.argv) != 2:
        print("usage: check_doc_links.py ROOT | --self-test", file=sys.stderr)
        return 2
    problems, count = check(sys.argv[1])
    for p in problems:
        print(p)
    print(f"check_doc_links: {count} markdown files, {len(problems)} links that do not resolve")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
