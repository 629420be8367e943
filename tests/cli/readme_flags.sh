#!/usr/bin/env bash
# The README documents every flag gpt_train accepts: each option that
# `gpt_train --help` lists appears as `--name` in README.md's flag tables.
# Control: a name --help does not list is not found either way round.
#   readme_flags.sh GPT_TRAIN README
set -uo pipefail
train="$1"; readme="$2"
help=$("$train" --help 2>&1) || { echo "$help"; echo "FAIL: --help exited non-zero"; exit 1; }
flags=$(grep -oE -- '^ *--[a-z0-9-]+' <<<"$help" | tr -d ' ' | sort -u)
n=$(wc -l <<<"$flags")
(( n >= 40 )) || { echo "$help"; echo "FAIL: only $n flags parsed from --help"; exit 1; }
missing=()
for f in $flags; do
  [[ $f == --help ]] && continue
  grep -q -- "| \`$f\`\|, \`$f\`\|| \`$f " "$readme" || missing+=("$f")
done
(( ${#missing[@]} == 0 )) || { echo "FAIL: not in the README's flag tables: ${missing[*]}"; exit 1; }
grep -q -- "| \`--no-such-flag" "$readme" && { echo "FAIL: control: the README matched a flag that does not exist"; exit 1; }
grep -qx -- "--lr-decay-ratio" <<<"$flags" || { echo "FAIL: control: --lr-decay-ratio was not parsed from --help"; exit 1; }
echo "ok: all $n flags of gpt_train --help are in the README"
