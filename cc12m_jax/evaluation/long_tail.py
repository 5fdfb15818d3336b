r"""The per-concept long-tail report: does a model name what an image shows, by concept frequency?

For every evaluation image and every concept it shows, a condition's
prediction either names the concept (evaluation/concepts.py) or not. Grouping
those (image, concept) pairs by how often the concept occurs in a
pre-training source (the curation statistics job's per-class instance
counts, cc12m_jax/curation/stats.py) gives naming recall per frequency
bucket: the paper's long-tail claim, concept by concept.

  python -m cc12m_jax.evaluation.long_tail \
      --condition=cc3m=W/cc3m/evaluate/eval/nocaps_val/step_300/predictions.json \
      --condition=cc12m=W/cc12m/.../predictions.json \
      --image_concepts=data/synthetic/nocaps_val/concepts.json \
      --concepts=synthetic:600:0 --stats=stats/stats.json --bucket_source=cc12m \
      --compare=cc3m,cc12m --output_dir=W/long_tail

Which concepts an image shows: the synthetic world writes them
(`<source>/concepts.json`); for real data, `--references` (a COCO/nocaps
JSON) and the concepts its captions name (`--min_mentions`). A condition
may also be the naming probe's ranks (`--ranks=name=W/eval/<source>/step_<n>/ranks.json`,
evaluation/naming_probe.py): a pair is named when the probe ranks the
concept's name first, whatever the decoded caption says. Writes
long_tail.json, long_tail.md and long_tail.png (one recall curve per
condition).

The same report for retrieval (`per_concept_retrieval`): of the caption
queries whose image shows a concept, the share that rank that image first
(R@1 per concept), so a retrieval table can be read concept by concept too.
"""
from __future__ import annotations

import dataclasses
import io
import json
import os
from typing import Mapping, Sequence

from absl import app, flags
from matplotlib.figure import Figure
import numpy as np

from cc12m_jax.data.synthetic import concepts as synthetic_concepts
from cc12m_jax.evaluation import concepts as concepts_lib, nocaps, report as report_lib

# Bucket lower edges of a concept's instance count in the bucket source:
# 0, 1-9, 10-99, 100-999, 1000+ (decades, for real data's counts; a small
# world whose counts span one decade passes finer edges).
BUCKET_EDGES = (0, 1, 10, 100, 1000)

# What a report measures per (image, concept) pair: a captioning row's
# prediction names the concept; a retrieval row's caption query of an image
# showing the concept ranks that image first (pairs are then queries).
NAMING, RETRIEVAL = "naming", "retrieval"
MEASURES = {
    NAMING: {"title": "Naming recall", "pairs": "pairs", "shown": "images",
             "question": "Long-tail concepts: does the caption name them?"},
    RETRIEVAL: {"title": "R@1 of caption queries", "pairs": "queries", "shown": "queries",
                "question": "Long-tail concepts: is the image showing them retrieved first?"},
}


def check_edges(edges: Sequence[int]) -> tuple[int, ...]:
  edges = tuple(int(e) for e in edges)
  if not edges or edges[0] != 0 or any(b <= a for a, b in zip(edges, edges[1:])):
    raise ValueError(f"bucket edges {list(edges)}: increasing integers starting at 0")
  return edges


def bucket_label(index: int, edges: Sequence[int] = BUCKET_EDGES) -> str:
  lo = edges[index]
  if index + 1 == len(edges):
    return f"{lo}+"
  hi = edges[index + 1] - 1
  return str(lo) if lo == hi else f"{lo}-{hi}"


def bucket_of(count: int, edges: Sequence[int] = BUCKET_EDGES) -> int:
  return int(np.searchsorted(edges, count, side="right") - 1)


@dataclasses.dataclass
class ConceptRecall:
  named: int = 0    # pairs whose prediction names the concept (retrieval: ranks the image first)
  shown: int = 0    # (image, concept) pairs (retrieval: (caption query, concept) pairs)

  @property
  def recall(self) -> float:
    return self.named / self.shown if self.shown else float("nan")


