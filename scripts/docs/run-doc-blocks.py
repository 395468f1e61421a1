#!/usr/bin/env python3
"""Checks the code blocks of README.md and docs/**/*.md, and runs the tested ones.

    scripts/docs/run-doc-blocks.py [--list] [FILE.md ...]

Every fenced block needs an info string `LANG tested` or `LANG illustrative` (optionally followed by
`file=NAME`); a block without one is an error. For each page, in order, in a fresh temporary
directory that is also $HOME:
  - a tested block with `file=NAME` is written to NAME (not run);
  - a tested `sh`, `bash` or `console` block runs with bash -e (`console`: the lines after `$ `);
  - a tested `python` block runs with $STRIDER_PYTHON (else /usr/bin/python3);
  - other tested blocks (`text`, `json`, ...) are output the page shows, checked elsewhere.
A python block (or file) whose imports the interpreter lacks is skipped and named, and so are the sh
blocks that run such a file. `scripts/` is linked in, as if run from the repository root; `python3` on PATH is the same interpreter; $STRIDER_BIN is on PATH; when
a block mentions `$HOME/opt/strider`, `cmake --install $STRIDER_BUILD_DIR --prefix $HOME/opt/strider`
runs first. Exit 0 when every tested block ran and passed (or was skipped), 1 otherwise.
"""
import argparse
import ast
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FENCE = re.compile(r"^(\s*)(```+|~~~+)(.*)$")
SHELLS = {"sh", "bash", "console", "shell"}


def pages():
    found = [os.path.join(ROOT, "README.md")]
    found += sorted(glob.glob(os.path.join(ROOT, "docs", "**", "*.md"), recursive=True))
    return found


def blocks(path):
    """Yields (line, language, marker, file name, text) for every fenced block of a Markdown file."""
    with open(path) as handle:
        lines = handle.read().split("\n")
    index = 0
    while index < len(lines):
        match = FENCE.match(lines[index])
        if not match:
            index += 1
            continue
        indent, fence, info = match.groups()
        start = index
        body = []
        index += 1
        while index < len(lines) and not lines[index].strip().startswith(fence):
            line = lines[index]
            body.append(line[len(indent):] if line.startswith(indent) else line)
            index += 1
        index += 1
        words = info.split()
        language = words[0] if words else ""
        marker = words[1] if len(words) > 1 else ""
        name = next((word[5:] for word in words[2:] if word.startswith("file=")), None)
        yield start + 1, language, marker, name, "\n".join(body) + "\n"


def missing_imports(python, source):
    """The top-level modules the source imports that the interpreter cannot import."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    modules = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            modules.add(node.module.split(".")[0])
    missing = []
    for module in sorted(modules):
        if subprocess.run([python, "-c", f"import {module}"], stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL).returncode != 0:
            missing.append(module)
    return missing


def environment(work, python):
    shims = os.path.join(work, ".shims")
    os.makedirs(shims, exist_ok=True)
    os.symlink(python, os.path.join(shims, "python3"))
    env = dict(os.environ)
    path = [shims]
    if os.environ.get("STRIDER_BIN"):
        path.append(os.environ["STRIDER_BIN"])
    mpiexec = os.environ.get("STRIDER_MPIEXEC")
    if mpiexec and os.path.basename(mpiexec) != "mpirun":
        os.symlink(mpiexec, os.path.join(shims, "mpirun"))
    env["PATH"] = os.pathsep.join(path + [env.get("PATH", "")])
    env["HOME"] = work
    build = os.environ.get("STRIDER_BUILD_DIR")
    if build and os.path.isdir(os.path.join(build, "python")):
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [os.path.join(build, "python"), env.get("PYTHONPATH")]))
    return env


def run_page(path, python, results):
    relative = os.path.relpath(path, ROOT)
    tested = [block for block in blocks(path) if block[2] == "tested"]
    runnable = [b for b in tested if b[3] or b[1] in SHELLS or b[1] == "python"]
    if not runnable:
        return
    work = tempfile.mkdtemp(prefix="strider-docs.")
    try:
        env = environment(work, python)
        os.symlink(os.path.join(ROOT, "scripts"), os.path.join(work, "scripts"))  # as from the repository root
        if any("$HOME/opt/strider" in block[4] for block in runnable):
            build = os.environ.get("STRIDER_BUILD_DIR", "")
            install = subprocess.run(["cmake", "--install", build, "--prefix", os.path.join(work, "opt", "strider")],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            if install.returncode != 0:
                results.append((relative, 0, "fail", "cmake --install " + build + ":\n" + install.stdout))
                return
        unavailable = {}  # file name -> the modules it lacks
        for line, language, _, name, text in runnable:
            where = (relative, line)
            if name:
                with open(os.path.join(work, name), "w") as handle:
                    handle.write(text)
                if language == "python":
                    missing = missing_imports(python, text)
                    if missing:
                        unavailable[name] = missing
                continue
            if language == "python":
                missing = missing_imports(python, text)
                if missing:
                    results.append(where + ("skip", "no module " + ", ".join(missing)))
                    continue
                command = [python, "-c", text]
            else:
                lacking = [f for f in unavailable if re.search(r"\b" + re.escape(f) + r"\b", text)]
                if lacking:
                    results.append(where + ("skip", f"{lacking[0]} needs module {', '.join(unavailable[lacking[0]])}"))
                    continue
                if language == "console":
                    text = "\n".join(l[2:] for l in text.splitlines() if l.startswith("$ ")) + "\n"
                command = ["bash", "-e", "-o", "pipefail", "-c", text]
            start = time.monotonic()
            run = subprocess.run(command, cwd=work, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                 text=True, timeout=300)
            seconds = time.monotonic() - start
            if run.returncode == 0:
                results.append(where + ("pass", f"{language}, {seconds:.1f} s"))
            else:
                results.append(where + ("fail", f"exit {run.returncode}:\n{text}---\n{run.stdout[-4000:]}"))
                break  # later blocks of the page build on this one
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("files", nargs="*", help="Markdown files (default: README.md and docs/**/*.md)")
    parser.add_argument("--list", action="store_true", help="list the blocks and their markers, run nothing")
    options = parser.parse_args()
    files = [os.path.abspath(f) for f in options.files] or pages()
    unmarked = []
    for path in files:
        for line, language, marker, name, _ in blocks(path):
            relative = os.path.relpath(path, ROOT)
            if options.list:
                print(f"{relative}:{line}: {language or '(none)'} {marker or '(unmarked)'}{' file=' + name if name else ''}")
            if marker not in ("tested", "illustrative") or not language:
                unmarked.append(f"{relative}:{line}")
    if unmarked:
        print("run-doc-blocks: blocks without `LANG tested` or `LANG illustrative`: " + ", ".join(unmarked))
    if options.list:
        return 1 if unmarked else 0
    python = os.environ.get("STRIDER_PYTHON") or "/usr/bin/python3"
    results = []
    for path in files:
        run_page(path, python, results)
    for relative, line, status, detail in results:
        print(f"{status}: {relative}:{line}: {detail}")
    failed = [r for r in results if r[2] == "fail"]
    print(f"run-doc-blocks: {sum(r[2] == 'pass' for r in results)} passed, "
          f"{sum(r[2] == 'skip' for r in results)} skipped, {len(failed)} failed")
    return 1 if failed or unmarked else 0


if __name__ == "__main__":
    sys.exit(main())
