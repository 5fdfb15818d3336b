"""Fine-tuning a pre-trained dual encoder on Flickr30K (paper Appendix E.5).

Grid searched in the paper:
  LEARNING_RATES = 3.2e-8, 3.2e-7, 3.2e-6
  TRAIN_STEPS    = 10000 (fixed)
  batch          = 128 per TPU core x 32 cores = 4096
Pick a learning rate with `--config=configs/vlm_flickr_finetune.py:<lr>`
(default 3.2e-7), or enumerate `sweep()` for a launcher. Needs
`--config.train.init_from=<vlm pre-training workdir>`.

Protocol (train on Flickr train, select on val, report test):
  1. `python -m cc12m_jax.main --config=configs/vlm_flickr_finetune.py:<lr>
      --workdir=W_lr --config.train.init_from=<pretrain workdir>` for each lr;
  2. `python -m cc12m_jax.main --config=configs/vlm_flickr_finetune.py:<lr>
      --workdir=W_lr --config.mode=evaluate --config.train.init_from=<pretrain workdir>`
     (eval.checkpoint_dir '' = the workdir W_lr)
     scores every kept checkpoint on flickr_val (image_retrieval/R@1), keeps
     the best and reports flickr_val and flickr_test for it in
     W_lr/retrieval_<step>.json;
  3. the learning rate is chosen by the flickr_val R@1 of those files.

Schedule: the paper gives none for Flickr; we reuse the COCO fine-tuning one
(warm-up 20 epochs, x0.95 every 25 epochs). Flickr30K train (Karpathy) has
29,000 images x 5 captions = 145,000 pairs, 35.4 steps per epoch at 4096.
"""
import ml_collections

from configs import base

LEARNING_RATES = (3.2e-8, 3.2e-7, 3.2e-6)
LEARNING_RATE = 3.2e-7  # the default of the grid
TRAIN_STEPS = 10_000
CORES = 32
BATCH_PER_CORE = 128
FLICKR_TRAIN_PAIRS = 29_000 * 5
WARMUP_EPOCHS = 20
DECAY_EVERY_EPOCHS = 25


def epochs_to_steps(epochs: float) -> int:
  return int(round(epochs * FLICKR_TRAIN_PAIRS / (CORES * BATCH_PER_CORE)))


def sweep() -> list[dict]:
  """The paper's grid as override dicts (config key -> value)."""
  return [{"optim.learning_rate": lr} for lr in LEARNING_RATES]


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  lr = float(arg) if arg else LEARNING_RATE
  config = base.get_config()
  config.mode = "finetune"
  config.data.data_dir = "data/features"
  config.data.train_sources = "flickr_train"
  config.data.train_weights = "1.0"
  config.data.train_fractions = "1.0"
  config.data.eval_sources = "flickr_val,flickr_test"  # first: checkpoint selection
  config.data.global_batch_size = CORES * BATCH_PER_CORE  # 4096
  config.data.eval_global_batch_size = 1024
  config.eval.references = "data/features/flickr/dataset_flickr30k.json"
  config.eval.selection_metric = "flickr_val/image_retrieval/R@1"
  config.eval.select_checkpoint = True  # evaluate mode: best kept checkpoint on flickr_val
  config.optim.learning_rate = lr
  config.optim.warmup_steps = epochs_to_steps(WARMUP_EPOCHS)      # 708
  config.optim.decay_steps = epochs_to_steps(DECAY_EVERY_EPOCHS)  # 885
  config.optim.decay_rate = 0.95
  config.train.objective = "vlm"
  # Checkpoints are scored and selected afterwards, by the evaluate mode.
  config.train.eval_every_steps = 0
  config.train.num_train_steps = TRAIN_STEPS
  config.train.checkpoint_every_steps = 1_000
  config.train.keep_checkpoints = 10  # every checkpoint stays selectable on val
  config.train.log_every_steps = 100
  config.train.init_from = ""  # required: --config.train.init_from=<pretrain workdir>
  config.train.distributed = True
  config.model.text_encoder_layers = 6
  config.model.projection_dim = 512
  config.model.temperature = 0.05
  return config
