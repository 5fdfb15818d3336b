#!/usr/bin/env bash
# The main job on the synthetic long-tail world: the paper's headline comparison.
#   1. generate the world (feature records, references, vocabulary)
#   2. run configs/experiments/headline.py through the experiment runner: pre-train
#      the ic captioner on CC3M-style and on CC12M-style records (CC3M images
#      excluded from CC12M), fine-tune each on COCO-style records with the step
#      chosen on coco_val, train one on COCO-style records only, and decode the
#      nocaps-style validation set with beam search;
#   3. print the per-domain CIDEr table beside the paper's Table 3, whether the
#      paper's orderings hold (paired bootstrap intervals), and the per-concept
#      long-tail report (naming recall by concept frequency, with a PNG).
# Every stage goes through the same entry point as real data (cc12m_jax.main).
# PARALLEL=N runs up to N stages at once (default 1): the three conditions are
# independent chains, which a host with more cores than one stage keeps busy
# can run side by side. Extra arguments go to the runner (e.g. --seeds=3, --dry_run). A re-run skips
# finished stages and resumes an interrupted one from its checkpoint.
set -euo pipefail
cd "$(dirname "$0")/.."
bash launch/install.sh

PY=${PYTHON:-python3}
DATA=${DATA:-data/synthetic}
WORK=${WORK:-workdirs/synthetic}
export JAX_PLATFORMS=${JAX_PLATFORMS:-cpu} TF_CPP_MIN_LOG_LEVEL=${TF_CPP_MIN_LOG_LEVEL:-2}

echo "=== [1/2] Generating the synthetic world into $DATA"
"$PY" -m cc12m_jax.data.synthetic.generate --config=configs/synthetic_data.py --output_dir="$DATA"

echo "=== [2/2] CC3M-style against CC12M-style pre-training, each fine-tuned ($WORK)"
"$PY" -m cc12m_jax.experiments --suite=configs/experiments/headline.py --workdir="$WORK" \
  --suite.data_dir="$DATA" --parallel="${PARALLEL:-1}" "$@"
echo "Done. Table: $WORK/headline/results.md; long tail: $WORK/headline/long_tail/;" \
  "stage logs and TensorBoard: $WORK/runs/"
