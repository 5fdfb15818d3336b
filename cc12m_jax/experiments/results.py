"""A suite's results: every cell's metrics over seeds, the paper's figures beside
them, and whether the paper's orderings hold (results.json, results.md).

Cells are read from the evaluate stages' files (cc12m_jax/experiments/scores.py),
so stages launched outside the runner (`--dry_run` commands run by a cluster
scheduler) are collected as well. A cell is a metric in the paper's units
(column.scale applied: CIDEr x 100; Recall@K is already in percent).
"""
from __future__ import annotations

import json
import os
import statistics
from typing import Any, Sequence

from etils import epath

from cc12m_jax.evaluation import modes
from cc12m_jax.experiments import commands, orderings, paper, scores
from cc12m_jax.experiments.suite import Suite

RESULTS_JSON, RESULTS_MD = "results.json", "results.md"


def read_cells(suite: Suite, workdir: str, seeds: Sequence[int]) -> orderings.Cells:
  """(row, column) -> seed -> Cell, for every cell whose evaluation exists."""
  cells: dict[tuple[str, str], dict[int, orderings.Cell]] = {}
  for row in suite.rows:
    for column in suite.columns:
      stage = suite.cell_stage(row, column)
      for seed in seeds:
        try:
          output = scores.read(commands.stage_dir(workdir, stage.key, seed), column.source)
        except FileNotFoundError:
          continue
        if column.metric not in output.metrics:
          raise KeyError(f"{output.path} has no metric {column.metric!r} for row {row.key!r}, "
                         f"column {column.key!r} (it has {sorted(output.metrics)})")
        cells.setdefault((row.key, column.key), {})[seed] = orderings.Cell(
            column.scale * output.metrics[column.metric], output)
  return cells


def _summary(values: list[float]) -> dict[str, Any]:
  if not values:
    return {"mean": None, "std": None, "n": 0}
  return {"mean": statistics.fmean(values),
          "std": statistics.stdev(values) if len(values) > 1 else None, "n": len(values)}


def read_selection(suite: Suite, workdir: str, seeds: Sequence[int], row) -> dict[str, Any] | None:
  """The step each seed's evaluate stage chose and its held-out value (in the
  paper's units when a column has the same metric), or None if it selects nothing."""
  stage = suite.stage(f"{row.condition}/{row.stage}")
  if not stage.select:
    return None
  metric = suite.selection_metric
  scale = next((c.scale for c in suite.columns if c.metric == metric), 1.0)
  by_seed = {}
  for seed in seeds:
    path = epath.Path(modes.selection_dir(commands.stage_dir(workdir, stage.key, seed))) / \
        "best.json"
    if path.exists():
      best = json.loads(path.read_text())
      by_seed[str(seed)] = {"step": best["best_step"], "value": scale * best["best_value"]}
  return {"source": suite.selection_source, "metric": metric, "seeds": by_seed,
          **_summary([v["value"] for _, v in sorted(by_seed.items())])}


def _relative(path: str, workdir: str) -> str:
  """`path` relative to `workdir` when it lies inside it, so that results.json
  still names the right files after the workdir is moved or kept in a repository."""
  root = commands.absolute(workdir).rstrip("/") + "/"
  return path[len(root):] if path.startswith(root) else path


def collect(suite: Suite, workdir: str, seeds: Sequence[int]) -> dict[str, Any]:
  """The results of `suite` in `workdir` for `seeds`, as written to results.json
  (evaluation files named relative to `workdir`)."""
  cells = read_cells(suite, workdir, seeds)
  rows = []
  for row in suite.rows:
    entry: dict[str, Any] = {"key": row.key, "label": row.label, "condition": row.condition,
                             "stage": row.stage, "paper_row": row.paper_row, "cells": {}}
    for column in suite.columns:
      by_seed = cells.get((row.key, column.key), {})
      entry["cells"][column.key] = {
          "paper": (paper.figure(suite.paper_table, row.paper_row, column.key)
                    if suite.paper_table else None),
          "seeds": {str(s): c.value for s, c in sorted(by_seed.items())},
          "files": {str(s): _relative(c.output.path, workdir)
                    for s, c in sorted(by_seed.items())},
          "steps": {str(s): c.output.step for s, c in sorted(by_seed.items())},
          **_summary([c.value for _, c in sorted(by_seed.items())])}
    entry["selection"] = read_selection(suite, workdir, seeds, row)
    rows.append(entry)
  # Seeds run apart are pooled from whatever evaluation files are there, so a
  # seed asked for but never run must be named, not silently averaged away.
  found = sorted({s for by_seed in cells.values() for s in by_seed})
  return {
      "suite": suite.name, "title": suite.title, "size": suite.size,
      "paper_table": suite.paper_table, "seeds": found,
      "seeds_without_files": sorted(set(seeds) - set(found)),
      "selection_source": suite.selection_source, "selection_metric": suite.selection_metric,
      "report_source": suite.report_source,
      "bootstrap": {"samples": suite.bootstrap_samples, "seed": suite.bootstrap_seed,
                    "confidence": suite.confidence, "resampling": "images, within each domain",
                    "seeds": "pooled: one draw for every seed; interval of the seed mean"},
      "columns": [{"key": c.key, "label": c.label, "source": c.source, "metric": c.metric,
                   "scale": c.scale, "stage": c.stage} for c in suite.columns],
      "rows": rows,
      "orderings": orderings.evaluate(suite, cells),
  }


