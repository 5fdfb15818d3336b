"""Fine-tuning a pre-trained captioner on Localized Narratives COCO (paper Table 6).

Table 6 fine-tunes on LocNar COCO and evaluates on LocNar Open Images. A
narrative is a paragraph, not a sentence: captions and decoding go to 180
tokens. Checkpoints are chosen on LocNar COCO val; LocNar Open Images val is
the reported transfer set. Everything else is COCO fine-tuning's
(configs/coco_finetune.py: the paper gives no separate LocNar schedule, so
its grid and its schedule in steps are kept): pick a point with
`--config=configs/locnar_coco_finetune.py:<lr>,<steps>`.

Sources (docs/importers.md, `python -m cc12m_jax.data.importers locnar`):
  locnar_coco_train  coco_train_localized_narratives*.jsonl + COCO train2017 features
  locnar_coco_val    coco_val_localized_narratives.jsonl + COCO val2017 features
  locnar_oi_val      open_images_validation_localized_narratives.jsonl
                     + Open Images validation features
"""
import ml_collections

from configs import coco_finetune

MAX_LENGTH = 180  # tokens of a narrative, EOS included; the decode budget too
LEARNING_RATES = coco_finetune.LEARNING_RATES
TRAIN_STEPS = coco_finetune.TRAIN_STEPS
sweep = coco_finetune.sweep


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  config = coco_finetune.get_config(arg)
  config.data.train_sources = "locnar_coco_train"
  config.data.eval_sources = "locnar_coco_val,locnar_oi_val"
  config.data.max_caption_length = MAX_LENGTH
  config.decode.max_decode_len = MAX_LENGTH
  config.eval.selection_metric = "locnar_coco_val/overall/CIDEr"
  return config
