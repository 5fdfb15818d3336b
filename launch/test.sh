#!/usr/bin/env bash
# Installs what is needed, then runs the whole test suite on CPU.
set -euo pipefail
cd "$(dirname "$0")/.."
bash launch/install.sh
export JAX_PLATFORMS=cpu TF_CPP_MIN_LOG_LEVEL=2
export XLA_FLAGS="${XLA_FLAGS:---xla_force_host_platform_device_count=8}"
# Two workers (one per core of the reference machine); a test module stays on one
# worker so its module-scoped fixtures (synthetic worlds) are built once.
# No worker restart: with --dist loadfile, xdist 3.8 can wait forever after
# replacing a crashed worker (pytest-dev/pytest-xdist#1378); a crash then
# ends the run at once, naming the test it crashed in.
exec "${PYTHON:-python3}" -m pytest -q -n 2 --dist loadfile --max-worker-restart=0 tests "$@"
