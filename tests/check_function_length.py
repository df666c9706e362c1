#!/usr/bin/env python3
"""Names every function longer than a limit, so that the files it guards stay thin.

apps/ holds one thin file per subcommand: flags, the objects of the layers below, printing. A
function that grows past the limit is doing a lower layer's work or several subcommands' at once.
The length of a function counts its lines from the first line of its signature (a `template <...>`
line included) to its closing brace; lambdas and local types inside a function are part of it.

    python3 tests/check_function_length.py --max 80 apps [FOLDER ...]

It reads *.cpp and *.h files with comments, strings and character literals blanked out, and takes
a brace as a function's body when it opens at namespace or class scope after a parameter list
(`) {`, `) const {`, `) override {`, `) -> T {`, ...).

>>> too_long = "namespace a {\\nint f(int x,\\n      int y) {\\n" + "  x++;\\n" * 79 + "}\\n}\\n"
>>> long_functions(too_long, 80)
[('f', 2, 82)]
>>> long_functions(too_long, 82)
[]
>>> short = ('struct S {\\n  void g() const { if (x) { y(); } }\\n};\\n'
...          'auto s = "}";\\nvoid h() {}\\n')
>>> functions(short)
[('g', 2, 1), ('h', 5, 1)]
"""
import argparse
import glob
import os
import re
import sys

CONTROL = re.compile(r"^(if|for|while|switch|catch|do|else|try|return)\b")
AFTER_PARAMETERS = re.compile(r"\)\s*(?:const|override|final|noexcept|mutable|&&?|->[^{;]*|\s)*$")
AGGREGATE = re.compile(r"^(?:template\s*<.*>\s*)?(struct|class|union|enum)\b", re.S)
NAMESPACE = re.compile(r"^(namespace|extern)\b")


def blank_literals(text):
    """The text with comments, string and character literals replaced by spaces (newlines kept,
    so line numbers stay)."""
    out = []
    i, n = 0, len(text)

    def blank(s):
        return re.sub(r"[^\n]", " ", s)

    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
        elif text.startswith('R"', i) and not (i and (text[i - 1].isalnum() or text[i - 1] == "_")):
            delim = text[i + 2:text.find("(", i)]
            j = text.find(")" + delim + '"', i)
            j = n if j < 0 else j + len(delim) + 2
        elif c == '"' or (c == "'" and not (i and text[i - 1].isalnum())):  # not 1'000
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
        elif c == "#" and (i == 0 or text[i - 1] == "\n"):  # a preprocessor line
            j = text.find("\n", i)
            j = n if j < 0 else j
        else:
            out.append(c)
            i += 1
            continue
        out.append(blank(text[i:j]))
        i = j
    return "".join(out)


def function_name(header):
    """The name before the parameter list of a function header ('operator()' and the like kept)."""
    m = re.search(r"(operator\s*(?:\(\)|[^\s(]+)|~?[A-Za-z_]\w*)\s*(?:<[^()]*>)?\s*\(", header)
    return re.sub(r"\s+", "", m.group(1)) if m else "?"


def functions(text):
    """[(name, first line, length in lines)] of the functions a C++ file defines."""
    code = blank_literals(text)
    found = []
    scopes = []  # one per open brace: "namespace", "class", "function" or "other" (the rest)
    header_start = 0  # where the text before the next brace at this scope begins
    body = None  # (name, first line, depth of its brace) of the function being read
    for i, c in enumerate(code):
        if c == "{":
            if body is not None or (scopes and scopes[-1] == "other"):
                scopes.append("other")
                continue
            header = code[header_start:i].strip()
            if NAMESPACE.match(header):
                kind = "namespace"
            elif AGGREGATE.match(header) and not header.endswith(")"):
                kind = "class"
            elif "(" in header and AFTER_PARAMETERS.search(header) and not CONTROL.match(header):
                kind = "function"
                header_text = code[header_start:i]
                start = header_start + len(header_text) - len(header_text.lstrip())
                body = (function_name(header), code.count("\n", 0, start) + 1, len(scopes))
            else:
                kind = "other"
            scopes.append(kind)
            header_start = i + 1
        elif c == "}":
            if not scopes:
                continue
            scopes.pop()
            if body is not None and len(scopes) == body[2]:
                last = code.count("\n", 0, i) + 1
                found.append((body[0], body[1], last - body[1] + 1))
                body = None
            if body is None and (not scopes or scopes[-1] != "other"):
                header_start = i + 1
        elif c == ";" and body is None and (not scopes or scopes[-1] != "other"):
            header_start = i + 1
        elif c == ":" and body is None and scopes and scopes[-1] == "class":
            # access specifiers (`public:`) end a header inside a class
            if re.search(r"\b(public|private|protected)\s*$", code[header_start:i]):
                header_start = i + 1
    return found


def long_functions(text, limit):
    """[(name, first line, length)] of the functions over `limit` lines."""
    return [f for f in functions(text) if f[2] > limit]


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--max", type=int, required=True, help="the most lines a function may have")
    parser.add_argument("folders", nargs="+")
    args = parser.parse_args(argv)
    failures = 0
    checked = 0
    for folder in args.folders:
        files = sorted(glob.glob(os.path.join(folder, "*.cpp")) +
                       glob.glob(os.path.join(folder, "*.h")))
        for path in files:
            with open(path, encoding="utf-8") as f:
                text = f.read()
            checked += len(functions(text))
            for name, line, length in long_functions(text, args.max):
                print(f"{path}:{line}: {name} is {length} lines long, more than {args.max}")
                failures += 1
    if checked == 0:
        print(f"no functions found in {' '.join(args.folders)}")
        return 1
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
