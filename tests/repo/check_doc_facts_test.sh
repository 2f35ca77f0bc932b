#!/usr/bin/env bash
# usage: check_doc_facts_test.sh SOURCE_DIR
# Facts the documents state that the code defines, read from the code: the plugin ABI version
# (kPluginAbiVersion, sdk/include/reel/plugin.h) wherever a document gives its number, and the
# package of each proto/*.proto a document names with `package ...` on the same line. Every
# tracked Markdown file outside bench/ (results and journals record the past) is read.
set -euo pipefail
src=$1
cd "$src"
python3 - <<'PY'
import re, subprocess, sys

abi = re.search(r"kPluginAbiVersion = (\d+);", open("sdk/include/reel/plugin.h").read())
if not abi:
    sys.exit("kPluginAbiVersion not found in sdk/include/reel/plugin.h")
abi = abi.group(1)
packages = {}
for name in subprocess.run(["git", "ls-files", "proto/*.proto"], check=True,
                           capture_output=True, text=True).stdout.split():
    m = re.search(r"^package ([\w.]+);", open(name).read(), re.M)
    if m:
        packages[name] = m.group(1)
docs = [d for d in subprocess.run(["git", "ls-files", "*.md"], check=True, capture_output=True,
                                  text=True).stdout.split() if not d.startswith("bench/")]
abi_re = re.compile(r"(?:kPluginAbiVersion|plugin ABI|REEL_REQUIRED_PLUGIN_ABI|plugin_abi)\D{0,60}?"
                    r"(?:now |is |ABI )(\d+)|REEL_REQUIRED_PLUGIN_ABI (\d+)")
bad = checked = 0
for doc in docs:
    for number, line in enumerate(open(doc, encoding="utf-8"), 1):
        for m in abi_re.finditer(line):
            checked += 1
            said = m.group(1) or m.group(2)
            if said != abi:
                print(f"{doc}:{number}: plugin ABI {said}, the code's is {abi} "
                      "(kPluginAbiVersion, sdk/include/reel/plugin.h)")
                bad += 1
        for proto, package in packages.items():
            if proto in line:
                for said in re.findall(r"package `([\w.]+)`", line):
                    checked += 1
                    if said != package:
                        print(f"{doc}:{number}: {proto} has package {package}, not {said}")
                        bad += 1
if checked == 0:
    sys.exit("no document states the plugin ABI or a proto package: nothing was checked")
if bad:
    sys.exit(f"{bad} fact(s) in the documents differ from the code")
print(f"{checked} statement(s) of the plugin ABI ({abi}) and proto packages match the code")
PY
