#!/usr/bin/env bash
# Install argus with its test tools into .venv, lint, and run the test suite.
# The tests run on every core (pytest-xdist workers; `-n 0` runs them in this process).
# Extra arguments go to pytest (e.g. scripts/test.sh --slow, scripts/test.sh tests/smt).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --dev
.venv/bin/ruff check .
exec .venv/bin/python -m pytest -n auto "$@"
