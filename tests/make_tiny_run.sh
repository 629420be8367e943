#!/usr/bin/env bash
# Writes a small training set-up for script-level tests into WORK_DIR:
# token shards from generated text (data/d_train_*.bin) and tiny.toml, a
# 2-layer, width-64, T=32 config over them (global batch 8, micro-batch 2,
# 6 steps, 1 thread, no samples).
#   make_tiny_run.sh BUILD_DIR WORK_DIR
set -euo pipefail
build="$1"; work="$2"
here="$(cd "$(dirname "$0")" && pwd)"
mkdir -p "$work"
python3 "$here/make_text.py" "$work/text.txt" 3000
"$build/apps/prepare_data" --input "$work/text.txt" --out "$work/data" --name d --val-fraction 0 >/dev/null
cat > "$work/tiny.toml" <<TOML
model = "tiny"
n-layer = 2
n-embd = 64
n-head = 4
n-ctx = 32
seq-len = 32
data = "$work/data/d_train_*.bin"
global-batch = 8
micro-batch = 2
steps = 6
lr = 3e-3
threads = 1
sample-tokens = 0
log-every = 2
TOML
