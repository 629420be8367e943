#!/usr/bin/env python3
"""The README's flag tables give gpt_train's real defaults.

`gpt_train --help` appends "[default: X]" to every flag whose default it
knows (lib/io/run_config.cpp: from a default RunConfig). Each such flag's
row in the README's tables (`| `--flag ...`, `--other` | d1, d2 | ...`) must
give the same value in its default column: numbers compared as numbers
(6e-4 == 0.0006, 25 == 25.0), words as words, backticks ignored.
    readme_defaults.py GPT_TRAIN README
"""
import re
import subprocess
import sys


def same(a, b):
    try:
        return float(a) == float(b)
    except ValueError:
        return a == b


def main():
    train, readme = sys.argv[1], sys.argv[2]
    help_text = subprocess.run([train, "--help"], capture_output=True, text=True, check=True).stdout
    # A flag's help may wrap; its default ends its description.
    defaults = dict(re.findall(r"^\s+(--[a-z0-9-]+)\s[^\n]*?\[default: ([^\]]*)\]$", help_text, re.M))
    if len(defaults) < 30:
        sys.exit(f"FAIL: only {len(defaults)} defaults parsed from --help")
    rows = {}
    for line in open(readme, encoding="utf-8"):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 3 or not cells[0].startswith("`--"):
            continue
        flags = re.findall(r"`(--[a-z0-9-]+)[^`]*`", cells[0])
        values = [v.strip().strip("`") for v in cells[1].split(",")] if len(flags) > 1 else [cells[1].strip("`")]
        for f, v in zip(flags, values):
            rows.setdefault(f, v)
    bad, checked = [], 0
    for flag, want in sorted(defaults.items()):
        if flag not in rows:
            bad.append(f"{flag}: no row in the README's flag tables")
            continue
        checked += 1
        if not same(rows[flag], want):
            bad.append(f"{flag}: the README says {rows[flag]!r}, --help {want!r}")
    # Control: a wrong value must not pass.
    if same("6e-4", "6e-05") or not same("6e-4", "0.0006"):
        bad.append("control: the comparison is broken")
    if bad:
        print("FAIL:\n  " + "\n  ".join(bad))
        sys.exit(1)
    print(f"ok: the README's defaults of {checked} flags equal --help's")


if __name__ == "__main__":
    main()
