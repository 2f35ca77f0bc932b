#!/usr/bin/env bash
# Two checks on the tracked C++ headers, each failure naming file and line:
#  - include guards follow the header's path, so a moved file cannot keep its old name: REEL_ and
#    the path from the include root on for a header under a public include root (a folder named
#    "reel": sdk/include/reel/storage.h -> REEL_STORAGE_H_, core/include/reel/core/host.h ->
#    REEL_CORE_HOST_H_), else REEL_ and the path from the repository root
#    (plugins/tcp/src/wire.h -> REEL_PLUGINS_TCP_SRC_WIRE_H_); the #ifndef, the #define and the
#    closing "#endif  // GUARD" all name it.
#  - the installed headers (sdk/include/reel/ for plugin authors, core/include/reel/ for host
#    applications) are documented: a comment opens each file, and each declaration at namespace scope (class, struct, enum,
#    function, alias, constant, macro) has a comment at the end of its line or in the lines above
#    it back to the last blank line (one comment may cover a block of related declarations).
# Usage: scripts/check-headers.sh [REPO]  (default: this repository). Needs git and python3.
set -euo pipefail
repo=${1:-"$(dirname "$0")/.."}
top=$(git -C "$repo" rev-parse --show-toplevel) || exit 2  # reads the tracked files only
python3 - "$top" <<'EOF'
import os, re, subprocess, sys

root = sys.argv[1]
names = subprocess.run(["git", "-C", root, "ls-files", "-z", "--", "*.h"], check=True,
                       capture_output=True).stdout.split(b"\0")
headers = [os.fsdecode(n) for n in names if n]
problems = []
DOCUMENTED = ("sdk/include/reel/", "core/include/reel/")  # headers held to the documentation rule


def expected_guard(rel):
    parts = rel.split("/")
    if "reel" in parts[:-1]:  # a public include root: the path as code includes it
        parts = parts[parts.index("reel"):]
    else:
        parts = ["reel"] + parts
    return re.sub(r"[^A-Za-z0-9]", "_", "/".join(parts)).upper() + "_"


def check_guard(rel, lines):
    guard = expected_guard(rel)
    ifndef = next((i for i, l in enumerate(lines) if l.startswith("#ifndef ")), None)
    if ifndef is None:
        problems.append(f"{rel}:1: no include guard (expected #ifndef {guard})")
        return
    found = lines[ifndef].split()[1]
    if found != guard:
        problems.append(f"{rel}:{ifndef + 1}: include guard {found}, expected {guard} (from the path)")
        return
    if ifndef + 1 >= len(lines) or lines[ifndef + 1].strip() != f"#define {guard}":
        problems.append(f"{rel}:{ifndef + 2}: expected #define {guard} after the #ifndef")
    last = max((i for i, l in enumerate(lines) if l.strip()), default=0)
    if lines[last].strip() != f"#endif  // {guard}":
        problems.append(f"{rel}:{last + 1}: expected the file to end with #endif  // {guard}")


# A declaration at namespace scope starts with one of these (after template<...> and attributes).
decl_re = re.compile(r"^(?:template\s*<.*>\s*)?(?:\[\[.*?\]\]\s*)?"
                     r"(class|struct|enum|using|inline|constexpr|const|extern|typedef|#define|"
                     r"[A-Za-z_][\w:<>,\s*&]*\s+[*&]?[A-Za-z_]\w*\s*\()")


def check_docs(rel, lines):
    first = next((l for l in lines if l.strip()), "")
    if not first.startswith("//"):
        problems.append(f"{rel}:1: no file comment (say what the header is for and its thread-safety)")
    depth = 0          # braces open that are not namespaces (class bodies, functions, initialisers)
    namespaces = []    # stack: True for a namespace brace, False for any other
    commented = False  # a comment since the last blank line
    continuation = False  # inside a declaration that spans lines (ends with ',' '(' or an operator)
    declared = set()   # function names seen: a later definition of one is not a new declaration
    in_macro = False   # inside a #define continued with backslashes
    for i, raw in enumerate(lines):
        line = raw.strip()
        if in_macro:
            in_macro = line.endswith("\\")
            continue
        in_macro = line.startswith("#define") and line.endswith("\\")
        name = re.match(r"[^(=]*?([A-Za-z_][\w:]*)\s*\(", line)
        name = name.group(1) if name and not line.startswith("#") else None
        # A member defined out of line, or a function declared above, is no new declaration.
        redefinition = bool(name) and ("::" in name or name in declared)
        if name:
            declared.add(name)
        if not line:
            commented = False
            continue
        if line.startswith("//"):
            commented = True
            continue
        at_namespace_scope = not any(n is False for n in namespaces)
        if (at_namespace_scope and not continuation and not line.startswith(("}", "namespace", "#if",
                                                                          "#endif", "#include", "#pragma", "#else", "public:", "private:", "protected:"))
                and not (line.startswith("#define REEL_") and line.endswith("_H_"))
                and decl_re.match(line) and not commented and not redefinition
                and "//" not in line):
            problems.append(f"{rel}:{i + 1}: public declaration without a comment: {line[:70]}")
        # Track braces; a namespace's own brace does not leave namespace scope.
        code = re.sub(r"//.*", "", line)
        code = re.sub(r'"(?:\\.|[^"\\])*"', '""', code)
        code = re.sub(r"'(?:\\.|[^'\\])*'", "''", code)
        is_namespace = bool(re.match(r"(inline\s+)?namespace\b", code))
        for c in code:
            if c == "{":
                namespaces.append(is_namespace)
                is_namespace = False
            elif c == "}" and namespaces:
                namespaces.pop()
        continuation = (at_namespace_scope and not any(n is False for n in namespaces)
                        and not code.rstrip().endswith((";", "{", "}")) and not code.startswith("#"))
        if continuation and code.rstrip().endswith(">") and code.startswith("template"):
            continuation = False


for rel in headers:
    path = os.path.join(root, rel)
    if not os.path.isfile(path):
        continue
    with open(path, encoding="utf-8", errors="replace") as f:
        lines = f.read().splitlines()
    check_guard(rel, lines)
    if rel.startswith(DOCUMENTED):
        check_docs(rel, lines)

for p in problems:
    print(p, file=sys.stderr)
if problems:
    print(f"check-headers: {len(problems)} problem(s) in {len(headers)} tracked headers", file=sys.stderr)
    sys.exit(1)
print(f"check-headers: {len(headers)} tracked headers: guards follow their paths, public headers (sdk/include, core/include) documented")
EOF