def _number(mean: float | None, std: float | None) -> str:
  if mean is None:
    return "—"
  return f"{mean:.1f}" if std is None else f"{mean:.1f} ± {std:.1f}"


def _comparison_line(c: dict[str, Any], confidence: float) -> str:
  head = f"   - `{c['comparison']}`: "
  if c["status"] == "not evaluated":
    return head + f"not evaluated ({c['note']})"
  point = f"{c['difference']:+.2f}" + (f" ± {c['std']:.2f}" if c["std"] is not None else "")
  if c["status"] == "not tested":
    return head + f"{point}; not tested ({c['note']})"
  low, high = c["interval"]
  return head + (f"{point}, {100 * confidence:g}% interval [{low:+.2f}, {high:+.2f}]: "
                 f"{c['status']}")


def markdown(results: dict[str, Any]) -> str:
  """results.md: the table (ours beside the paper's) and the orderings section."""
  b = results["bootstrap"]
  seeds = ", ".join(str(s) for s in results["seeds"]) or "none"
  absent = results.get("seeds_without_files") or []
  if absent:
    seeds += f" (no evaluation files for seed{'s' if len(absent) > 1 else ''} " \
             f"{', '.join(str(s) for s in absent)})"
  lines = [f"# {results['title']}", "",
           f"{results['size']} size; seeds {seeds} (mean ± std over seeds when there are "
           "several). Paper figures from the paper notes ('—': the paper gives none). "
           "Orderings, not magnitudes, are what a miniature run can reproduce.", ""]
  if results["selection_source"]:
    lines.append(f"Fine-tuning steps selected on `{results['selection_source']}` "
                 f"({results['selection_metric']}); reported: `{results['report_source']}`.")
  else:
    lines.append(f"No step selection on a held-out split; reported: `{results['report_source']}`.")
  lines.append("")
  header = ["row"]
  for c in results["columns"]:
    header += [c["label"], f"{c['label']} (paper)"]
  lines += ["| " + " | ".join(header) + " |", "|---" + "|---:" * (len(header) - 1) + "|"]
  for row in results["rows"]:
    cells = [row["label"]]
    for c in results["columns"]:
      cell = row["cells"][c["key"]]
      cells += [_number(cell["mean"], cell["std"]),
                "—" if cell["paper"] is None else f"{cell['paper']:.1f}"]
    lines.append("| " + " | ".join(cells) + " |")
  selected = [r for r in results["rows"] if r.get("selection") and r["selection"]["seeds"]]
  if selected:
    lines += ["", f"Steps chosen on `{results['selection_source']}` "
              f"({results['selection_metric']}, its value at the chosen step):", ""]
    for row in selected:
      sel = row["selection"]
      steps = ", ".join(f"{v['step']} (seed {s})" for s, v in sel["seeds"].items())
      lines.append(f"* {row['label']}: step {steps}; {_number(sel['mean'], sel['std'])}")
  lines += ["", "## Orderings", "",
            f"Paired bootstrap over images: B={b['samples']}, numpy seed {b['seed']}, "
            f"{100 * b['confidence']:g}% percentile interval of the difference; images are "
            "resampled within each domain, one draw for every condition and seed; the "
            "interval is for the mean over seeds, ± is the std over seeds. `<` holds when the "
            "interval lies above 0, `<=` unless it lies below 0, `~` when it contains 0 "
            "(docs/experiments.md).", ""]
  for i, claim in enumerate(results["orderings"], 1):
    lines.append(f"{i}. {claim['text']}: **{claim['status']}**")
    lines += [_comparison_line(c, b["confidence"]) for c in claim["comparisons"]]
  return "\n".join(lines) + "\n"


def _write(path: epath.Path, text: str) -> None:
  tmp = path.parent / (path.name + ".tmp")
  tmp.write_text(text)
  tmp.replace(path)


def write(results: dict[str, Any], directory: str) -> dict[str, str]:
  """results.json and results.md in `directory`; {name: path}."""
  out = epath.Path(directory)
  out.mkdir(parents=True, exist_ok=True)
  _write(out / RESULTS_JSON, json.dumps(results, indent=1) + "\n")
  _write(out / RESULTS_MD, markdown(results))
  return {"json": str(out / RESULTS_JSON), "markdown": str(out / RESULTS_MD)}


def results_dir(workdir: str, suite: Suite) -> str:
  return os.path.join(commands.absolute(workdir), suite.name)
