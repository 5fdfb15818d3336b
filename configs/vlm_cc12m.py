"""vlm pre-training on CC12M only (paper Table 8, CC12M row)."""
from configs import vlm_pretrain


def get_config():
  return vlm_pretrain.get_config(train_sources="cc12m", train_weights="1.0")
