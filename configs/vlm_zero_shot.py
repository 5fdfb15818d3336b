"""Zero-shot Flickr30K image retrieval of a vlm pre-trained model (Table 8).

The model is applied as is: `--config.eval.checkpoint_dir=<pretrain workdir>`
(latest checkpoint; `--config.eval.checkpoint_step=N` for another). Reports
image retrieval (each of the 5,000 test captions as a query over the 1,000
test images) and text retrieval R@1/5/10 into <workdir>/retrieval_<step>.json.
"""
import ml_collections

from configs import vlm_cc12m


def get_config() -> ml_collections.ConfigDict:
  config = vlm_cc12m.get_config()  # model shape of every vlm pre-training run
  config.mode = "evaluate"
  config.data.train_sources = "flickr_test"  # only read for the feature dimension
  config.data.train_weights = "1.0"
  config.data.train_fractions = "1.0"
  config.data.exclude_ids_of = ""
  config.data.eval_sources = "flickr_test"
  config.eval.selection_metric = ""  # zero-shot: no checkpoint selection
  config.eval.checkpoint_dir = ""  # the pre-training workdir ('' = --workdir)
  config.eval.checkpoint_step = -1
  config.train.distributed = False
  return config