def per_concept_recall(predictions: Mapping[str, str], image_concepts: Mapping[str, set[str]],
                       matcher: concepts_lib.ConceptMatcher) -> dict[str, ConceptRecall]:
  """{concept: how often a prediction names it among the images that show it}.

  Every image of `image_concepts` must have a prediction: a missing one is an
  error naming the image, not a silent miss.
  """
  missing = [i for i in image_concepts if i not in predictions]
  if missing:
    raise KeyError(f"{len(missing)} image(s) have no prediction, e.g. {missing[:3]}")
  out: dict[str, ConceptRecall] = {}
  for image_id, shown in image_concepts.items():
    named = matcher.mentions(predictions[image_id])
    for concept in shown:
      row = out.setdefault(concept, ConceptRecall())
      row.shown += 1
      row.named += concept in named
  return out


def per_concept_retrieval(per_query: Mapping[str, Sequence],
                          image_concepts: Mapping[str, set[str]],
                          k: int = 1) -> dict[str, ConceptRecall]:
  """{concept: of the caption queries whose image shows it, how many rank
  that image in their top k}: the retrieval form of naming recall.

  `per_query`: {'image_id': [Q], 'rank': [Q]} (the retrieval evaluator's
  `per_query`: 0-based rank of each query's own image, -1 past its top 10).
  Every image of `image_concepts` must have a query: a missing one is an
  error naming the image.
  """
  queried = set(per_query["image_id"])
  missing = [i for i in image_concepts if i not in queried]
  if missing:
    raise KeyError(f"{len(missing)} image(s) have no retrieval query, e.g. {missing[:3]}")
  out: dict[str, ConceptRecall] = {}
  for image_id, rank in zip(per_query["image_id"], per_query["rank"]):
    for concept in image_concepts.get(image_id, ()):
      row = out.setdefault(concept, ConceptRecall())
      row.shown += 1
      row.named += 0 <= int(rank) < k
  return out


def per_concept_rank_recall(ranks: Mapping[str, Mapping[str, int]],
                            image_concepts: Mapping[str, set[str]],
                            k: int = 1) -> dict[str, ConceptRecall]:
  """{concept: of the images that show it, how many rank its name in the top k}: the
  naming probe's form of naming recall (`ranks`: its ranks.json, {image_id: {concept: rank}}).

  Every (image, concept) pair of `image_concepts` must have a rank: a missing
  one is an error naming the pair.
  """
  out: dict[str, ConceptRecall] = {}
  for image_id, shown in image_concepts.items():
    for concept in shown:
      rank = ranks.get(image_id, {}).get(concept)
      if rank is None:
        raise KeyError(f"image {image_id!r}, concept {concept!r}: no rank in the probe's ranks")
      row = out.setdefault(concept, ConceptRecall())
      row.shown += 1
      row.named += int(rank) <= k
  return out


def bucket_recall(recalls: Mapping[str, ConceptRecall], counts: Mapping[str, int],
                  edges: Sequence[int] = BUCKET_EDGES) -> list[dict[str, float | int | str]]:
  """Naming recall of (image, concept) pairs per frequency bucket of the concept."""
  rows = [{"bucket": bucket_label(b, edges), "concepts": 0, "pairs": 0, "named": 0}
          for b in range(len(edges))]
  for concept, r in recalls.items():
    row = rows[bucket_of(int(counts.get(concept, 0)), edges)]
    row["concepts"] += 1
    row["pairs"] += r.shown
    row["named"] += r.named
  for row in rows:
    row["recall"] = row["named"] / row["pairs"] if row["pairs"] else float("nan")
  return rows


def gained_and_lost(before: Mapping[str, ConceptRecall], after: Mapping[str, ConceptRecall],
                    top: int = 10) -> dict[str, list[dict[str, float | int | str]]]:
  """The concepts whose recall rose (fell) most from `before` to `after`; ties by name."""
  rows = []
  for concept in sorted(set(before) & set(after)):
    delta = after[concept].recall - before[concept].recall
    rows.append({"concept": concept, "shown": after[concept].shown,
                 "before": before[concept].recall, "after": after[concept].recall,
                 "delta": delta})
  rows.sort(key=lambda r: (-r["delta"], r["concept"]))
  gained = [r for r in rows if r["delta"] > 0][:top]
  lost = sorted((r for r in rows if r["delta"] < 0), key=lambda r: (r["delta"], r["concept"]))[:top]
  return {"gained": gained, "lost": lost}


def pooled(recalls: Sequence[Mapping[str, ConceptRecall]]) -> dict[str, ConceptRecall]:
  """Several runs of one condition (seeds) as one: their pairs summed per concept."""
  out: dict[str, ConceptRecall] = {}
  for run in recalls:
    for concept, r in run.items():
      row = out.setdefault(concept, ConceptRecall())
      row.named += r.named
      row.shown += r.shown
  return out


