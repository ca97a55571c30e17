#!/usr/bin/env bash
# The whole test suite: the Rust workspace's tests, then the Python package's.
#
#   ./test.sh
#
# Needs Rust and Python 3 (3.9 or later). The Python tests run in a virtual environment of
# their own (target/python-venv, made on the first run), with maturin, pytest and
# jax==0.10.2 installed there; the package is built from crates/python in release mode
# (`maturin develop --release`) into it. REMAT_PYTHON names another Python 3 to make the
# environment with.
set -euo pipefail
cd "$(dirname "$0")"
cargo test --workspace
venv=target/python-venv
if [ ! -x "$venv/bin/python" ]; then
  "${REMAT_PYTHON:-python3}" -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r crates/python/requirements-test.txt
VIRTUAL_ENV="$PWD/$venv" "$venv/bin/maturin" develop --quiet --release --manifest-path crates/python/Cargo.toml
"$venv/bin/python" -m pytest -q crates/python/tests
