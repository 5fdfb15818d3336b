"""Pre-training rows of the paper's Tables 11 and 12 (Appendix D.2), at paper size.

  --config=configs/ablation_pretrain.py:<row>     row = <objective>[,<rate>]

  Table 11 (masked objectives, nocaps val CIDEr after COCO fine-tuning)
    ic                       configs/cc12m.py itself (87.4 overall, 91.3 out)
    mlm,0.1 mlm,0.2 mlm,0.4 mlm,0.8      (0.2: 76.8 overall, 76.2 out; 0.8: 88.5)
    mass,0.1 mass,0.2 mass,0.4 mass,0.8
  Table 12 (auxiliary losses)
    ic+0.1*vlm               87.1 overall
    ic+0.1*moc               89.9 overall

Every row pre-trains on CC12M with the ic run's data, batch (4096) and
schedule (configs/paper_pretrain.py); only the objective differs. Then
fine-tune on COCO with configs/ablation_finetune.py (init_partial for mlm,
whose checkpoint has no decoder) and evaluate on nocaps val.

The moc row needs the region clusters first (docs/objectives.md):
  python -m cc12m_jax.data.clusters --data_dir=data/features --source=cc12m \
      --num_clusters=1024 --sample_regions=200000 --devices=0
The paper does not give its number of clusters; 1024 is our choice.
"""
import ml_collections

from configs import paper_pretrain

TABLE11 = ("ic", "mlm,0.1", "mlm,0.2", "mlm,0.4", "mlm,0.8",
           "mass,0.1", "mass,0.2", "mass,0.4", "mass,0.8")
TABLE12 = ("ic", "ic+0.1*vlm", "ic+0.1*moc")


def apply_row(config: ml_collections.ConfigDict, row: str) -> ml_collections.ConfigDict:
  """Sets the objective (and masking rate) of `row` ('<objective>[,<rate>]') on `config`."""
  objective, _, rate = row.partition(",")
  config.train.objective = objective
  if rate:
    config.objectives.text_mask_rate = float(rate)
  if objective in ("mlm", "mass", "moc"):
    # No evaluator before fine-tuning (the 'none' evaluator): nothing to select on.
    config.train.eval_every_steps = 0
    config.eval.selection_metric = ""
  return config


def get_config(row: str = "mlm,0.2") -> ml_collections.ConfigDict:
  return apply_row(paper_pretrain.get_config(train_sources="cc12m", train_weights="1.0"), row)
