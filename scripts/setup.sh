#!/usr/bin/env bash
# Create .venv and install argus into it (editable), with the system tools the tests use.
#   scripts/setup.sh          runtime install: argus + the NVIDIA toolchain extra
#   scripts/setup.sh --dev    also test tools (pytest, hypothesis, ruff) and LLVM for gfx942
# Works on a fresh Debian machine with Python >= 3.10 (installs python3-venv / llvm via apt
# when they are missing; needs root or sudo only then).
set -euo pipefail
cd "$(dirname "$0")/.."

dev=0
[ "${1:-}" = "--dev" ] && dev=1
PYTHON=${PYTHON:-python3}

as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else
    echo "argus setup: need root to run: $*" >&2; return 1; fi
}
apt_updated=0
apt_install() {
  if [ $apt_updated = 0 ]; then as_root apt-get update -q; apt_updated=1; fi
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -q "$@"
}

"$PYTHON" - <<'PY' || { echo "argus needs Python >= 3.10 (set PYTHON=...)" >&2; exit 1; }
import sys
sys.exit(0 if sys.version_info >= (3, 10) else 1)
PY

if [ ! -x .venv/bin/python ]; then
  if ! "$PYTHON" -m venv .venv 2>/dev/null; then
    rm -rf .venv
    pyver=$("$PYTHON" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
    apt_install "python${pyver}-venv" || apt_install python3-venv
    "$PYTHON" -m venv .venv
  fi
fi

.venv/bin/python -m pip install -q --upgrade pip
if [ $dev = 1 ]; then
  .venv/bin/python -m pip install -q -e '.[nvidia,dev]'
  # gfx942 assembler and linker (LLVM >= 18); Debian 12 ships llvm-19 in its main archive.
  if ! ls /usr/lib/llvm-{22,21,20,19,18}/bin/llvm-mc >/dev/null 2>&1; then
    apt_install llvm-19 lld-19
  fi
else
  .venv/bin/python -m pip install -q -e '.[nvidia]'
fi
