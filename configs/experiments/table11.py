"""Table 11: ic against masked objectives (mlm, mass) at masking rates 0.1 / 0.2 /
0.4 / 0.8; nocaps val CIDEr after COCO fine-tuning of CC12M pre-training
(paper: ic 87.4 overall / 91.3 out; mlm 0.2 76.8 / 76.2; mlm 0.8 88.5).

  python -m cc12m_jax.experiments --suite=configs/experiments/table11.py[:paper] --workdir=W

Steps are selected on coco_val, nocaps_val is reported (as Table 3).
"""
from configs import ablation_pretrain
from configs.experiments import ablation, common


def get_config(size: str = "synthetic"):
  size = common.check_size(size)
  c = ablation.suite("table11", "Table 11: pre-training objectives, nocaps val CIDEr", size,
                     ablation_pretrain.TABLE11,
                     lambda row: row if row == "ic" else f"{row.split(',')[0]} [{row.split(',')[1]}]")
  c.claims = [
      common.chain("mlm improves with the masking rate (76.8 at 0.2, 88.5 at 0.8)", "overall",
                   "mlm_10 <= mlm_20 <= mlm_40 <= mlm_80"),
      common.chain("mlm at 0.8 is far above mlm at 0.2 (88.5 > 76.8)", "overall",
                   "mlm_20 < mlm_80"),
      common.chain("mass improves with the masking rate", "overall",
                   "mass_10 <= mass_20 <= mass_40 <= mass_80"),
      common.chain("mass beats mlm at the low rate 0.1", "overall", "mlm_10 < mass_10"),
      common.chain("mass beats mlm at the low rate 0.2", "overall", "mlm_20 < mass_20"),
      common.chain("ic beats mlm at the usual rate 0.2, overall (87.4 > 76.8)", "overall",
                   "mlm_20 < ic"),
      common.chain("ic beats mlm at 0.2 out-of-domain by more (91.3 > 76.2)", "out",
                   "mlm_20 < ic"),
      common.chain("mlm at 0.8 is not below ic (88.5 against 87.4)", "overall", "ic <= mlm_80"),
  ]
  return c
