#!/usr/bin/env python3
"""Names two source files both define in one scope, which break the unity build.

mixlab_tests compiles tests/*.cpp, and mixlab_cli apps/*.cpp, in unity batches of 8
(CMakeLists.txt): each batch is one translation unit, so two files' helpers in `namespace { }`
(or in one named namespace) are one scope there. Two with the same name and signature, two
constants or types of one name, or two aliases of one name for different types, are
redefinitions, and the batch fails to compile. Which files share a batch depends on their order,
so a new file moves the boundaries and can break files it never touched. This check finds every
such pair at once, whatever the batches:

    python3 tests/check_unity_names.py [FOLDER ...]      # default: tests/ and apps/

It reads the definitions that start at column 0 (the project's formatting puts namespace-scope
definitions there), each named with the named namespaces around it (the apps' `mixlab::app`;
an anonymous one adds nothing), and skips raw strings. Helpers two files need belong in a header
(tests/file_helpers.h, tests/test_helpers.h).

>>> sorted(file_scope_names('namespace {\\nbool contains(const std::string& a) {\\n'
...     'struct Run {\\nconstexpr int kSteps = 3;\\nusing Tokens = std::vector<int>;\\n'
...     '}  // namespace\\nTEST_CASE("x") {\\nnamespace mixlab::test {\\nvoid hidden() {\\n}\\n'))
[('alias', 'Tokens', 'std::vector<int>'), ('constant', 'kSteps', ''), ('function', 'contains', ''), ('function', 'mixlab::test::hidden', ''), ('type', 'Run', '')]
>>> file_scope_names('auto py = R"(\\nfor k in sorted(x):\\ndef f(a, b) {\\n)";\\n')
set()
"""
import collections
import glob
import os
import re
import sys

FUNCTION = re.compile(r"^(?!TEST_CASE|TEST_SUITE|SCENARIO|return |using |namespace |template |"
                      r"static_assert|typedef |if |for |while |switch )"
                      r"[A-Za-z_][\w:<>,*& ]*?[\s*&]([A-Za-z_]\w*)\((?:.*[{,(]|.*\{.*\})$")
TYPE = re.compile(r"^(?:struct|class|enum class|enum|union) ([A-Za-z_]\w*)\b(?!.*;$)")
CONSTANT = re.compile(r"^(?:static )?(?:inline )?(?:constexpr|const) [^=(]*?\b([A-Za-z_]\w*)"
                      r"(?:\[\w*\])? *(?:=|\{)")
ALIAS = re.compile(r"^using ([A-Za-z_]\w*) = (.*);")


def file_scope_names(text):
    """{(kind, name, detail)} of a file's definitions at namespace scope; the name is qualified
    by the named namespaces around it (an anonymous one adds nothing: in a unity batch the
    files' anonymous namespaces are one)."""
    names = set()
    scopes = []  # the named namespaces open at this line ("" for an anonymous one)
    in_raw = False
    for line in text.split("\n"):
        if in_raw:
            if ')"' in line:
                in_raw = False
            continue
        if re.search(r'R"\($', line) or (re.search(r'R"\(', line) and ')"' not in line):
            in_raw = True
        opened = re.match(r"^namespace ([\w:]*) ?\{$", line)
        if opened:
            scopes.append(opened.group(1))
            continue
        if scopes and re.match(r"^\}  // namespace", line):
            scopes.pop()
            continue
        prefix = "::".join(s for s in scopes if s)
        for kind, pattern in (("type", TYPE), ("alias", ALIAS), ("constant", CONSTANT),
                              ("function", FUNCTION)):
            m = pattern.match(line)
            if m:
                name = f"{prefix}::{m.group(1)}" if prefix else m.group(1)
                names.add((kind, name, m.group(2).strip() if kind == "alias" else ""))
                break
    return names


def header_helpers(text):
    """{unqualified name: qualified name} of the helpers a header defines (inline functions,
    types, constants; declarations of functions defined elsewhere are left out)."""
    helpers = {}
    lines = text.split("\n")
    for kind, name, _ in file_scope_names(text):
        short = name.rsplit("::", 1)[-1]
        if kind != "function" or any(re.match(rf"^(inline|template|constexpr) .*\b{short}\(", line)
                                     for line in lines):
            helpers[short] = name
    return helpers


def main(folders):
    defined = collections.defaultdict(set)  # (kind, name) -> {(file, detail)}
    in_headers = {}  # (folder, unqualified name) -> (header, qualified name)
    paths = [p for folder in folders for p in sorted(glob.glob(os.path.join(folder, "*.cpp")))]
    top = os.path.dirname(os.path.abspath(folders[0]))
    for folder in folders:
        for header in sorted(glob.glob(os.path.join(folder, "*.h"))):
            with open(header, encoding="utf-8") as f:
                for short, name in header_helpers(f.read()).items():
                    in_headers.setdefault((os.path.abspath(folder), short),
                                          (os.path.relpath(header, top), name))
    for path in paths:
        with open(path, encoding="utf-8") as f:
            for kind, name, detail in file_scope_names(f.read()):
                defined[(kind, name)].add((os.path.relpath(path, top), detail))
    clashes = []
    for (kind, name), where in sorted(defined.items()):
        files = sorted({f for f, _ in where})
        short = name.rsplit("::", 1)[-1]
        shared = [in_headers[(os.path.abspath(os.path.join(top, os.path.dirname(f))), short)]
                  for f in files
                  if (os.path.abspath(os.path.join(top, os.path.dirname(f))), short) in in_headers]
        if shared and shared[0][1] != name:
            # A file's own helper named as a shared one: in a batch where a file that uses the
            # shared one comes after it, the call can find this one (another overload, or an
            # ambiguity).
            header, helper = shared[0]
            clashes.append(f"  {kind} {name}: {', '.join(files)} (and {helper} in {header})")
            continue
        if len(files) < 2:
            continue
        if kind == "alias" and len({d for _, d in where}) == 1:
            continue  # the same alias for the same type may be declared again
        clashes.append(f"  {kind} {name}: {', '.join(files)}")
    if clashes:
        print("source files that define the same name in one scope (they collide when the unity "
              "build puts them in one batch; rename one, or share it from a header):")
        print("\n".join(clashes))
        return 1
    print(f"unity names: {len(defined)} names in {len(paths)} files of {', '.join(folders)}, "
          f"no two in one scope, none a shared header's")
    return 0


if __name__ == "__main__":
    here = os.path.dirname(os.path.abspath(__file__))
    sys.exit(main(sys.argv[1:] or [here, os.path.join(os.path.dirname(here), "apps")]))
