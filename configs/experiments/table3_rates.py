"""Table 3's fine-tuned rows at each learning rate of the fine-tuning grid:
does the out-of-domain order hold whichever rate the held-out split picks?

  python -m cc12m_jax.experiments --suite=configs/experiments/table3_rates.py[:paper] --workdir=W

The grid (finetune_grid.py) could not tell its rates apart on coco_val, yet
they move nocaps out of domain far apart, so the recipe's rate is one choice
among equals and Table 3's orderings are checked at the others too. Each
pre-training is fine-tuned at every rate, the step chosen on coco_val as in
Table 3. The recipe's rate is Table 3's own stages, CC12M's other rates the
grid's, and the from-scratch row Table 3's: on a shared workdir only CC3M's
and CC3M+CC12M's other rates run.
"""
from configs.experiments import common, finetune_grid, table3


def _key(name: str, rate: float) -> str:
  return f"{name}_ft_lr{finetune_grid.rate_name(rate)}"


def get_config(size: str = "synthetic"):
  size = common.check_size(size)
  c = common.suite("table3_rates", "Table 3's fine-tuned rows at each fine-tuning rate", size,
                   report_source="nocaps_val", selection_source="coco_val",
                   selection_metric="overall/CIDEr", paper_table="table3")
  rates = finetune_grid.RATES[size]
  standard = finetune_grid.STANDARD[size]
  c.conditions.scratch = {"ic_train": common.ic_train(size),
                          "ic_evaluate": common.ic_evaluate(size, of="ic_train")}
  c.rows = [common.row("scratch", "From scratch (COCO only)", "scratch", "ic_evaluate")]
  for name, sources in table3.PRETRAINING.items():
    c.conditions[name] = {"ic_pretrain": common.ic_pretrain(size, sources)}
    for rate in rates:
      suffix = finetune_grid.stage_suffix(rate, standard)
      finetune = common.ic_finetune(size)
      if suffix:
        finetune.overrides["optim"] = {"learning_rate": rate}
      c.conditions[name][f"ic_finetune{suffix}"] = finetune
      c.conditions[name][f"ic_evaluate{suffix}"] = common.ic_evaluate(
          size, of=f"ic_finetune{suffix}")
      # The paper's Table 3 figures sit beside every rate's row.
      label = f"{table3.LABELS[name]} fine-tuned, lr {rate:.0e}"
      c.rows.append(common.row(_key(name, rate), label, name, f"ic_evaluate{suffix}",
                               paper_row=f"{name}_ft"))
  c.columns = table3.domain_columns()
  for rate in rates:
    cc3m, cc12m, both = (_key(n, rate) for n in table3.PRETRAINING)
    c.claims += [
        common.chain(f"lr {rate:.0e}: fine-tuned, out-of-domain CIDEr: scratch < CC3M < CC12M "
                     "<= CC3M+CC12M", "out", f"scratch < {cc3m} < {cc12m} <= {both}"),
        common.gain(f"lr {rate:.0e}: CC12M's gain over CC3M is larger out-of-domain than "
                    "in-domain (+26.0 against +6.5)", cc3m, cc12m, "out", "in"),
    ]
  return c