def long_tail_report(conditions: Mapping[str, Mapping[str, str]],
                     image_concepts: Mapping[str, set[str]],
                     matcher: concepts_lib.ConceptMatcher,
                     source_counts: Mapping[str, Mapping[str, int]], bucket_source: str,
                     compare: Sequence[tuple[str, str]] = ()) -> dict:
  """The report as a dict (see the module docstring); `conditions`: {name: predictions}."""
  recalls = {name: per_concept_recall(preds, image_concepts, matcher)
             for name, preds in conditions.items()}
  return report_from_recalls(recalls, image_concepts, source_counts, bucket_source, compare)


def report_from_recalls(recalls: Mapping[str, Mapping[str, ConceptRecall]],
                        image_concepts: Mapping[str, set[str]],
                        source_counts: Mapping[str, Mapping[str, int]], bucket_source: str,
                        compare: Sequence[tuple[str, str]] = (),
                        edges: Sequence[int] = BUCKET_EDGES, measure: str = NAMING) -> dict:
  """The report from each condition's per-concept recall; `source_counts`: {source: {concept: n}};
  `measure`: what a pair's success is (NAMING or RETRIEVAL)."""
  edges = check_edges(edges)
  if bucket_source not in source_counts:
    raise KeyError(f"bucket source {bucket_source!r} not in the statistics "
                   f"(have {sorted(source_counts)})")
  counts = source_counts[bucket_source]
  concepts = sorted({c for shown in image_concepts.values() for c in shown})
  report = {
      "measure": measure,
      "bucket_source": bucket_source,
      "bucket_edges": list(edges),
      "buckets": [bucket_label(b, edges) for b in range(len(edges))],
      "by_bucket": {name: bucket_recall(r, counts, edges) for name, r in recalls.items()},
      "concepts": {c: {"counts": {s: int(sc.get(c, 0)) for s, sc in source_counts.items()},
                       "recall": {name: r[c].recall for name, r in recalls.items() if c in r},
                       "shown": max((r[c].shown for r in recalls.values() if c in r), default=0)}
                   for c in concepts},
      "comparisons": {},
  }
  for before, after in compare:
    for name in (before, after):
      if name not in recalls:
        raise KeyError(f"compare: no condition {name!r} (have {sorted(recalls)})")
    report["comparisons"][f"{before}->{after}"] = gained_and_lost(recalls[before],
                                                                 recalls[after])
  return report


def markdown(report: Mapping) -> str:
  names = list(report["by_bucket"])
  measure = MEASURES[report.get("measure", NAMING)]
  lines = [f"{measure['title']} (%) by the concept's instance count in {report['bucket_source']}",
           "", "| bucket | " + " | ".join(names) + f" | {measure['pairs']} |",
           "|---|" + "---|" * (len(names) + 1)]
  for b, label in enumerate(report["buckets"]):
    cells = [report["by_bucket"][n][b]["recall"] for n in names]
    pairs = report["by_bucket"][names[0]][b]["pairs"] if names else 0
    lines.append(f"| {label} | " + " | ".join(
        "-" if np.isnan(c) else f"{100 * c:.1f}" for c in cells) + f" | {pairs} |")
  for key, comparison in report["comparisons"].items():
    for direction in ("gained", "lost"):
      lines += ["", f"Concepts most {direction}, {key}:", "",
                f"| concept | {measure['shown']} | before | after |", "|---|---|---|---|"]
      lines += [f"| {r['concept']} | {r['shown']} | {100 * r['before']:.0f} | "
                f"{100 * r['after']:.0f} |" for r in comparison[direction]]
  return "\n".join(lines) + "\n"


def png(report: Mapping) -> bytes:
  measure = MEASURES[report.get("measure", NAMING)]
  fig = Figure(figsize=(6, 4))
  ax = fig.subplots()
  # Buckets no evaluation pair falls in have no recall to draw.
  shown = [b for b in range(len(report["buckets"]))
           if any(rows[b]["pairs"] for rows in report["by_bucket"].values())]
  x = np.arange(len(shown))
  for name, rows in report["by_bucket"].items():
    ax.plot(x, [100 * rows[b]["recall"] for b in shown], marker="o", label=name)
  ax.set_xticks(x, [report["buckets"][b] for b in shown], rotation=30, ha="right")
  ax.set_xlabel(f"concept instances in {report['bucket_source']}")
  ax.set_ylabel(f"{measure['title'].lower()} (%)")
  ax.set_title(measure["question"])
  ax.grid(True, alpha=0.3)
  ax.legend()
  fig.tight_layout()
  out = io.BytesIO()
  fig.savefig(out, format="png", dpi=120)
  return out.getvalue()


