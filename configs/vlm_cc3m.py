"""vlm pre-training on CC3M only (paper Table 8, CC3M row)."""
from configs import vlm_pretrain


def get_config():
  return vlm_pretrain.get_config(train_sources="cc3m", train_weights="1.0")
