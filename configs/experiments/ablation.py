"""Stages of the pre-training objective ablations (Tables 11 and 12, Appendix D.2).

A row pre-trains on CC12M with its objective (configs/ablation_pretrain.py
at paper size, configs/synthetic_ablation_pretrain.py at synthetic size),
then fine-tunes and evaluates exactly as the ic rows do (common.ic_finetune,
common.ic_evaluate). The ic row is Table 3's CC12M condition ('cc12m',
common.ic_pretrain): the same commands, so suites sharing a workdir run it
once.

mlm checkpoints have no decoder: their fine-tuning sets
config.train.init_partial (the decoder starts from the seeded init).
"""
import ml_collections

from configs.experiments import common

PRETRAIN_CONFIGS = {"synthetic": "configs/synthetic_ablation_pretrain.py",
                    "paper": "configs/ablation_pretrain.py"}


def row_key(row: str) -> str:
  """'mlm,0.2' -> 'mlm_20', 'ic+0.1*moc' -> 'ic_moc': condition and table row keys."""
  objective, _, rate = row.partition(",")
  if rate:
    return f"{objective}_{round(float(rate) * 100):02d}"
  return "_".join(term.split("*")[-1] for term in objective.split("+"))


def condition(size: str, row: str) -> dict[str, ml_collections.ConfigDict]:
  """The stages of one row: '<objective>_pretrain', ic_finetune, ic_evaluate; rows
  whose pre-training captions (ic, ic + an auxiliary loss) also ic_zero_shot, the
  pre-trained model evaluated as is: whether a concept lost after fine-tuning was
  ever learned."""
  if row == "ic":
    return {"ic_pretrain": common.ic_pretrain(size, "cc12m"), "ic_zero_shot": common.ic_as_is(size),
            "ic_finetune": common.ic_finetune(size), "ic_evaluate": common.ic_evaluate(size)}
  pretrain = f"{row.partition(',')[0] if ',' in row else row_key(row)}_pretrain"
  config = f"{PRETRAIN_CONFIGS[size]}:{row}"
  stages = {pretrain: common.stage(config, "pretrain")}
  if row.startswith("ic+"):
    stages["ic_zero_shot"] = common.ic_as_is(size, of=pretrain, config=config)
  finetune = common.ic_finetune(size, of=pretrain)
  if row.startswith("mlm"):
    finetune.overrides.train.init_partial = True
  stages.update(ic_finetune=finetune, ic_evaluate=common.ic_evaluate(size))
  return stages


def keys(row: str) -> tuple[str, str]:
  """(table row key, condition key) of a row: the ic row is Table 3's 'cc12m' condition."""
  return ("ic", "cc12m") if row == "ic" else (row_key(row), row_key(row))


def suite(name: str, title: str, size: str, rows, label) -> ml_collections.ConfigDict:
  """An ablation table: one condition per row of `rows` (steps chosen on coco_val,
  nocaps val reported by domain); `label(row)` is its table label. The caller adds claims."""
  c = common.suite(name, title, size, report_source="nocaps_val", selection_source="coco_val",
                   selection_metric="overall/CIDEr")
  for row in rows:
    key, condition_key = keys(row)
    c.conditions[condition_key] = condition(size, row)
    c.rows.append(common.row(key, label(row), condition_key, "ic_evaluate"))
  c.columns = nocaps_columns()
  return c


def nocaps_columns() -> list[ml_collections.ConfigDict]:
  """nocaps val CIDEr by domain, as Table 3."""
  return [common.column(key, key, "{report_source}", f"{group}/CIDEr", 100.0)
          for key, group in (("in", "in-domain"), ("near", "near-domain"),
                             ("out", "out-domain"), ("overall", "overall"))]
