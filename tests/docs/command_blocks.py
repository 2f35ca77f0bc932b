"""Runs every ```sh and ```python block of the documents as written (docs/development.md).

usage: command_blocks.py SOURCE_DIR PLUGIN_DIR [DOCUMENT ...]

Run from a scratch repository root. The documents are README.md, then docs/ in the order of
docs/README.md's index (the others after it), then plugins/*/README.md: one reading order, so a
page may build on what an earlier one made (data/, runs/). Each sh block runs in its own
`bash -euo pipefail`; a document's python blocks run one after another in one namespace, as in
one interpreter session. A block whose fence follows the line
`<!-- docs_command_blocks: not run: REASON -->` is skipped and listed with its reason, as are the
blocks of a plugin that this build left out. DOCUMENT arguments run only those (for a quick look;
the test runs all).
"""
import glob
import os
import re
import subprocess
import sys
import time

MARK = re.compile(r"<!-- docs_command_blocks: not run: (\S.*?) -->$")
FENCE = re.compile(r"```(\S*)$")


def documents(src):
    index = open(os.path.join(src, "docs/README.md"), encoding="utf-8").read()
    listed = [f"docs/{name}" for name in re.findall(r"^\| `([\w-]+\.md)` \|", index, re.M)]
    others = sorted(os.path.relpath(p, src) for p in glob.glob(os.path.join(src, "docs/*.md")))
    docs = [d for d in listed if os.path.exists(os.path.join(src, d))]
    docs += [d for d in others if d not in docs and d != "docs/README.md"]
    plugins = sorted(os.path.relpath(p, src) for p in glob.glob(os.path.join(src, "plugins/*/README.md")))
    return ["README.md"] + docs + plugins


def blocks(src, doc):
    """(line, lang, body, reason or None) of each sh/python block; errors for stray marks."""
    lines = open(os.path.join(src, doc), encoding="utf-8").read().split("\n")
    found, errors, i = [], [], 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if lines[i].startswith("<!-- docs_command_blocks"):
            nxt = FENCE.match(lines[i + 1]) if i + 1 < len(lines) else None
            if not MARK.match(lines[i]) or not nxt or nxt.group(1) not in ("sh", "python"):
                errors.append(f"{doc}:{i + 1}: a mark must read '<!-- docs_command_blocks: not run:"
                              " REASON -->' on the line right before a ```sh or ```python fence")
        if m:
            end = i + 1
            while end < len(lines) and lines[end] != "```":
                end += 1
            if end == len(lines):
                errors.append(f"{doc}:{i + 1}: the fence is never closed")
                break
            if m.group(1) in ("sh", "python"):
                mark = MARK.match(lines[i - 1]) if i > 0 else None
                body = "\n".join(lines[i + 1:end]) + "\n"
                found.append((i + 1, m.group(1), body, mark.group(1) if mark else None))
            i = end
        i += 1
    return found, errors


def main():
    src, plugin_dir, only = sys.argv[1], sys.argv[2], sys.argv[3:]
    runs, skipped, errors = [], [], []
    errors += [f"{doc}: not one of the documents" for doc in only if doc not in documents(src)]
    for doc in documents(src):
        if only and doc not in only:
            continue
        found, errs = blocks(src, doc)
        errors += errs
        plugin = re.match(r"plugins/([\w-]+)/README\.md$", doc)
        built = not plugin or os.path.exists(os.path.join(plugin_dir, f"libreel_{plugin.group(1)}.so"))
        for line, lang, body, reason in found:
            if reason is None and not built:
                reason = f"this build has no plugin {plugin.group(1)}"
            (skipped if reason else runs).append((f"{doc}:{line}", lang, body, reason))
    if errors:
        sys.exit("\n".join(errors))
    print(f"{len(runs)} blocks run, {len(skipped)} not run:")
    for where, lang, _, reason in skipped:
        print(f"  {where} ({lang}): {reason}")
    sys.stdout.flush()
    sessions, total = {}, time.monotonic()
    for where, lang, body, _ in runs:
        print(f"\n== {where} ({lang}):\n{body}", end="", flush=True)
        start = time.monotonic()
        if lang == "sh":
            status = subprocess.run(["bash", "-euo", "pipefail", "-c", body]).returncode
        else:
            namespace = sessions.setdefault(where.split(":")[0], {"__name__": "__main__"})
            try:
                exec(compile(body, where, "exec"), namespace)
                status = 0
            except BaseException as e:  # the block's own error, shown as Python shows it
                import traceback
                traceback.print_exception(e)
                status = 1
        sys.stdout.flush()
        if status != 0:
            sys.exit(f"FAILED: the block above, {where}, as its document writes it (exit {status})")
        print(f"-- {where}: {time.monotonic() - start:.1f} s", flush=True)
    print(f"\nevery block ran ({len(runs)} in {time.monotonic() - total:.0f} s); not run:")
    for where, lang, _, reason in skipped:
        print(f"  {where} ({lang}): {reason}")


if __name__ == "__main__":
    main()
