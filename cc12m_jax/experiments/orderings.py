"""The paper's qualitative claims for a table, tested on this run's numbers.

A claim is a chain over table rows in one column ('scratch < cc3m_ft <
cc12m_ft <= cc3m_cc12m_ft') or a gain comparison (the gain of row `high`
over row `low` is larger in column `larger` than in column `smaller`). Each
link of a chain is one comparison; a gain claim is one comparison of a
difference of differences.

A comparison's difference d is taken so that the claim says d > 0 (or
d >= 0): `a < b` and `a <= b` give d = b - a, `a > b` and `a >= b` give
d = a - b, `a ~ b` gives d = b - a. With the paired bootstrap interval
[lo, hi] of d (cc12m_jax/experiments/bootstrap.py):

  <, >     holds when lo > 0 (the interval excludes 0 in the claimed direction)
  <=, >=   holds unless hi < 0 (the interval does not exclude 0 in the wrong
           direction: the data do not contradict the claim)
  ~        holds when lo <= 0 <= hi (no difference detectable at this size;
           not a proof of equality)
  gain     holds when lo > 0

A claim holds when all its comparisons hold. A comparison with a missing
cell is 'not evaluated'; one whose metric has no per-image scores (e.g.
BLEU-4) has no interval and is 'not tested'. The point figures are the mean
± standard deviation (ddof 1) over the seeds that have every cell.
"""
from __future__ import annotations

import dataclasses
import statistics
from typing import Any, Mapping

from cc12m_jax.experiments import bootstrap, scores
from cc12m_jax.experiments.suite import Claim, Suite, chain_of


@dataclasses.dataclass(frozen=True)
class Cell:
  value: float                       # in the paper's units (column.scale applied)
  output: scores.Output | None = None


Cells = Mapping[tuple[str, str], Mapping[int, Cell]]  # (row, column) -> seed -> Cell


def difference_terms(relation: str, left: str, right: str) -> tuple[list[tuple[float, str]], str]:
  """([(weight, row)], canonical relation '<' '<=' '~') for 'left relation right'."""
  if relation in (">", ">="):
    return [(1.0, left), (-1.0, right)], relation.replace(">", "<")
  return [(1.0, right), (-1.0, left)], relation


def holds(relation: str, low: float, high: float) -> bool:
  if relation == "<":
    return low > 0
  if relation == "<=":
    return high >= 0
  if relation == "~":
    return low <= 0 <= high
  raise ValueError(relation)


def _std(values: list[float]) -> float | None:
  return statistics.stdev(values) if len(values) > 1 else None


def _compare(suite: Suite, cells: Cells, terms: list[tuple[float, str, str]], relation: str,
             text: str) -> dict[str, Any]:
  """One comparison: terms (weight, row, column) of d, and how d must behave."""
  result: dict[str, Any] = {"comparison": text, "relation": relation,
                            "terms": [{"weight": w, "row": r, "column": c} for w, r, c in terms]}
  seed_sets = [set(cells.get((r, c), {})) for _, r, c in terms]
  seeds = sorted(set.intersection(*seed_sets))
  if not seeds:
    missing = sorted({f"{r}/{c}" for _, r, c in terms if not cells.get((r, c))})
    result.update(status="not evaluated", holds=None,
                  note=f"no seed has every cell (missing: {', '.join(missing) or 'a common seed'})")
    return result
  per_seed = [sum(w * cells[(r, c)][s].value for w, r, c in terms) for s in seeds]
  result.update(seeds=seeds, per_seed=per_seed, difference=statistics.fmean(per_seed),
                std=_std(per_seed))
  try:
    boot_terms, strata, ids_of = [], {}, {}
    for seed in seeds:
      for weight, row, column_key in terms:
        column = suite.column(column_key)
        output = cells[(row, column_key)][seed].output
        if output is None:
          raise scores.NoUnitScores(f"{row}/{column_key} has no evaluation output")
        ids, unit_strata = output.units
        if ids_of.setdefault(column.source, ids) != ids:
          raise ValueError(f"{text}: rows were scored on different images of {column.source}")
        strata[column.source] = unit_strata
        num, den = scores.unit_scores(output, column.metric)
        boot_terms.append(bootstrap.Term(weight * column.scale / len(seeds), column.source,
                                         num, den))
  except scores.NoUnitScores as e:
    result.update(status="not tested", holds=None, interval=None, note=str(e))
    return result
  interval = bootstrap.paired_interval(boot_terms, strata, samples=suite.bootstrap_samples,
                                       seed=suite.bootstrap_seed, confidence=suite.confidence)
  ok = holds(relation, interval.low, interval.high)
  result.update(interval=[interval.low, interval.high], holds=ok,
                status="holds" if ok else "does not hold")
  return result


def comparisons(suite: Suite, claim: Claim, cells: Cells) -> list[dict[str, Any]]:
  if claim.is_gain:
    terms = [(1.0, claim.high, claim.larger), (-1.0, claim.low, claim.larger),
             (-1.0, claim.high, claim.smaller), (1.0, claim.low, claim.smaller)]
    text = (f"({claim.high} - {claim.low})[{claim.larger}] > "
            f"({claim.high} - {claim.low})[{claim.smaller}]")
    return [_compare(suite, cells, terms, "<", text)]
  rows, relations = chain_of(claim.chain)
  out = []
  for left, relation, right in zip(rows, relations, rows[1:]):
    weighted, canonical = difference_terms(relation, left, right)
    out.append(_compare(suite, cells, [(w, r, claim.column) for w, r in weighted], canonical,
                        f"{left} {relation} {right} [{claim.column}]"))
  return out


def evaluate(suite: Suite, cells: Cells) -> list[dict[str, Any]]:
  """Every claim of the suite: its text, comparisons and whether it holds here."""
  results = []
  for claim in suite.claims:
    parts = comparisons(suite, claim, cells)
    statuses = {p["status"] for p in parts}
    if "not evaluated" in statuses:
      status, ok = "not evaluated", None
    elif "not tested" in statuses:
      status, ok = "not tested", None
    else:
      ok = all(p["holds"] for p in parts)
      status = "holds" if ok else "does not hold"
    results.append({"text": claim.text, "chain": claim.chain, "column": claim.column,
                    "status": status, "holds": ok, "comparisons": parts})
  return results
