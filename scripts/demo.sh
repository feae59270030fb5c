#!/usr/bin/env bash
# Install argus into .venv and run the main job on its embedded default: argus demo.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
exec .venv/bin/argus demo "$@"
