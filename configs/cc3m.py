"""ic pre-training on CC3M only (paper's CC3M row)."""
from configs import paper_pretrain


def get_config():
  return paper_pretrain.get_config(train_sources="cc3m", train_weights="1.0")
