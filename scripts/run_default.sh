#!/usr/bin/env bash
# One command from a fresh clone to a real training run on the built-in
# default: sets up, builds, prepares the fortunes text and trains the tiny
# model with input/default.toml (validation loss and a sample are printed).
# Extra arguments override the config, e.g. scripts/run_default.sh --steps 50
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/scripts/setup.sh"
"$root/scripts/build.sh"
"$root/scripts/prepare_default_data.sh"
cd "$root"
exec "$root/scripts/mpirun.sh" -np "${NP:-1}" "${BUILD_DIR:-$root/build}/apps/gpt_train" \
  --config "$root/input/default.toml" "$@"
