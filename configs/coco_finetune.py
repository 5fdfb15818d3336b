"""Fine-tuning a pre-trained captioner on COCO Captions (paper Appendix E.5).

Grid searched in the paper:
  LEARNING_RATES = 3.2e-9, 3.2e-8, 3.2e-7
  TRAIN_STEPS    = 5000, 10000
Pick a point with `--config=configs/coco_finetune.py:<lr>,<steps>` (default
3.2e-8,5000), or enumerate `sweep()` for a launcher.

Epoch-based settings are converted to steps. One epoch is one pass over the
training *pairs* (the input pipeline yields one example per caption):
COCO train2017 has 118,287 images and 591,753 captions, so at batch 4096 an
epoch is 591,753 / 4096 = 144.5 steps; warm-up 20 epochs = 2,889 steps and
decay 0.95 every 25 epochs = every 3,612 steps.
"""
import ml_collections

from configs import base

LEARNING_RATES = (3.2e-9, 3.2e-8, 3.2e-7)
LEARNING_RATE = 3.2e-8  # the default of the grid (with 5K steps)
TRAIN_STEPS = (5_000, 10_000)
COCO_TRAIN_PAIRS = 591_753
GLOBAL_BATCH = 4096
WARMUP_EPOCHS = 20
DECAY_EVERY_EPOCHS = 25


def epochs_to_steps(epochs: float, pairs: int = COCO_TRAIN_PAIRS,
                    batch: int = GLOBAL_BATCH) -> int:
  return int(round(epochs * pairs / batch))


def sweep() -> list[dict]:
  """The paper's grid as override dicts (config key -> value)."""
  return [{"optim.learning_rate": lr, "train.num_train_steps": steps}
          for lr in LEARNING_RATES for steps in TRAIN_STEPS]


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  lr, steps = LEARNING_RATE, 5_000
  if arg:
    lr_text, steps_text = arg.split(",")
    lr, steps = float(lr_text), int(steps_text)
  config = base.get_config()
  config.mode = "finetune"
  config.data.data_dir = "data/features"
  config.data.train_sources = "coco_train"
  config.data.train_weights = "1.0"
  config.data.train_fractions = "1.0"
  config.data.eval_sources = "coco_val,nocaps_val"
  config.data.global_batch_size = GLOBAL_BATCH
  config.data.eval_global_batch_size = 1024
  config.optim.learning_rate = lr
  config.optim.warmup_steps = epochs_to_steps(WARMUP_EPOCHS)        # 2889
  config.optim.decay_steps = epochs_to_steps(DECAY_EVERY_EPOCHS)    # 3612
  config.optim.decay_rate = 0.95
  config.train.objective = "ic"
  config.train.num_train_steps = steps
  config.train.checkpoint_every_steps = 1_000
  config.train.log_every_steps = 100
  config.train.init_from = ""  # required: --config.train.init_from=<pretrain workdir>
  config.train.distributed = True
  # The best checkpoint (best/) is chosen on coco_val, held out from fine-tuning
  # and never what is reported (nocaps val): selecting on the reported split
  # would overstate it.
  config.eval.selection_metric = "coco_val/overall/CIDEr"
  return config
