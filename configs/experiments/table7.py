"""Table 7: the CC3M benchmark, CIDEr on a CC3M-style dev split (paper: from
scratch on CC3M 100.9, CC12M pre-training fine-tuned on CC3M 105.4, CC12M
zero-shot 39.3).

  python -m cc12m_jax.experiments --suite=configs/experiments/table7.py[:paper] --workdir=W

Reports the `cc3m_dev` source (the synthetic world writes one; with real
data, import CC3M's validation TSV as `cc3m_dev`): the suite stops at
validation, naming it, when the data directory lacks it. There is no second held-out
CC3M split to select steps on, so no step is selected (`selection_source`
''): the fine-tuned model is its last checkpoint. The from-scratch model is
the CC3M pre-training run of Table 3.
"""
from configs.experiments import common


def get_config(size: str = "synthetic"):
  size = common.check_size(size)
  c = common.suite("table7", "Table 7: CC3M dev CIDEr", size, report_source="cc3m_dev",
                   selection_source="", selection_metric="overall/CIDEr")
  c.conditions.cc3m = {"ic_pretrain": common.ic_pretrain(size, "cc3m"),
                       "ic_zero_shot_cc3m_dev": common.ic_as_is(size)}
  c.conditions.cc12m = {
      "ic_pretrain": common.ic_pretrain(size, "cc12m"),
      "ic_zero_shot_cc3m_dev": common.ic_as_is(size),
      "ic_finetune_cc3m": common.ic_finetune(size, source="cc3m"),
      "ic_evaluate_cc3m_dev": common.ic_evaluate(size, of="ic_finetune_cc3m", select=False)}
  c.rows = [common.row("scratch", "From scratch (CC3M)", "cc3m", "ic_zero_shot_cc3m_dev"),
            common.row("cc12m_ft", "CC12M fine-tuned on CC3M", "cc12m", "ic_evaluate_cc3m_dev"),
            common.row("cc12m_zs", "CC12M zero-shot", "cc12m", "ic_zero_shot_cc3m_dev")]
  c.columns = [common.column("cider", "CIDEr", "{report_source}", "overall/CIDEr", 100.0)]
  c.claims = [common.chain("CC12M fine-tuned > from scratch > CC12M zero-shot "
                           "(105.4 > 100.9 > 39.3)", "cider", "cc12m_ft > scratch > cc12m_zs")]
  return c
