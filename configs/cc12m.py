"""ic pre-training on CC12M only (paper's CC12M row)."""
from configs import paper_pretrain


def get_config():
  return paper_pretrain.get_config(train_sources="cc12m", train_weights="1.0")
