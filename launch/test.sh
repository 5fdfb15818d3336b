#!/usr/bin/env bash
# Installs what is needed, then runs the whole test suite on CPU.
set -euo pipefail
cd "$(dirname "$0")/.."
bash launch/install.sh
export JAX_PLATFORMS=cpu TF_CPP_MIN_LOG_LEVEL=2
export XLA_FLAGS="${XLA_FLAGS:---xla_force_host_platform_device_count=8}"
exec "${PYTHON:-python3}" -m pytest -q tests "$@"
