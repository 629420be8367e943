#!/usr/bin/env bash
# The built-in default data set: the English text of Debian's `fortunes`
# packages (/usr/share/games/fortunes), byte-tokenised into llm.c shards under
# input/data/fortunes. Idempotent.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
out="$root/input/data/fortunes"
if compgen -G "$out/fortunes_train_*.bin" >/dev/null && compgen -G "$out/fortunes_val_*.bin" >/dev/null; then
  echo "data: present in $out"; exit 0
fi
src=/usr/share/games/fortunes
mapfile -t files < <(find "$src" -maxdepth 1 -type f ! -name '*.dat' ! -name '*.u8' ! -name '*art*' | sort)
((${#files[@]})) || { echo "error: no fortune files in $src (install the fortunes package)" >&2; exit 1; }
"${BUILD_DIR:-$root/build}/apps/prepare_data" --tokenizer byte --input "${files[@]}" --out "$out" \
  --name fortunes --val-fraction 0.05