def write(report: Mapping, output_dir: str) -> dict[str, str]:
  os.makedirs(output_dir, exist_ok=True)
  paths = {"json": os.path.join(output_dir, "long_tail.json"),
           "markdown": os.path.join(output_dir, "long_tail.md"),
           "png": os.path.join(output_dir, "long_tail.png")}
  with open(paths["json"], "w") as f:
    json.dump(report, f, indent=1, sort_keys=True)
  with open(paths["markdown"], "w") as f:
    f.write(markdown(report))
  with open(paths["png"], "wb") as f:
    f.write(png(report))
  return paths


def load_concepts(spec: str) -> list[concepts_lib.Concept]:
  """'synthetic:<num_concepts>:<seed>' (the world's inventory) or a concept list file."""
  if spec.startswith("synthetic:"):
    _, num, seed = spec.split(":")
    return [concepts_lib.Concept(c.name)
            for c in synthetic_concepts.build_inventory(int(num), int(seed))]
  return concepts_lib.load_concept_list(spec)


def load_image_concepts(path: str) -> dict[str, set[str]]:
  with open(path) as f:
    data = json.load(f)
  return {str(k): set(v) for k, v in data.items()}


def load_source_counts(stats_path: str) -> dict[str, dict[str, int]]:
  """{dataset: {class: instances}} from the statistics job's stats.json."""
  with open(stats_path) as f:
    datasets = json.load(f)["datasets"]
  return {name: dict(s["classes"]["instances"]) for name, s in datasets.items()}


def _define_flags() -> None:
  flags.DEFINE_multi_string("condition", [], "name=predictions.json, one per model.")
  flags.DEFINE_multi_string("ranks", [], "name=ranks.json of the naming probe "
                            "(evaluation/naming_probe.py): named = rank 1.")
  flags.DEFINE_string("image_concepts", "", "{image_id: [concepts]} JSON.")
  flags.DEFINE_string("references", "", "COCO/nocaps JSON: the concepts its captions name.")
  flags.DEFINE_integer("min_mentions", 1, "With --references: captions that must name it.")
  flags.DEFINE_string("concepts", None, "Concept list file or synthetic:N:SEED.")
  flags.DEFINE_string("stats", None, "stats.json of cc12m_jax.curation.stats.")
  flags.DEFINE_string("bucket_source", "cc12m", "Dataset whose counts define the buckets.")
  flags.DEFINE_multi_string("compare", [], "before,after condition names.")
  flags.DEFINE_string("output_dir", None, "Where the report goes.")
  flags.mark_flags_as_required(["concepts", "stats", "output_dir"])


def main(argv: Sequence[str]) -> None:
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  f = flags.FLAGS
  matcher = concepts_lib.ConceptMatcher(load_concepts(f.concepts))
  if bool(f.image_concepts) == bool(f.references):
    raise app.UsageError("give exactly one of --image_concepts and --references")
  if f.image_concepts:
    image_concepts = load_image_concepts(f.image_concepts)
  else:
    image_concepts = concepts_lib.image_concepts_from_references(
        nocaps.load_references(f.references).captions, matcher, f.min_mentions)
  recalls = {}
  for flag, items in (("condition", f.condition), ("ranks", f.ranks)):
    for item in items:
      name, sep, path = item.partition("=")
      if not sep:
        raise app.UsageError(f"--{flag}={item!r}: expected name=<file>")
      if name in recalls:
        raise app.UsageError(f"--{flag}={item!r}: a second condition named {name!r}")
      if flag == "condition":
        recalls[name] = per_concept_recall(report_lib.read_predictions(path), image_concepts,
                                           matcher)
      else:
        with open(path) as fp:
          recalls[name] = per_concept_rank_recall(json.load(fp), image_concepts)
  compare = [tuple(c.split(",")) for c in f.compare]
  report = report_from_recalls(recalls, image_concepts, load_source_counts(f.stats),
                               f.bucket_source, compare)
  paths = write(report, f.output_dir)
  print(markdown(report))
  print("Wrote " + ", ".join(paths.values()))


if __name__ == "__main__":
  _define_flags()
  app.run(main)
