"""vlm pre-training on CC3M only (paper Table 8, CC3M row)."""
from configs import vlm_pretrain


def get_config():
  config = vlm_pretrain.get_config(train_sources="cc3m", train_weights="1.0")
  # The paper's one exception to its 2M-step pre-training: vision-and-language
  # matching on CC3M ran 1M steps (its compute accounting).
  config.train.num_train_steps = 1_000_000
  return config
