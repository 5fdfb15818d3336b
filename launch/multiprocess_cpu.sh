#!/usr/bin/env bash
# Runs N processes of cc12m_jax.main on this machine as one multi-host JAX job:
# jax.distributed with the coordinator on 127.0.0.1, each process with its own
# simulated CPU devices. Every multi-host path (per-process input shards,
# cross-process collectives, orbax checkpoints written by all processes,
# process_allgather in evaluation, writes from process 0) runs as on a TPU slice.
#
#   launch/multiprocess_cpu.sh N CONFIG WORKDIR [--config.key=value ...]
#
# Environment:
#   DEVICES_PER_PROCESS  simulated CPU devices of each process (default 1); it
#                        replaces any --xla_force_host_platform_device_count in
#                        XLA_FLAGS, so an inherited device count never leaks in
#   PORT                 coordinator port (default: a free one)
#   LOG_DIR              process_<i>.log and process_<i>.pid go here (default: a new
#                        directory under /tmp); process 0's log is also shown here
#   MODULE               Python module to run (default cc12m_jax.main; it must take
#                        main's flags, e.g. tests/multihost/worker.py)
#   HEARTBEAT_TIMEOUT_S  a process silent this long counts as dead and JAX stops the
#                        others with an error (default 30)
#   GRACE_S              after a process fails, how long the others get to stop on
#                        their own before this script kills them (default
#                        HEARTBEAT_TIMEOUT_S + 60)
#   WRAP                 command put before each process's python; {i} becomes the
#                        process index (e.g. WRAP='taskset -c {i}')
#   PYTHON               interpreter (default python3)
#
# SIGTERM or SIGINT (Ctrl-C) to this script is passed to every process as SIGTERM:
# JAX's preemption sync point makes all of them save the same step and exit 0,
# and the same command resumes. The exit status is 0 when every process exits 0,
# else the first failure's status.
set -uo pipefail

if [[ $# -lt 3 || ! "$1" =~ ^[1-9][0-9]*$ ]]; then
  echo "usage: $0 N CONFIG WORKDIR [--config.key=value ...]" >&2
  exit 2
fi
NUM="$1"; CONFIG="$2"; WORKDIR="$3"; shift 3
cd "$(dirname "$0")/.."

PY="${PYTHON:-python3}"
DEVICES="${DEVICES_PER_PROCESS:-1}"
MODULE="${MODULE:-cc12m_jax.main}"
HEARTBEAT="${HEARTBEAT_TIMEOUT_S:-30}"
GRACE="${GRACE_S:-$((HEARTBEAT + 60))}"
if [[ -z "${PORT:-}" ]]; then
  # The OS picks a free port; the tiny window until process 0 binds it is harmless
  # on a test machine (a clash fails fast: process 0 cannot bind).
  PORT="$("${PY}" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
fi
LOG_DIR="${LOG_DIR:-$(mktemp -d /tmp/cc12m_jax_multiprocess.XXXXXX)}"
mkdir -p "${LOG_DIR}"

# Each process sees exactly DEVICES CPU devices whatever XLA_FLAGS it inherited.
XLA_REST="$(sed -E 's/--xla_force_host_platform_device_count=[^ ]*//g' <<< "${XLA_FLAGS:-}")"
export XLA_FLAGS="${XLA_REST:+${XLA_REST} }--xla_force_host_platform_device_count=${DEVICES}"
export JAX_PLATFORMS=cpu TF_CPP_MIN_LOG_LEVEL="${TF_CPP_MIN_LOG_LEVEL:-2}"
export CUDA_VISIBLE_DEVICES=""       # tf.data and JAX stay on the CPU
export PYTHONUNBUFFERED=1            # a process killed by JAX loses no buffered log lines

PIDS=()
for ((i = 0; i < NUM; i++)); do
  WRAPPER=()
  if [[ -n "${WRAP:-}" ]]; then read -r -a WRAPPER <<< "${WRAP//\{i\}/${i}}"; fi
  "${WRAPPER[@]}" "${PY}" -m "${MODULE}" --config="${CONFIG}" --workdir="${WORKDIR}" \
    --config.train.distributed=True --coordinator_address="127.0.0.1:${PORT}" \
    --num_processes="${NUM}" --process_id="${i}" --heartbeat_timeout_s="${HEARTBEAT}" \
    "$@" > "${LOG_DIR}/process_${i}.log" 2>&1 &
  PIDS+=("$!")
  echo "$!" > "${LOG_DIR}/process_${i}.pid"
  echo "[multiprocess_cpu] process ${i}/${NUM}: pid $!, log ${LOG_DIR}/process_${i}.log" >&2
done
echo "[multiprocess_cpu] coordinator 127.0.0.1:${PORT}, ${DEVICES} CPU device(s) per process" >&2

tail -n +1 -F --pid="${PIDS[0]}" "${LOG_DIR}/process_0.log" 2>/dev/null &
TAIL=$!

# Messages from here on go to fd 3: the wait loop's stderr is dropped, as bash
# would print its own notice, with the whole command line, for every process a
# signal ended.
exec 3>&2
forward_sigterm() {
  echo "[multiprocess_cpu] passing SIGTERM to every process" >&3
  for pid in "${PIDS[@]}"; do kill -TERM "${pid}" 2>/dev/null; done
}
trap forward_sigterm TERM INT

declare -A STATUS=()
FIRST_FAILURE=""
FAILED_AT=0
describe() {  # exit status -> words
  if (( $1 > 128 )); then echo "killed by signal $(( $1 - 128 )) ($(kill -l $(( $1 - 128 )) 2>/dev/null))"
  else echo "exited with status $1"; fi
}
while (( ${#STATUS[@]} < NUM )); do
  for i in "${!PIDS[@]}"; do
    [[ -n "${STATUS[$i]:-}" ]] && continue
    if ! kill -0 "${PIDS[$i]}" 2>/dev/null; then
      wait "${PIDS[$i]}"; rc=$?
      STATUS[$i]=${rc}
      echo "[multiprocess_cpu] process ${i} (pid ${PIDS[$i]}) $(describe "${rc}")" >&3
      if (( rc != 0 )) && [[ -z "${FIRST_FAILURE}" ]]; then
        FIRST_FAILURE=${rc}; FAILED_AT=${SECONDS}
      fi
    fi
  done
  if [[ -n "${FIRST_FAILURE}" ]] && (( SECONDS - FAILED_AT > GRACE )); then
    for i in "${!PIDS[@]}"; do
      if [[ -z "${STATUS[$i]:-}" ]]; then
        echo "[multiprocess_cpu] process ${i} (pid ${PIDS[$i]}) still running ${GRACE} s after" \
             "a process failed; killing it" >&3
        kill -KILL "${PIDS[$i]}" 2>/dev/null
      fi
    done
  fi
  sleep 0.5
done 2>/dev/null
wait "${TAIL}" 2>/dev/null
exit "${FIRST_FAILURE:-0}"
