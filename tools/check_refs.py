#!/usr/bin/python3
"""Every documentation reference in the repository resolves.

A reference is a repository path to a Markdown file, optionally followed by
sections or a quoted heading:

    docs/spec/nvfp4.md §4.2        docs/analysis.md §3.1, §3.4
    docs/spec/hif4.md §6.1-§6.3    docs/gemm.md "NaN"

The file must exist; each §N or §N.M must be the number of a heading of that
file ("## 4. ..." or "### 4.2 ..."); a quoted name must appear in a heading or
a bold paragraph lead. Citations of files a user of the project does not have
fail too: bare spec names (`nvfp4.md §4`), DESIGN.md, STYLE.md and the
shared drafts' folder.

Sources scanned: the text files under the repository's source, test, tool and
documentation folders; with --cli, also every command's --help text and the
spec_ref of every recipe (`fp4emu formats --json`).

Usage: check_refs.py [--root DIR] [--cli PATH/TO/fp4emu]
       check_refs.py --self-test     (the checker finds planted bad refs)
Exit status: 0 all references resolve, 1 some do not (each is listed).

Commands in the Markdown files' shell blocks are references too: a command
that starts with a repository path (`bench/make_study_dump.py ...`,
`tools/test.sh`) must name an executable file, or a reader's copy of the
command fails with "Permission denied".
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

SCAN_DIRS = ["include", "src", "tools", "tests", "bench", "fuzz", "golden", "python", "notebooks", "studies",
             "docs", "cmake"]
SCAN_FILES = ["README.md", "CHANGELOG.md", "CMakeLists.txt"]
TEXT_EXT = {".hpp", ".h", ".cpp", ".cc", ".c", ".cu", ".cuh", ".py", ".pyi", ".md", ".txt", ".cmake",
            ".sh", ".json", ".ipynb", ".in", ".toml", ".cfg", ".supp"}
# Fuzz corpora are arbitrary inputs, not documentation.
SKIP_DIRS = {".git", "__pycache__", "corpus"}

SEC = r"§\s?(\d+(?:\.\d+)*)"
SEC_ITEM = rf"{SEC}(?:\s*[-–]\s*§?\s?(\d+(?:\.\d+)*))?"
SEC_LIST = rf"(?:\s*(?:,|\band\b|\bor\b|/)?\s*{SEC_ITEM})+"
DOC_REF = re.compile(rf"(?<![\w.-])((?:docs|golden|fuzz|python|notebooks)/[\w./-]*?\.md|README\.md|CHANGELOG\.md)"
                     rf"(?P<secs>{SEC_LIST})?(?:(?:\s+\(?|\s*\()\\?\"(?P<quoted>[A-Za-z][^\"\\\n]{{0,59}})\\?\")?")
SEC_ONE = re.compile(SEC_ITEM)
# Citations a user cannot follow: the shared drafts by bare name, the design
# notes, the style notes, the drafts' folder.
BAD_REF = re.compile(r"(?<![\w/.-])(?:hif4|mxfp4|nvfp4|analysis|DESIGN|STYLE)\.md|\bshared/(?:spec|DESIGN)")


def headings(path, cache={}):
    if path not in cache:
        nums, names = set(), []
        with open(path, encoding="utf-8") as f:
            for line in f:
                m = re.match(r"#{1,6}\s+(.*)", line)
                if m:
                    title = m.group(1).strip()
                    names.append(title)
                    n = re.match(r"(\d+(?:\.\d+)*)\.?(?:\s|$)", title)
                    if n:
                        nums.add(n.group(1))
                names.extend(re.findall(r"\*\*([^*]+)\*\*", line))
        cache[path] = (nums, names)
    return cache[path]


def check_text(text, where, root, errors):
    """Append one message per unresolved or forbidden reference in `text`."""
    for lineno, line in enumerate(text.splitlines(), 1):
        loc = f"{where}:{lineno}" if lineno else where
        for m in BAD_REF.finditer(line):
            errors.append(f"{loc}: '{m.group(0)}' names a file the project does not have; "
                          f"cite docs/spec/, docs/analysis.md or docs/architecture.md")
        for m in DOC_REF.finditer(line):
            rel = m.group(1)
            path = os.path.join(root, rel)
            if not os.path.isfile(path):
                errors.append(f"{loc}: {rel} does not exist")
                continue
            nums, names = headings(path)
            for s in SEC_ONE.finditer(m.group("secs") or ""):
                for num in filter(None, s.groups()):
                    if num not in nums:
                        errors.append(f"{loc}: {rel} has no section §{num}")
            quoted = m.group("quoted")
            if quoted and not any(quoted in n for n in names):
                errors.append(f'{loc}: {rel} has no heading "{quoted}"')


SHELL_FENCES = {"", "sh", "bash", "shell", "console"}
COMMAND_WRAPPERS = {"sudo", "env", "time", "exec", "nohup", "nice"}
REPO_PATH = re.compile(r"(?:\./)?[\w.-]+(?:/[\w.-]+)+")


def check_commands(text, where, root, errors):
    """Append one message per shell-block command that runs a repository file
    without the executable bit."""
    fence, continued = None, False
    for lineno, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if stripped.startswith("```"):
            fence = stripped[3:].strip().lower() if fence is None else None
            continue
        # A line after a trailing backslash holds arguments, not a command.
        was_continued, continued = continued, stripped.endswith("\\")
        if fence not in SHELL_FENCES or stripped.startswith("#") or was_continued:
            continue
        for command in re.split(r"&&|\|\||[;|]", stripped.removeprefix("$ ")):
            words = command.split()
            while words and (re.match(r"\w+=", words[0]) or words[0] in COMMAND_WRAPPERS
                             or words[0].startswith("-") or words[0].isdigit()):
                words.pop(0)
            if not words or not REPO_PATH.fullmatch(words[0]):
                continue
            path = os.path.join(root, words[0])
            if os.path.isfile(path) and not os.access(path, os.X_OK):
                errors.append(f"{where}:{lineno}: the command runs {words[0]}, which is not executable "
                              f"(git update-index --chmod=+x {words[0].removeprefix('./')})")


def scan_files(root):
    for f in SCAN_FILES:
        if os.path.isfile(os.path.join(root, f)):
            yield f
    for d in SCAN_DIRS:
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, d)):
            dirnames[:] = sorted(x for x in dirnames if x not in SKIP_DIRS)
            for name in sorted(filenames):
                if os.path.splitext(name)[1] in TEXT_EXT or name == "CMakeLists.txt":
                    yield os.path.relpath(os.path.join(dirpath, name), root)


def check_tree(root, errors):
    n = 0
    for rel in scan_files(root):
        if rel == "tools/check_refs.py":  # its docstring shows the forms, bad ones included
            continue
        try:
            text = open(os.path.join(root, rel), encoding="utf-8").read()
        except UnicodeDecodeError:
            continue
        check_text(text, rel, root, errors)
        if rel.endswith(".md"):
            check_commands(text, rel, root, errors)
        n += 1
    return n


def check_cli(cli, root, errors):
    def run(*args):
        r = subprocess.run([cli, *args], capture_output=True, text=True)
        return r.stdout + r.stderr

    def subcommands(help_text):
        # CLI11 lists them, one per line, under "Subcommands:".
        names, inside = [], False
        for line in help_text.splitlines():
            if re.match(r"\S.*:$", line):
                inside = line.startswith("Subcommands")
                continue
            m = re.match(r"\s{2,}([a-z][a-z0-9-]*)\s{2,}\S", line) if inside else None
            if m:
                names.append(m.group(1))
        return names

    checked = 0
    pending = [[c] for c in subcommands(run("--help"))]
    if not pending:
        errors.append(f"{cli} --help lists no commands")
    while pending:
        cmd = pending.pop(0)
        text = run(*cmd, "--help")
        check_text(text, f"fp4emu {' '.join(cmd)} --help", root, errors)
        checked += 1
        pending += [cmd + [c] for c in subcommands(text)]
    check_text(run("--help"), "fp4emu --help", root, errors)
    formats = json.loads(run("formats", "--json"))
    refs = 0
    for fmt in formats if isinstance(formats, list) else formats.get("formats", []):
        for r in fmt.get("recipes", []):
            spec = r.get("spec", "")
            refs += 1
            if not spec.startswith("docs/"):
                errors.append(f"fp4emu formats --json: {r.get('id')} spec '{spec}' is not a docs/ path")
            check_text(spec, f"fp4emu formats --json: {r.get('id')}", root, errors)
    if refs == 0:
        errors.append("fp4emu formats --json lists no recipe")
    return checked, refs


def self_test():
    """Plant good and bad references in a scratch tree; the checker must flag
    exactly the bad ones."""
    with tempfile.TemporaryDirectory() as root:
        os.makedirs(os.path.join(root, "docs/spec"))
        os.makedirs(os.path.join(root, "src"))
        with open(os.path.join(root, "docs/spec/x.md"), "w") as f:
            f.write("# X\n## 1. One\n### 1.2 Two\n## NaN\n**Device semantics.** text\n")
        good = ("// docs/spec/x.md §1, §1.2 and docs/spec/x.md §1-§1.2\n"
                '// docs/spec/x.md "NaN", docs/spec/x.md ("Device semantics")\n')
        bad = ("// docs/spec/x.md §3\n"                 # no such section
               "// docs/spec/x.md §1.2, §1.4\n"         # second one missing
               "// docs/spec/y.md\n"                     # no such file
               '// docs/spec/x.md "Inf"\n'              # no such heading
               "// nvfp4.md §4.2\n"                      # bare draft name
               "// DESIGN.md §3\n")                      # design notes
        with open(os.path.join(root, "src/a.cpp"), "w") as f:
            f.write(good + bad)
        os.makedirs(os.path.join(root, "tools"))
        for name, mode in (("run.sh", 0o755), ("plain.sh", 0o644)):
            with open(os.path.join(root, "tools", name), "w") as f:
                f.write("#!/bin/sh\n")
            os.chmod(os.path.join(root, "tools", name), mode)
        with open(os.path.join(root, "docs/use.md"), "w") as f:
            f.write("```sh\ntools/run.sh --x\n# tools/plain.sh\n```\n"   # executable; a comment
                    "```python\ntools/plain.sh\n```\n"                 # not a shell block
                    "```sh\nX=1 nice -n 5 tools/plain.sh && tools/run.sh \\\n  tools/plain.sh\n```\n")  # line 9: not executable; line 10 an argument
        errors = []
        check_tree(root, errors)
        want = [3, 4, 5, 6, 7, 8, 9]
        got = sorted(int(e.split(":")[1]) for e in errors)
        if got != want:
            print("self-test FAILED: flagged lines", got, "expected", want, *errors, sep="\n  ")
            return 1
        print(f"self-test: {len(errors)} planted bad references found, good ones accepted")
        return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    ap.add_argument("--cli", help="fp4emu binary: also check its help texts and spec_ref values")
    ap.add_argument("--self-test", action="store_true")
    a = ap.parse_args()
    if a.self_test:
        return self_test()
    errors = []
    n = check_tree(a.root, errors)
    msg = f"{n} files"
    if a.cli:
        commands, recipes = check_cli(a.cli, a.root, errors)
        msg += f", {commands} command help texts, {recipes} recipe spec_refs"
    for e in errors:
        print(e)
    print(f"check_refs: {msg}: {len(errors)} unresolved reference(s)")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
