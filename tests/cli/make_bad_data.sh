#!/usr/bin/env bash
# Fixture for the bad-input tests: a good shard and damaged copies of it.
#   make_bad_data.sh PREPARE_DATA_BINARY OUT_DIR
set -euo pipefail
prep="$1"; out="$2"
rm -rf "$out"; mkdir -p "$out"
python3 "$(dirname "$0")/../make_text.py" "$out/text.txt" 4000
"$prep" --input "$out/text.txt" --out "$out" --name good --val-fraction 0.1 >/dev/null
cp "$out/good_train_000000.bin" "$out/truncated.bin"
truncate -s -1000 "$out/truncated.bin"
cp "$out/good_train_000000.bin" "$out/badmagic.bin"
printf '\x39\x30\x00\x00' | dd of="$out/badmagic.bin" bs=1 conv=notrunc status=none
printf 'steps = 2\nlearning_rate = 0.1\n' > "$out/unknown_key.toml"
# One token past the tiny model's vocabulary of 256 (id 300), 5 tokens before
# the end: on 3 ranks only the last one's part of the check meets it.
cp "$out/good_train_000000.bin" "$out/late_bad_token.bin"
printf '\x2c\x01' | dd of="$out/late_bad_token.bin" bs=1 seek=$(($(stat -c %s "$out/late_bad_token.bin") - 10)) \
  conv=notrunc status=none
# JSON-lines inputs of prepare_data: line 3 is not JSON; line 2 has no "text".
printf '{"text": "one"}\n\n{"text": "two\n' > "$out/bad.jsonl"
printf '{"text": "one"}\n{"body": "two"}\n' > "$out/nokey.jsonl"
printf '{"text": "a single document"}\n' > "$out/one_doc.jsonl"  # too little for a validation split
printf '{"text": "one"}\n["two"]\n' > "$out/array.jsonl"
# What a checkpoint's directory holds (contents not read): --resume given its state.h5.
mkdir -p "$out/ckpt/step_00000001"
: > "$out/ckpt/step_00000001/state.h5"
: > "$out/ckpt/step_00000001/COMPLETE"
# No text at all: an empty file, and JSON lines whose texts are empty.
: > "$out/empty.txt"
printf '{"text": ""}\n{"text": ""}\n' > "$out/empty_texts.jsonl"
# A GPT-2-style tokenizer of 258 tokens (the 256 bytes in GPT-2's byte-to-unicode
# mapping, one merge, <|endoftext|>): more than the tiny model's vocabulary.
python3 - "$out" <<'PY'
import json, sys
keep = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
chars, n = {}, 0
for b in range(256):
    if b in keep:
        chars[b] = chr(b)
    else:
        chars[b] = chr(256 + n)
        n += 1
enc = {chars[b]: b for b in range(256)}
enc["th"] = 256
enc["<|endoftext|>"] = 257
json.dump(enc, open(sys.argv[1] + "/encoder258.json", "w"))
open(sys.argv[1] + "/merges258.bpe", "w").write("#version: 0.2\nt h\n")
PY
# HellaSwag examples (--hellaswag): line 2's label is not an ending's index.
printf '{"ctx": "A man", "endings": ["sat", "ran"], "label": 1}\n{"ctx": "He", "endings": ["a", "b"], "label": 7}\n' \
  > "$out/hellaswag_bad.jsonl"
# Compressed JSON lines cut short, and a gzip stream with damaged bytes.
command -v zstd > /dev/null || { echo "make_bad_data: no zstd (scripts/setup.sh installs it)" >&2; exit 1; }
for i in $(seq 2000); do printf '{"text": "line %d of a document that repeats itself"}\n' "$i"; done > "$out/docs.jsonl"
gzip -c "$out/docs.jsonl" > "$out/cut.jsonl.gz"
zstd -q -c "$out/docs.jsonl" > "$out/cut.jsonl.zst"
truncate -s -100 "$out/cut.jsonl.gz" "$out/cut.jsonl.zst"
cp "$out/docs.jsonl" "$out/notgzip.jsonl.gz"  # named .gz, but plain JSON lines
gzip -c "$out/docs.jsonl" > "$out/damaged.jsonl.gz"
printf 'XXXXXXXXXXXXXXXX' | dd of="$out/damaged.jsonl.gz" bs=1 seek=200 conv=notrunc status=none
# Zero padding after the last member is accepted; a non-zero byte in it is not.
(gzip -c "$out/docs.jsonl"; head -c 100 /dev/zero; printf 'x') > "$out/padjunk.jsonl.gz"
