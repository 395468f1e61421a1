#!/usr/bin/env python3
"""Fails when a test skipped that this machine is not expected to skip, or when an expected skip
did not happen (the list is stale), so that a broken detection (LibTorch, fio, h5py, a file system
that refuses O_DIRECT) fails CI instead of hiding as a skip.

Usage: check-skips.py EXPECTED JUNIT.xml [JUNIT.xml ...]
EXPECTED: one line per expected skip, "TEST-NAME  TEXT" where TEXT must appear in the skip's output
(its reason); '#' starts a comment. A JUnit file that does not exist (a pass that did not run) is
named and fails the check.
"""
import sys
import xml.etree.ElementTree as ElementTree


def expected_skips(path):
    expected = {}
    with open(path, encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            name, _, reason = line.partition(" ")
            if not reason.strip():
                sys.exit(f"{path}:{number}: a line is 'TEST-NAME  REASON-TEXT'")
            expected[name] = reason.strip()
    return expected


def main(argv):
    if len(argv) < 3:
        sys.exit(__doc__)
    expected = expected_skips(argv[1])
    problems, skipped, ran = [], {}, set()
    for report in argv[2:]:
        try:
            root = ElementTree.parse(report).getroot()
        except (OSError, ElementTree.ParseError) as error:
            problems.append(f"cannot read {report}: {error}")
            continue
        for case in root.iter("testcase"):
            name = case.get("name")
            if case.find("skipped") is not None:
                skipped[name] = case.findtext("system-out") or ""
            elif case.get("status") == "run":
                ran.add(name)
    for name, output in sorted(skipped.items()):
        if name not in expected:
            first = output.strip().splitlines()[0] if output.strip() else "(no output)"
            problems.append(f"{name} skipped, which this machine is not expected to: {first}")
        elif expected[name] not in output:
            problems.append(f"{name} skipped for another reason than '{expected[name]}': {output.strip()[:200]}")
    for name in sorted(set(expected) - set(skipped)):
        state = "ran" if name in ran else "is not in any report"
        problems.append(f"{name} was expected to skip ('{expected[name]}') but {state}: update {argv[1]}")
    for problem in problems:
        print(f"check-skips: {problem}", file=sys.stderr)
    if problems:
        return 1
    print(f"check-skips: {len(skipped)} skips, each expected on this machine: {', '.join(sorted(skipped))}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
