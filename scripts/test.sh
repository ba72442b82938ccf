#!/usr/bin/env bash
# The project's checks: lint, type check, tests. Run from the repository root with the venv.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin
$PY/ruff check src tests benchmarks scripts
$PY/mypy
$PY/pytest "$@"
