#!/usr/bin/env bash
# The data's largest token id against the tokenizer that decodes samples
# and encodes HellaSwag (Trainer::Impl::check_tokens), on 2 ranks:
#   1. data with ids up to 4999 (made as GPT-2's would be) and the default
#      byte tokenizer: a warning naming 4999, the 256 tokens and the fix,
#      whether the id is in rank 0's part of the check or only in rank 1's;
#   2. the same data with --sample-tokens 0 (nothing is decoded): none;
#   3. byte-level data and the byte tokenizer: none.
#   data_tokenizer.sh BUILD_DIR WORK_DIR
set -uo pipefail
source "$(dirname "$0")/common.sh" "$@"
# 4000 tokens below 256 with one 4999, early (rank 0's half) or late (rank 1's).
for where in early late; do
  python3 - "$work/$where.bin" "$where" <<'PY' || fail "writing $where.bin"
import struct, sys
toks = [(7 * i) % 256 for i in range(4000)]
toks[100 if sys.argv[2] == "early" else 3900] = 4999
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<256i", 20240520, 1, len(toks), *([0] * 253)))
    f.write(struct.pack(f"<{len(toks)}H", *toks))
PY
done
want="the data's token ids go up to 4999, past the 256 tokens of tokenizer byte: samples would be decoded with the wrong tokenizer; give the one the data were made with (--tokenizer gpt2 --vocab encoder.json --merges vocab.bpe), or --sample-tokens 0"
for where in early late; do
  tiny_run_ok "$where" 2 --data "$work/$where.bin" --vocab-size 5000 --steps 1 --sample-tokens 8
  grep -qF -- "$want" "$work/$where.log" || { cat "$work/$where.log"; fail "$where: no tokenizer warning"; }
done
tiny_run_ok quiet 2 --data "$work/late.bin" --vocab-size 5000 --steps 1 --sample-tokens 0
! grep -q "past the 256 tokens" "$work/quiet.log" || { cat "$work/quiet.log"; fail "--sample-tokens 0 warns"; }
tiny_run_ok bytes 2 --steps 1 --sample-tokens 8
! grep -q "past the 256 tokens" "$work/bytes.log" || { cat "$work/bytes.log"; fail "byte-level data warn"; }
echo "ok: the tokenizer warning for data past its vocabulary, from either rank's part; none without samples or with byte data"
