"""Shared settings of the paper's ic pre-training runs (Section 4.1, Appendix E).

2M steps at batch 128 per TPU core x 32 cores = 4096; the three run configs
(cc3m.py, cc12m.py, cc3m_cc12m.py) differ only in their data sources, mixture
weights and image-id exclusion. The paper does not state the pre-training
learning rate; base.py's 3.2e-4 with 20k warm-up steps and 0.95 decay every
25k steps is our choice (one `--config.optim.*` override away).
"""
import ml_collections

from configs import base

CORES = 32
BATCH_PER_CORE = 128


def get_config(train_sources: str, train_weights: str,
               exclude_ids_of: str = "") -> ml_collections.ConfigDict:
  config = base.get_config()
  config.mode = "pretrain"
  config.data.data_dir = "data/features"  # override: --config.data.data_dir=gs://...
  config.data.train_sources = train_sources
  config.data.train_weights = train_weights
  config.data.train_fractions = ",".join("1.0" for _ in train_sources.split(","))
  config.data.exclude_ids_of = exclude_ids_of
  config.data.eval_sources = "nocaps_val"
  config.data.global_batch_size = CORES * BATCH_PER_CORE  # 4096
  config.data.eval_global_batch_size = 1024
  config.train.objective = "ic"
  config.train.num_train_steps = 2_000_000
  config.train.checkpoint_every_steps = 10_000
  config.train.log_every_steps = 500
  config.train.distributed = True  # multi-host TPU slice
  config.mesh.data = -1
  config.mesh.fsdp = 1
  config.mesh.model = 1
  return config
