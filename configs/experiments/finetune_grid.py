"""The COCO fine-tuning recipe, found as the paper found its own: a small grid
of learning rates and step budgets, each run's step chosen on coco_val, the
recipe chosen by its coco_val value at that step (printed under the table;
nocaps val beside it is for reading, never for choosing).

  python -m cc12m_jax.experiments --suite=configs/experiments/finetune_grid.py[:paper] --workdir=W

Run on CC12M pre-training; the standard rate's stages are the ones every other
suite uses (configs/synthetic_finetune.py: 3e-4; paper: coco_finetune.py's
3.2e-8 at 5K steps; its grid 3.2e-9 / 3.2e-8 / 3.2e-7), so on a shared workdir only the other rates run.

Step budgets (synthetic size): each rate fine-tunes once, to the longest
budget, and is evaluated once per budget with its step chosen among the kept
steps up to it (eval.selection_max_step). The schedule (warm-up, staircase
decay) does not depend on the run's length and the input order is fixed by
the seed, so the long run's first N steps are the N-step run. At paper size
the budget (5K against 10K) is Table 5's question.
"""
from typing import Callable, Sequence

import ml_collections

from configs import coco_finetune, synthetic_finetune
from configs.experiments import common

# The paper's grid at paper size (coco_finetune.LEARNING_RATES); the same
# factor of about 3 around the synthetic recipe's rate.
RATES = {"synthetic": (1e-4, 3e-4, 1e-3), "paper": coco_finetune.LEARNING_RATES}
STANDARD = {"synthetic": 3e-4, "paper": coco_finetune.LEARNING_RATE}
# Ascending; the last is the recipe's own (configs/synthetic_finetune.py).
BUDGETS = {"synthetic": (300, 600, synthetic_finetune.NUM_TRAIN_STEPS), "paper": ()}


def rate_name(rate: float) -> str:
  # A config key and a directory name: 1e-04, 3p2e-08.
  return f"{rate:.1e}".replace(".0e", "e").replace(".", "p")


def stage_suffix(rate: float, standard: float) -> str:
  """'' for the recipe's own rate (its stages are every other suite's), else _lr<rate>."""
  return "" if rate == standard else f"_lr{rate_name(rate)}"


def add_rates(c: ml_collections.ConfigDict, condition: str, prefix: str, rates: Sequence[float],
              standard: float,
              finetune: Callable[[], ml_collections.ConfigDict],
              evaluate: Callable[..., ml_collections.ConfigDict],
              budgets: Sequence[int] = ()) -> None:
  """One <prefix>_finetune / <prefix>_evaluate pair and one row per rate, on `condition`
  (whose pre-training the caller has added); only the rate differs between them.

  With `budgets` (ascending, the last the fine-tuning's own length), each rate
  also has a <prefix>_evaluate<suffix>_b<N> stage and row per shorter budget N,
  `evaluate(of, max_step=N)` choosing its step among those up to N.
  """
  for rate in rates:
    suffix = stage_suffix(rate, standard)
    stage = finetune()
    if suffix:
      stage.overrides["optim"] = {"learning_rate": rate}
    of = f"{prefix}_finetune{suffix}"
    c.conditions[condition][of] = stage
    for budget in budgets[:-1]:
      name = f"{prefix}_evaluate{suffix}_b{budget}"
      c.conditions[condition][name] = evaluate(of, max_step=budget)
      c.rows.append(common.row(f"lr{rate_name(rate)}_b{budget}",
                               f"lr {rate:.0e}, {budget} steps", condition, name))
    c.conditions[condition][f"{prefix}_evaluate{suffix}"] = evaluate(of)
    label = f"lr {rate:.0e}" + (f", {budgets[-1]} steps" if budgets else "")
    c.rows.append(common.row(f"lr{rate_name(rate)}", label, condition,
                             f"{prefix}_evaluate{suffix}"))


def get_config(size: str = "synthetic"):
  size = common.check_size(size)
  c = common.suite("finetune_grid", "Fine-tuning learning rate, CC12M pre-training", size,
                   report_source="nocaps_val", selection_source="coco_val",
                   selection_metric="overall/CIDEr")
  c.paper_table = ""  # the paper reports no grid results
  c.conditions.cc12m = {"ic_pretrain": common.ic_pretrain(size, "cc12m")}
  add_rates(c, "cc12m", "ic", RATES[size], STANDARD[size], lambda: common.ic_finetune(size),
            lambda of, max_step=0: common.ic_evaluate(size, of=of, max_step=max_step),
            BUDGETS[size])
  c.columns = [common.column(key, label, "{report_source}", f"{group}/CIDEr", 100.0)
               for key, label, group in (("in", "in", "in-domain"), ("out", "out", "out-domain"),
                                         ("overall", "overall", "overall"))]
  return c
