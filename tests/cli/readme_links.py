#!/usr/bin/env python3
"""The README's links within itself lead somewhere, and its Contents list
every section.

Each `](#anchor)` must name a heading outside code blocks, by GitHub's rule
for anchors (lower case, punctuation but `-` and `_` dropped, spaces to
`-`); the Contents list (`**Contents**` and the bullets after it) must hold
each `##` and `###` heading once, in order. Links to files and other sites
are not checked.
    readme_links.py README
"""
import re
import sys


def anchor(title):
    return re.sub(r"[^\w\- ]", "", title.strip().lower()).replace(" ", "-")


def main():
    text = open(sys.argv[1], encoding="utf-8").read()
    headings, fenced = [], False
    for line in text.split("\n"):
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and re.match(r"#{1,6} ", line):
            headings.append((len(line) - len(line.lstrip("#")), line.lstrip("#").strip()))
    anchors = {anchor(t) for _, t in headings}
    failures = [f"link to #{a}: no such heading" for a in sorted(set(re.findall(r"\]\(#([^)\s]+)\)", text)))
                if a not in anchors]
    contents = re.search(r"^\*\*Contents\*\*\n\n((?:\s*- \[.*\n)+)", text, re.M)
    if not contents:
        failures.append("no **Contents** list")
    else:
        listed = re.findall(r"\]\(#([^)\s]+)\)", contents.group(1))
        wanted = [anchor(t) for level, t in headings if level in (2, 3)]
        if listed != wanted:
            missing = [a for a in wanted if a not in listed]
            extra = [a for a in listed if a not in wanted]
            failures.append(f"Contents do not list the sections in order (missing: {missing}, not a section: {extra})")
    for f in failures:
        print(f"FAIL: {f}")
    if failures:
        return 1
    print(f"ok: {len(anchors)} headings, every link within the README resolves, Contents complete")
    return 0


if __name__ == "__main__":
    sys.exit(main())
