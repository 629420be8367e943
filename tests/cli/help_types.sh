#!/usr/bin/env bash
# Each value gpt_train --help lists is shown with its kind, and the kind is
# the parser's: an INT option refuses a fraction as not an integer, a FLOAT
# option does not (its range may) and refuses a word, a CHOICE option
# refuses a name it does not list, a SIZE option refuses a word. Only --sample-prompt is free TEXT (CLI11's fallback shows on an
# option that declares no kind). Parsing precedes the data check, so these
# runs end at "missing data" once every value passes.
#   help_types.sh GPT_TRAIN
set -uo pipefail
train="$1"
help=$("$train" --help 2>&1) || { echo "$help"; echo "FAIL: --help exited non-zero"; exit 1; }
# "  --name KIND   help..." (switches have no KIND and are skipped)
mapfile -t rows < <(grep -oE '^  --[a-z0-9-]+ [A-Za-z|]+' <<<"$help")
(( ${#rows[@]} >= 55 )) || { echo "$help"; echo "FAIL: only ${#rows[@]} options with a kind in --help"; exit 1; }
fail=0; declare -A count
for row in "${rows[@]}"; do
  read -r flag kind <<<"$row"; name=${flag#--}
  count[$kind]=$(( ${count[$kind]:-0} + 1 ))
  case $kind in
    INT) value=0.5 want=refuse ;;
    FLOAT) value=0.5 want=take ;;
    CHOICE) value=no-such-choice want=refuse ;;
    SIZE) value=lots want=refuse ;;
    TEXT) [[ $flag == --sample-prompt ]] || { echo "FAIL: $flag shows CLI11's fallback TEXT: declare its kind"; fail=1; }
          continue ;;
    *) continue ;;
  esac
  out=$("$train" "$flag" "$value" 2>&1); rc=$?
  if [[ $want == refuse ]]; then
    if (( rc == 0 )) || ! grep -qF "invalid $name = '$value'" <<<"$out"; then
      echo "FAIL: $flag is shown as $kind but took '$value': $out"; fail=1
    fi
  else  # a number: not refused as text, and a word refused
    if grep -qF "invalid $name = '$value': expected" <<<"$out"; then
      echo "FAIL: $flag is shown as $kind but refused '$value' as not a number: $out"; fail=1
    fi
    out=$("$train" "$flag" word 2>&1)
    grep -qF "invalid $name = 'word': expected a number" <<<"$out" || {
      echo "FAIL: $flag is shown as $kind but 'word' was not refused as not a number: $out"; fail=1; }
  fi
done
for kind in INT FLOAT CHOICE SIZE; do
  (( ${count[$kind]:-0} > 0 )) || { echo "FAIL: no $kind option in --help"; fail=1; }
done
# Control: the refusal this test reads is the parser's own line.
out=$("$train" --steps 0.5 2>&1)
grep -qF "invalid steps = '0.5'" <<<"$out" || { echo "FAIL: control: --steps 0.5 said: $out"; fail=1; }
(( fail == 0 )) || exit 1
echo "ok: ${#rows[@]} options with a kind (INT ${count[INT]}, FLOAT ${count[FLOAT]}, CHOICE ${count[CHOICE]}); each as the parser reads it"
