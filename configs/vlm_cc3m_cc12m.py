"""vlm pre-training on CC3M + CC12M (paper Table 8, combined row).

Mixture weights and the CC3M-id exclusion are those of configs/cc3m_cc12m.py.
"""
from configs import cc3m_cc12m, vlm_pretrain


def get_config():
  total = cc3m_cc12m.CC3M_PAIRS + cc3m_cc12m.CC12M_PAIRS
  return vlm_pretrain.get_config(
      train_sources="cc3m,cc12m",
      train_weights=(f"{cc3m_cc12m.CC3M_PAIRS / total:.4f},"
                     f"{cc3m_cc12m.CC12M_PAIRS / total:.4f}"),
      exclude_ids_of="cc3m")
