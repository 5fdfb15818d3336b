"""A suite's per-concept long-tail report (cc12m_jax/evaluation/long_tail.py).

After the results table, the runner asks, for each row of each report of
`suite.long_tail`: of the (image, concept) pairs of the report's split (the
suite's report source, or its column's), how often does the row's caption
name the concept, by how often the concept occurs in a
pre-training source? For retrieval rows (an evaluation that wrote
retrieval.json), of the caption queries whose image shows the concept, how
often is that image ranked first? That is the paper's long-tail claim concept by concept,
and where a condition loses a concept (never learned in pre-training, erased
by fine-tuning, never decoded) shows as a bucket, not as one CIDEr figure.
Decoded captions cannot tell "never learned" from "never decoded"; the naming
probe (evaluation/naming_probe.py) can, on any checkpoint: a suite's
`long_tail.probes` are naming-probe evaluate stages, reported beside the rows
with a pair named when the probe ranks its concept first.

  * Which concepts an image shows: `<data_dir>/<the report's source>/concepts.json`,
    which the synthetic world writes. Real data has no such file; the report
    is then skipped (say so), and `python -m cc12m_jax.evaluation.long_tail
    --references=...` matches concept mentions in the references instead.
  * Each concept's count per training source: the curation statistics job
    (cc12m_jax/curation/stats.py) over the record shards of every source the
    suite's training stages read, with the shown concepts as its classes.
  * Seeds are pooled: a row's recall is over the pairs of all its seeds.

Writes `<results dir>/<report.name>/` (long_tail.json, .md, .png; the
name is `long_tail`, or `long_tail_<column>` for a report read at a column)
and the statistics job's output under its `stats/`.
"""
from __future__ import annotations

import json
import os
from typing import Mapping, Sequence

import ml_collections
from etils import epath

from cc12m_jax.curation import stats as stats_lib
from cc12m_jax.data import metadata
from cc12m_jax.evaluation import concepts as concepts_lib
from cc12m_jax.evaluation import long_tail
from cc12m_jax.evaluation import report as report_lib
from cc12m_jax.experiments import commands, scores
from cc12m_jax.experiments.suite import LongTail, Suite, SuiteError

CONCEPTS_FILE = "concepts.json"
PREDICTIONS_FILE = "predictions.json"
# One process: the job counts a few thousand captions.
_STATS_PIPELINE_ARGS = ("--direct_running_mode=in_memory",)


def image_concepts_path(suite: Suite, report: LongTail, data_dir: str) -> epath.Path:
  return epath.Path(data_dir) / suite.long_tail_source(report) / CONCEPTS_FILE


def why_not(suite: Suite, report: LongTail, data_dir: str) -> str:
  """'' when the report can be made; otherwise the reason it is skipped."""
  if not report.rows and not report.probes:
    return "the report names no long_tail rows or probes"
  path = image_concepts_path(suite, report, data_dir)
  if not path.exists():
    return (f"{path} does not exist (only the synthetic world "
            "knows what each image shows; for real data run cc12m_jax.evaluation.long_tail "
            "with --references)")
  return ""


def training_sources(configs: Mapping[str, ml_collections.ConfigDict]) -> list[str]:
  """Every source a training stage of the suite reads, in first-seen order."""
  seen: list[str] = []
  for config in configs.values():
    if config.mode in ("pretrain", "finetune"):
      for source in config.data.train_sources.split(","):
        if source.strip() and source.strip() not in seen:
          seen.append(source.strip())
  return seen


def source_counts(data_dir: str, sources: Sequence[str], concepts: Sequence[str],
                  output_dir: str) -> dict[str, dict[str, int]]:
  """{source: {concept: instances in its captions}} from the statistics job."""
  datasets = {s: os.path.join(data_dir, s, f"{metadata.SHARD_PREFIX}-*") for s in sources}
  results = stats_lib.compare(datasets, list(concepts), [], output_dir,
                              list(_STATS_PIPELINE_ARGS))
  return {name: dict(r["classes"]["instances"]) for name, r in results.items()}


