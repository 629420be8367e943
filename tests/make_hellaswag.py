#!/usr/bin/env python3
"""Writes N examples in HellaSwag's JSON-lines format made from a text file:
the context is CTX characters of the text ending before a space, the right
ending the words after it (up to 24 characters), and each wrong ending the
right one's characters shuffled (same letters and length, no word order).
A model that has learnt the text's language prefers the right ending; one
that has not is at chance (1 in 4). Deterministic for a given SEED.
  make_hellaswag.py TEXT OUT [N] [CTX] [SEED]"""
import json
import random
import sys

text_path, out = sys.argv[1], sys.argv[2]
n = int(sys.argv[3]) if len(sys.argv) > 3 else 100
ctx_chars = int(sys.argv[4]) if len(sys.argv) > 4 else 60
rng = random.Random(int(sys.argv[5]) if len(sys.argv) > 5 else 1)
text = open(text_path, encoding="utf-8").read()
spaces = [i for i in range(ctx_chars, len(text) - 30) if text[i] == " "]
with open(out, "w", encoding="utf-8") as f:
    written = 0
    while written < n:
        at = rng.choice(spaces)
        ctx = text[at - ctx_chars:at]
        ending = text[at + 1:at + 25].rsplit(" ", 1)[0]
        if len(set(ending)) < 3:
            continue  # too few distinct characters to shuffle into 3 other endings
        endings = [ending]
        while len(endings) < 4:
            chars = list(ending)
            rng.shuffle(chars)
            if "".join(chars) not in endings:
                endings.append("".join(chars))
        label = rng.randrange(4)
        endings[0], endings[label] = endings[label], endings[0]
        f.write(json.dumps({"ctx": ctx, "endings": endings, "label": label}) + "\n")
        written += 1
