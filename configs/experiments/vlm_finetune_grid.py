"""The Flickr fine-tuning recipe of the dual encoder, found as the paper found
its own (Appendix E.5): a small grid of learning rates, each run's step chosen
on flickr_val R@1, the rate chosen by its flickr_val value at that step
(printed under the table; flickr_test beside it is for reading, never for
choosing).

  python -m cc12m_jax.experiments --suite=configs/experiments/vlm_finetune_grid.py[:paper] --workdir=W

Run on CC12M pre-training, as the captioning grid (finetune_grid.py); the
standard rate's stages are Table 8's (configs/vlm_synthetic_finetune.py;
paper: vlm_flickr_finetune.py's 3.2e-7 of its grid 3.2e-8 / 3.2e-7 / 3.2e-6),
so on a shared workdir only the other rates run.
"""
from configs import vlm_flickr_finetune, vlm_synthetic_finetune
from configs.experiments import common, finetune_grid

STANDARD = {"synthetic": vlm_synthetic_finetune.LEARNING_RATE,
            "paper": vlm_flickr_finetune.LEARNING_RATE}
# The paper's grid at paper size; at synthetic size factors of about 3 from
# 3e-5 up to the pre-training rate (1e-3), so the winner lies inside the grid.
RATES = {"synthetic": (3e-5, 1e-4, 3e-4, 1e-3), "paper": vlm_flickr_finetune.LEARNING_RATES}


def get_config(size: str = "synthetic"):
  size = common.check_size(size)
  c = common.suite("vlm_finetune_grid", "Flickr fine-tuning learning rate, CC12M pre-training",
                   size, report_source="flickr_test", selection_source="flickr_val",
                   selection_metric="image_retrieval/R@1")
  c.paper_table = ""  # the paper reports no grid results
  c.conditions.cc12m = {"vlm_pretrain": common.vlm_pretrain(size, "cc12m")}
  finetune_grid.add_rates(c, "cc12m", "vlm", RATES[size], STANDARD[size],
                          lambda: common.vlm_finetune(size),
                          lambda of: common.vlm_evaluate(size, of=of))
  c.columns = [common.column(f"R@{k}", f"R@{k}", "{report_source}", f"image_retrieval/R@{k}", 1.0)
               for k in (1, 5, 10)]
  return c
