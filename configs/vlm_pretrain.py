"""Shared settings of the paper's vlm (dual encoder) pre-training runs.

Same data, batch (128 per TPU core x 32 cores = 4096) and schedule as the ic
runs (configs/paper_pretrain.py); only the objective differs. The dual
encoder's towers each have 6 layers (model.num_encoder_layers,
model.text_encoder_layers), both projected to 512 (model.projection_dim), with
the image-to-text contrastive loss of the paper at a fixed tau = 0.05 (the
paper does not give tau; `--config.model.learn_temperature=True` learns it,
`--config.model.symmetric_loss=True` adds the text-to-image direction).
Zero-shot retrieval of the result: configs/vlm_zero_shot.py.
"""
import ml_collections

from configs import paper_pretrain


def get_config(train_sources: str, train_weights: str,
               exclude_ids_of: str = "") -> ml_collections.ConfigDict:
  config = paper_pretrain.get_config(train_sources, train_weights, exclude_ids_of)
  config.train.objective = "vlm"
  # Zero-shot retrieval is scored afterwards by the evaluate mode (the
  # 'retrieval' evaluator), on the checkpoint as is.
  config.train.eval_every_steps = 0
  config.data.eval_sources = "flickr_val"
  config.eval.references = "data/features/flickr/dataset_flickr30k.json"
  # Zero-shot means "as is": evaluate the final checkpoint, no selection.
  config.eval.selection_metric = ""
  config.model.text_encoder_layers = 6
  config.model.projection_dim = 512
  config.model.temperature = 0.05
  config.model.learn_temperature = False
  config.model.symmetric_loss = False
  return config
