#!/usr/bin/env python3
"""Fails on test case names that CTest cannot run one by one.

doctest_discover_tests (CMakeLists.txt) reads `mixlab_tests --list-test-cases` into a CMake
list, and a CMake list splits at ";": a case named "a; b" becomes two tests, "a" and "b", whose
filters match nothing, so the case never runs under ctest while the suite reports it passed.
This check lists the cases from the binary itself and names every such one:

    python3 tests/check_test_names.py build/mixlab_tests
"""
import subprocess
import sys


def unrunnable(names):
    """The names CTest would split.

    >>> unrunnable(["ops: add", "config: refused; replayed", "a, b"])
    ['config: refused; replayed']
    """
    return [n for n in names if ";" in n]


def main(binary):
    listing = subprocess.run([binary, "--list-test-cases", "--no-intro", "--no-version"],
                             capture_output=True, text=True, check=True).stdout
    names = [line.strip() for line in listing.splitlines()
             if line.strip() and not line.startswith("[doctest]") and not line.startswith("====")]
    if len(names) < 10:
        print(f"{binary} listed {len(names)} test cases; expected the whole suite")
        return 1
    bad = unrunnable(names)
    for name in bad:
        print(f'test case "{name}": a ";" splits it in CTest, so it never runs; use "," instead')
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
