#!/usr/bin/env bash
# Runs a command that must fail cleanly on bad input:
#   expect_error.sh 'REGEX' COMMAND ARGS...
# Passes when the command exits non-zero within 120 s (every rank ended:
# no hang), prints exactly one line 'error: ...' on stderr and it matches
# REGEX (every rank of a multi-rank job has the same error: rank 0 prints it
# once), and shows no sign of a crash (uncaught exception, signal,
# sanitizer report).
set -uo pipefail
regex="$1"; shift
err="$(mktemp)"; trap 'rm -f "$err"' EXIT
timeout 120 "$@" >/dev/null 2>"$err"
rc=$?
if [[ $rc -eq 0 ]]; then echo "FAIL: exit 0, expected an error matching: $regex"; cat "$err"; exit 1; fi
if [[ $rc -eq 124 ]]; then echo "FAIL: timed out (hang)"; cat "$err"; exit 1; fi
if grep -qE 'terminate called|Segmentation fault|core dumped|AddressSanitizer|runtime error:' "$err"; then
  echo "FAIL: crashed (rc=$rc)"; cat "$err"; exit 1
fi
n="$(grep -cE '^error: ' "$err")"
if [[ $n -gt 1 ]]; then echo "FAIL: $n 'error:' lines, expected one"; cat "$err"; exit 1; fi
line="$(grep -E '^error: ' "$err" | head -1)"
if [[ -z "$line" ]] || ! grep -qE -- "$regex" <<<"$line"; then
  echo "FAIL: no 'error:' line matching: $regex"; cat "$err"; exit 1
fi
echo "ok (rc=$rc): $line"
