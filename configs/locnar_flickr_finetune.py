"""Fine-tuning a pre-trained dual encoder on Localized Narratives Flickr30K
(paper Table 8, the LocNar Flickr30K columns).

Flickr30K fine-tuning (configs/vlm_flickr_finetune.py: grid, schedule, batch,
selection on val) with the narratives as the texts: queries of up to 180
tokens, taken from the records themselves (LocNar has no Karpathy JSON).
Pick a learning rate with `--config=configs/locnar_flickr_finetune.py:<lr>`;
needs `--config.train.init_from=<vlm pre-training workdir>`.

Sources (docs/importers.md, `python -m cc12m_jax.data.importers locnar`):
  locnar_flickr_train / _val / _test   flickr30k_{train,val,test}_localized_narratives.jsonl
                                       + the Flickr30K features of that split
"""
import ml_collections

from configs import vlm_flickr_finetune

MAX_LENGTH = 180
LEARNING_RATES = vlm_flickr_finetune.LEARNING_RATES
sweep = vlm_flickr_finetune.sweep


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  config = vlm_flickr_finetune.get_config(arg)
  config.data.train_sources = "locnar_flickr_train"
  config.data.eval_sources = "locnar_flickr_val,locnar_flickr_test"  # first: selection
  config.data.max_caption_length = MAX_LENGTH
  config.eval.references = ""  # each record's narratives are its queries
  config.eval.selection_metric = "locnar_flickr_val/image_retrieval/R@1"
  return config
