#!/usr/bin/env bash
# Run a config on every worker of a Cloud TPU VM slice (multi-host).
#
#   launch/tpu_vm.sh TPU_NAME ZONE configs/cc12m.py gs://BUCKET/runs/cc12m [--config.a.b=v ...]
#
# Each worker runs the same command; cc12m_jax.main calls
# jax.distributed.initialize() (config.train.distributed=True), every host
# reads its own shard of the input files, and orbax writes one checkpoint to
# the shared workdir (it must be shared storage such as gs://). Re-running the
# script after a preemption resumes from the latest checkpoint.
#
# Environment:
#   REPO_DIR   checkout of cc12m_jax on the workers (default ~/cc12m_jax)
#   PROJECT    gcloud project (default: gcloud's current project)
#   SYNC=1     copy this checkout to every worker first (gcloud scp)
set -euo pipefail

if [[ $# -lt 4 ]]; then
  echo "usage: $0 TPU_NAME ZONE CONFIG WORKDIR [--config.key=value ...]" >&2
  exit 2
fi
TPU_NAME="$1"; ZONE="$2"; CONFIG="$3"; WORKDIR="$4"; shift 4
REPO_DIR="${REPO_DIR:-~/cc12m_jax}"
PROJECT_FLAG=()
if [[ -n "${PROJECT:-}" ]]; then PROJECT_FLAG=(--project="${PROJECT}"); fi

case "${WORKDIR}" in
  gs://*) ;;
  *) echo "warning: ${WORKDIR} is not gs://; every worker must see the same workdir" >&2 ;;
esac

if [[ "${SYNC:-0}" == "1" ]]; then
  ROOT="$(cd "$(dirname "$0")/.." && pwd)"
  gcloud compute tpus tpu-vm scp --recurse "${ROOT}" "${TPU_NAME}:${REPO_DIR}" \
    --zone="${ZONE}" --worker=all "${PROJECT_FLAG[@]}"
fi

EXTRA=""
for arg in "$@"; do EXTRA+=" $(printf '%q' "${arg}")"; done

gcloud compute tpus tpu-vm ssh "${TPU_NAME}" --zone="${ZONE}" --worker=all "${PROJECT_FLAG[@]}" \
  --command="cd ${REPO_DIR} && TF_CPP_MIN_LOG_LEVEL=2 python3 -m cc12m_jax.main \
    --config=${CONFIG} --workdir=${WORKDIR} --config.train.distributed=True${EXTRA} \
    2>&1 | tee -a /tmp/cc12m_jax_\$(hostname).log"
