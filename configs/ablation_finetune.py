"""COCO fine-tuning of a Table 11 / 12 pre-trained model (configs/ablation_pretrain.py).

configs/coco_finetune.py with config.train.init_partial=True: an mlm
checkpoint has the embeddings, the encoder and the output projection of the
ic Captioner but no decoder, which starts from the run's seeded init (the
log lists what loaded and what started fresh). mass, ic+0.1*vlm and
ic+0.1*moc checkpoints hold the whole Captioner, so for them the option
loads everything (their extra parts are left behind); the strict
configs/coco_finetune.py works for them too.

  --config=configs/ablation_finetune.py[:<lr>,<steps>] --config.train.init_from=<pretrain workdir>
"""
import ml_collections

from configs import coco_finetune


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  config = coco_finetune.get_config(arg)
  config.train.init_partial = True
  return config