def _run_recall(directory: epath.Path, image_concepts: Mapping[str, set[str]],
                matcher: concepts_lib.ConceptMatcher
                ) -> tuple[str, dict[str, long_tail.ConceptRecall]]:
  """(measure, per-concept recall) of one evaluation's output directory."""
  if (directory / scores.RANKS_FILE).exists():
    # The naming probe: named when ranked first among the inventory's names.
    ranks = json.loads((directory / scores.RANKS_FILE).read_text())
    return long_tail.NAMING, long_tail.per_concept_rank_recall(ranks, image_concepts)
  if (directory / scores.RETRIEVAL_FILE).exists():
    per_query = json.loads((directory / scores.RETRIEVAL_FILE).read_text())["per_query"]
    return long_tail.RETRIEVAL, long_tail.per_concept_retrieval(
        per_query["image_retrieval"], image_concepts)
  predictions = report_lib.read_predictions(str(directory / PREDICTIONS_FILE))
  return long_tail.NAMING, long_tail.per_concept_recall(predictions, image_concepts, matcher)


def row_recalls(suite: Suite, report: LongTail, workdir: str, seeds: Sequence[int],
                image_concepts: Mapping[str, set[str]], matcher: concepts_lib.ConceptMatcher
                ) -> tuple[str, dict[str, dict[str, long_tail.ConceptRecall]],
                           dict[str, list[int]]]:
  """(measure, {row or probe key: per-concept recall pooled over the seeds
  whose evaluation exists}, {key: those seeds}); rows that caption and rows
  that retrieve do not mix."""
  out, measures, pooled_seeds = {}, {}, {}
  source = suite.long_tail_source(report)
  for key in report.rows + tuple(p.key for p in report.probes):
    stage = suite.long_tail_stage(report, key)
    runs = []
    for seed in seeds:
      try:
        _, directory = scores.find(commands.stage_dir(workdir, stage.key, seed), source)
      except FileNotFoundError:
        continue
      measures[key], recall = _run_recall(directory, image_concepts, matcher)
      runs.append(recall)
      pooled_seeds.setdefault(key, []).append(seed)
    if runs:
      out[key] = long_tail.pooled(runs)
  if len(set(measures.values())) > 1:
    raise SuiteError(f"long_tail: rows {sorted(measures)} mix captioning and retrieval "
                     f"evaluations ({measures}); one report measures one of them")
  return next(iter(measures.values()), long_tail.NAMING), out, pooled_seeds


def make(suite: Suite, report: LongTail, workdir: str, seeds: Sequence[int], data_dir: str,
         configs: Mapping[str, ml_collections.ConfigDict], output_dir: str) -> dict | None:
  """Writes `report` under output_dir and returns it; None when no row has results."""
  image_concepts = long_tail.load_image_concepts(
      str(image_concepts_path(suite, report, data_dir)))
  names = sorted({c for shown in image_concepts.values() for c in shown})
  matcher = concepts_lib.ConceptMatcher([concepts_lib.Concept(n) for n in names])
  measure, recalls, pooled_seeds = row_recalls(suite, report, workdir, seeds, image_concepts,
                                               matcher)
  if not recalls:
    return None
  counts = source_counts(data_dir, training_sources(configs), names,
                         os.path.join(output_dir, "stats"))
  compare = [pair for pair in report.compare if set(pair) <= set(recalls)]
  out = long_tail.report_from_recalls(
      recalls, image_concepts, counts, report.bucket_source, compare,
      report.bucket_edges or long_tail.BUCKET_EDGES, measure)
  # Seeds run apart are pooled from the files that are there: say which.
  out["seeds"] = sorted({s for found in pooled_seeds.values() for s in found})
  out["seeds_by_row"] = pooled_seeds
  out["seeds_without_files"] = sorted(set(seeds) - set(out["seeds"]))
  long_tail.write(out, output_dir)
  return out
