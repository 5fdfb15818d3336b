#!/usr/bin/env bash
# Runs a config on every worker of a Cloud TPU VM slice (several hosts, one process each).
#
#   launch/tpu_vm.sh [--dry_run] [--skip_sync] [--skip_setup] \
#       TPU_NAME ZONE CONFIG WORKDIR [--config.key=value ...]
#
#   e.g. launch/tpu_vm.sh my-v4-32 us-central2-b configs/cc12m.py gs://my-bucket/runs/cc12m
#
# Three steps, each a gcloud command on all workers at once (--worker=all):
#   1. sync   this checkout's files (tracked and untracked-but-not-ignored, as
#             `git ls-files` lists them) as a tarball, unpacked into REPO_DIR on
#             every worker, replacing what was there;
#   2. setup  launch/install.sh on every worker (Java for the caption metrics,
#             WordNet, the package with its dependencies), then jax[tpu]
#             (JAX_SPEC); both skip what is already installed;
#   3. run    python -m cc12m_jax.main with --config.train.distributed=True on
#             every worker: jax.distributed.initialize() finds the slice's hosts
#             itself, each host reads its own input shard, and checkpoints,
#             metrics and reports go to WORKDIR, which every host must see
#             (gs://...). Each worker also appends its output to
#             ~/cc12m_jax_run.log.
# Re-running after a preemption resumes from the latest checkpoint in WORKDIR.
# CONFIG is a path inside the checkout (it is read on the workers).
#
# --dry_run prints every command (shell-quoted, ready to paste) and runs none.
#
# Environment:
#   PROJECT    gcloud project (default: gcloud's current project)
#   REPO_DIR   checkout on the workers, relative to the home directory (default cc12m_jax)
#   JAX_SPEC   pip requirement of JAX for TPUs (default "jax[tpu]>=0.6,<0.11", setup.py's range)
#   PYTHON     interpreter on the workers (default python3)
#   TARBALL    local path of the sync tarball (default: /tmp/cc12m_jax_src.<pid>.tgz)
set -euo pipefail

DRY_RUN=0; SYNC=1; SETUP=1
while [[ $# -gt 0 && "$1" == --* && "$1" != --config* ]]; do
  case "$1" in
    --dry_run) DRY_RUN=1 ;;
    --skip_sync) SYNC=0 ;;
    --skip_setup) SETUP=0 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
if [[ $# -lt 4 ]]; then
  echo "usage: $0 [--dry_run] [--skip_sync] [--skip_setup] TPU_NAME ZONE CONFIG WORKDIR" \
       "[--config.key=value ...]" >&2
  exit 2
fi
TPU_NAME="$1"; ZONE="$2"; CONFIG="$3"; WORKDIR="$4"; shift 4
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
REPO_DIR="${REPO_DIR:-cc12m_jax}"
JAX_SPEC="${JAX_SPEC:-jax[tpu]>=0.6,<0.11}"
PYTHON="${PYTHON:-python3}"
TARBALL="${TARBALL:-/tmp/cc12m_jax_src.$$.tgz}"
REMOTE_TARBALL="/tmp/cc12m_jax_src.tgz"

case "${WORKDIR}" in
  gs://*) ;;
  *) echo "warning: ${WORKDIR} is not gs://; every worker must see the same workdir" >&2 ;;
esac

# One word, quoted for a bash command line: as it is when it holds only safe
# characters, else in single quotes (each ' written as '\'').
q() {
  if [[ "$1" =~ ^[A-Za-z0-9_./:=,+@%-]+$ ]]; then printf '%s' "$1"
  else printf "'%s'" "${1//\'/\'\\\'\'}"; fi
}

# Prints a command shell-quoted; runs it unless --dry_run.
run() {
  local words=() arg
  for arg in "$@"; do words+=("$(q "${arg}")"); done
  echo "+ ${words[*]}"
  if [[ "${DRY_RUN}" == "0" ]]; then "$@"; fi
}

TARGET=(--zone="${ZONE}" --worker=all)
if [[ -n "${PROJECT:-}" ]]; then TARGET+=(--project="${PROJECT}"); fi
on_all_workers() {  # on_all_workers COMMAND: COMMAND runs in each worker's login shell
  run gcloud compute tpus tpu-vm ssh "${TPU_NAME}" "${TARGET[@]}" --command="$1"
}

if [[ "${SYNC}" == "1" ]]; then
  run bash -c "cd $(q "${ROOT}") && git ls-files -z --cached --others --exclude-standard \
| tar --null -T - -czf $(q "${TARBALL}")"
  run gcloud compute tpus tpu-vm scp "${TARBALL}" "${TPU_NAME}:${REMOTE_TARBALL}" "${TARGET[@]}"
  on_all_workers "set -e; rm -rf $(q "${REPO_DIR}.new"); mkdir -p $(q "${REPO_DIR}.new"); \
tar -xzf ${REMOTE_TARBALL} -C $(q "${REPO_DIR}.new"); rm -rf $(q "${REPO_DIR}"); \
mv $(q "${REPO_DIR}.new") $(q "${REPO_DIR}")"
  if [[ "${DRY_RUN}" == "0" ]]; then rm -f "${TARBALL}"; fi
fi

if [[ "${SETUP}" == "1" ]]; then
  on_all_workers "set -e; cd $(q "${REPO_DIR}"); PYTHON=$(q "${PYTHON}") bash launch/install.sh; \
$(q "${PYTHON}") -m pip install -q --disable-pip-version-check $(q "${JAX_SPEC}")"
fi

EXTRA=""
for arg in "$@"; do EXTRA+=" $(q "${arg}")"; done
on_all_workers "set -o pipefail; cd $(q "${REPO_DIR}") && TF_CPP_MIN_LOG_LEVEL=2 \
$(q "${PYTHON}") -m cc12m_jax.main --config=$(q "${CONFIG}") --workdir=$(q "${WORKDIR}") \
--config.train.distributed=True${EXTRA} 2>&1 | tee -a \"\$HOME/cc12m_jax_run.log\""
