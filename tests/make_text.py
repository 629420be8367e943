#!/usr/bin/env python3
"""Writes LINES lines of deterministic, learnable English-like text to OUT
(test fixtures that need text without depending on shared/ data).
  make_text.py OUT [LINES]"""
import sys

WORDS = "the quick brown fox jumps over the lazy dog while the cat sleeps in the sun".split()
out, lines = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 4000
with open(out, "w") as f:
    for i in range(lines):
        f.write(" ".join(WORDS[(i * 7 + j) % len(WORDS)] for j in range(8)) + ".\n")
