"""Zero-shot image retrieval on Localized Narratives Flickr30K test (paper
Table 8): configs/vlm_zero_shot.py with the narratives (up to 180 tokens,
from the records: LocNar has no Karpathy JSON) as the queries.

    python -m cc12m_jax.main --config=configs/locnar_flickr_zero_shot.py \
        --workdir=W --config.eval.checkpoint_dir=<vlm pre-training workdir>
"""
import ml_collections

from configs import vlm_zero_shot

MAX_LENGTH = 180


def get_config() -> ml_collections.ConfigDict:
  config = vlm_zero_shot.get_config()
  config.data.train_sources = "locnar_flickr_test"  # only read for the feature dimension
  config.data.eval_sources = "locnar_flickr_test"
  config.data.max_caption_length = MAX_LENGTH
  config.eval.references = ""
  return config
