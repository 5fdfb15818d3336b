#!/usr/bin/env bash
# The main job on the synthetic long-tail world: the paper's whole flow.
#   1. generate the world (feature records, references, vocabulary)
#   2. pre-train the ic captioner on CC12M-style records (CC3M images excluded)
#   3. fine-tune it on COCO-style records
#   4. decode the nocaps-style validation set with beam search and print the
#      per-domain table (CIDEr, BLEU-4, METEOR, ROUGE-L) with example captions.
# Every step goes through the same entry points as real data. Extra arguments
# are passed to every cc12m_jax.main call (e.g. --config.train.num_train_steps=100).
# A re-run resumes: finished steps are restored from their workdirs.
set -euo pipefail
cd "$(dirname "$0")/.."
bash launch/install.sh

PY=${PYTHON:-python3}
DATA=${DATA:-data/synthetic}
WORK=${WORK:-workdirs/synthetic}
export JAX_PLATFORMS=${JAX_PLATFORMS:-cpu} TF_CPP_MIN_LOG_LEVEL=${TF_CPP_MIN_LOG_LEVEL:-2}

echo "=== [1/4] Generating the synthetic world into $DATA"
"$PY" -m cc12m_jax.data.synthetic.generate --config=configs/synthetic_data.py --output_dir="$DATA"

echo "=== [2/4] Pre-training on CC12M-style records ($WORK/pretrain)"
"$PY" -m cc12m_jax.main --config=configs/synthetic_pretrain.py --workdir="$WORK/pretrain" \
  --config.data.data_dir="$DATA" "$@"

echo "=== [3/4] Fine-tuning on COCO-style records ($WORK/finetune)"
"$PY" -m cc12m_jax.main --config=configs/synthetic_finetune.py --workdir="$WORK/finetune" \
  --config.data.data_dir="$DATA" --config.train.init_from="$WORK/pretrain" "$@"

echo "=== [4/4] Beam-search decoding and scoring of the nocaps-style validation set"
"$PY" -m cc12m_jax.main --config=configs/synthetic_finetune.py --workdir="$WORK/evaluate" \
  --config.mode=evaluate --config.data.data_dir="$DATA" --config.data.eval_sources=nocaps_val \
  --config.eval.checkpoint_dir="$WORK/finetune" "$@"
echo "Done. Reports: $WORK/evaluate/eval/; TensorBoard: tensorboard --logdir $WORK"
