"""Table 12: ic with an auxiliary loss weighted 0.1, vlm or moc; nocaps val CIDEr
after COCO fine-tuning of CC12M pre-training (paper: ic 87.4, ic + 0.1 vlm
87.1, ic + 0.1 moc 89.9).

  python -m cc12m_jax.experiments --suite=configs/experiments/table12.py[:paper] --workdir=W

The moc row reads the region clusters of the pre-training data, computed
once before the suite (docs/objectives.md):
  python -m cc12m_jax.data.clusters --data_dir=data/synthetic --source=cc12m \
      --num_clusters=256 --sample_regions=50000        (paper size: data/features, 1024)
"""
from configs import ablation_pretrain
from configs.experiments import ablation, common, table3

LABELS = {"ic": "ic", "ic+0.1*vlm": "ic + 0.1 vlm", "ic+0.1*moc": "ic + 0.1 moc"}


def get_config(size: str = "synthetic"):
  size = common.check_size(size)
  c = ablation.suite("table12", "Table 12: auxiliary pre-training losses, nocaps val CIDEr", size,
                     ablation_pretrain.TABLE12, LABELS.get)
  # The pre-trained models as is (no figures in the paper): a concept lost after
  # fine-tuning was either never learned in pre-training or erased by fine-tuning.
  for row in ablation_pretrain.TABLE12:
    key, condition_key = ablation.keys(row)
    c.rows.append(common.row(f"{key}_zs", f"{LABELS[row]} zero-shot", condition_key,
                             "ic_zero_shot"))
  # Which concepts an auxiliary loss costs or gains, by their frequency in CC12M.
  c.long_tail = {"rows": ["ic", "ic_vlm", "ic_moc", "ic_zs", "ic_vlm_zs", "ic_moc_zs"],
                 "compare": ["ic,ic_vlm", "ic,ic_moc", "ic_zs,ic_vlm_zs"],
                 "bucket_source": "cc12m", "bucket_edges": table3.LONG_TAIL_EDGES[size]}
  c.claims = [
      common.chain("ic + 0.1 moc beats ic (89.9 > 87.4)", "overall", "ic < ic_moc"),
      common.chain("ic + 0.1 vlm is no better than ic (87.1 against 87.4)", "overall",
                   "ic_vlm <= ic"),
  ]
  return c
