#!/usr/bin/env bash
# Run a config on this machine (CPU, one GPU, or all local devices).
#
#   launch/local.sh configs/synthetic_pretrain.py /tmp/cc12m_run [--config.a.b=v ...]
#
# A second invocation with the same workdir resumes from its latest checkpoint.
# TensorBoard: tensorboard --logdir <workdir>
set -euo pipefail

if [[ $# -lt 2 ]]; then
  echo "usage: $0 CONFIG WORKDIR [--config.key=value ...]" >&2
  exit 2
fi
CONFIG="$1"; WORKDIR="$2"; shift 2
cd "$(dirname "$0")/.."

export TF_CPP_MIN_LOG_LEVEL="${TF_CPP_MIN_LOG_LEVEL:-2}"
# Compiled programs are cached across restarts of the same config.
export JAX_COMPILATION_CACHE_DIR="${JAX_COMPILATION_CACHE_DIR:-${HOME}/.cache/cc12m_jax_xla}"

exec python -m cc12m_jax.main --config="${CONFIG}" --workdir="${WORKDIR}" \
  --config.train.distributed=False "$@"
