"""ic pre-training on CC3M + CC12M (paper's combined row).

Sources are mixed in proportion to their sizes (3.3M : 12.4M pairs), and
CC3M's image ids are removed from CC12M so no image appears twice.
"""
from configs import paper_pretrain

CC3M_PAIRS = 3.3e6
CC12M_PAIRS = 12.4e6


def get_config():
  total = CC3M_PAIRS + CC12M_PAIRS
  return paper_pretrain.get_config(
      train_sources="cc3m,cc12m",
      train_weights=f"{CC3M_PAIRS / total:.4f},{CC12M_PAIRS / total:.4f}",
      exclude_ids_of="cc3m")
