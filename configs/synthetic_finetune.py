"""Fine-tunes the synthetic pre-trained captioner on COCO-style records.

Needs `--config.train.init_from=<synthetic_pretrain workdir>`. The paper's
fine-tuning learning rates are tiny fractions of pre-training; with this few
steps a larger one is needed to move at all. 3e-4 is the middle of the
finetune_grid suite's rates, which coco_val does not separate (docs/results.md,
*The default world: the fine-tuning recipe*).
The budget is the longest of that grid's (300/600/900): the suites keep a
checkpoint every 50 steps and choose the step on coco_val, as the paper
tunes its maximum number of steps.
"""
import ml_collections

from configs import synthetic_pretrain

NUM_TRAIN_STEPS = 900


def get_config() -> ml_collections.ConfigDict:
  config = synthetic_pretrain.get_config()
  config.mode = "finetune"
  config.data.train_sources = "coco_train"
  config.data.exclude_ids_of = ""
  config.data.eval_sources = "coco_val,nocaps_val"
  config.optim.learning_rate = 3e-4
  config.optim.warmup_steps = 50
  config.optim.decay_steps = 100
  config.train.num_train_steps = NUM_TRAIN_STEPS
  config.train.checkpoint_every_steps = 150
  # The best checkpoint (best/) is chosen on coco_val, held out from fine-tuning
  # and never what is reported (nocaps val): selecting on the reported split
  # would overstate it.
  config.eval.selection_metric = "coco_val/overall/CIDEr"
  return config
