r"""Dataset statistics, side by side (paper Section 2.3 and Appendix B.1): a Beam job.

Per dataset: pairs, tokens, types, token/type ratio, mean and median caption
length (tokens), top tokens (all, and content words only), counts of chosen
long-tail words, share of captions with `<PERSON>`, and coverage of a class list
(e.g. nocaps' out-of-domain classes): the median number of instances per class,
the same per 1M captions, and the curve "number of classes with at least K
instances per 1M captions" over K, drawn like the paper's Figure 5.

Captions are tokenized with words.caption_tokens; a class instance is an
occurrence of the class's tokens in sequence, matching simple morphological
variants (words.stem: 'mangosteens' counts for 'mangosteen').

Every count is a Beam combiner (caption_stats.CaptionStats), so the job runs
on the runner that curated the data:

python -m cc12m_jax.curation.stats --dataset=cc3m='out/cc3m/kept-*.jsonl' \
    --dataset=cc12m='out/cc12m/kept-*.jsonl' --classes=classes.txt \
    --long_tail_words=sumo,mangosteen,pokemon --output_dir=out/stats \
    [Beam pipeline args, e.g. --runner=DataflowRunner --project=...]

A dataset's globs may also name feature-record shards ('*.tfrecord*', as
cc12m_jax.data.synthetic.generate and the importers write them): every
caption of every record counts, e.g. the synthetic world's sources:

python -m cc12m_jax.curation.stats \
    --dataset=cc3m='data/synthetic/cc3m/records.tfrecord-*' \
    --dataset=cc12m='data/synthetic/cc12m/records.tfrecord-*' \
    --dataset=coco='data/synthetic/coco_train/records.tfrecord-*' \
    --classes=synthetic-out-domain:450:0 --output_dir=out/stats

--classes takes a text file (one class per line) or
'synthetic-out-domain:<num_concepts>:<seed>' (the synthetic world's
out-of-domain concept names). Writes stats-<name>.json per dataset (the
pipeline's output), then stats.json, stats.md and coverage.png.
"""
import io
import json
import re
import tempfile
from typing import Any, Iterable, Mapping, Sequence

from absl import app
from absl import flags
import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from matplotlib.figure import Figure
import numpy as np

from cc12m_jax import config_check
from cc12m_jax.curation import beam_options
from cc12m_jax.curation import caption_stats
from cc12m_jax.curation import config as config_lib
from cc12m_jax.curation import report
from cc12m_jax.data.synthetic import concepts

DEFAULT_LONG_TAIL = ("sumo", "mangosteen", "pokemon", "luffy", "zanzibar", "jellyfish",
                     "bagpipes")
_DATASET_NAME = re.compile(r"^[\w.-]+$")


def load_classes(spec: str) -> list[str]:
  if spec.startswith("synthetic-out-domain:"):
    _, num, seed = spec.split(":")
    return [c.name for c in concepts.build_inventory(int(num), int(seed))
            if c.domain == concepts.OUT_DOMAIN]
  with open(spec, encoding="utf-8") as f:
    return [line.strip().lower() for line in f if line.strip()]


def _run(pipeline_args: Sequence[str], sources: Mapping[str, Any], classes: Sequence[str],
         long_tail_words: Sequence[str], output_dir: str) -> dict[str, dict[str, Any]]:
  """One pipeline for all datasets: `sources` maps a name to a PTransform of captions."""
  paths = {name: FileSystems.join(output_dir, f"stats-{name}.json") for name in sources}
  options = beam_options.pipeline_options(config_lib.beam_defaults(), pipeline_args)
  with beam.Pipeline(options=options) as p:
    for name, source in sources.items():
      (p | f"Read[{name}]" >> source
       | f"Stats[{name}]" >> caption_stats.CaptionStats(classes, long_tail_words)
       | f"Json[{name}]" >> beam.Map(json.dumps)
       | f"Write[{name}]" >> beam.io.WriteToText(paths[name], num_shards=1,
                                                shard_name_template=""))
  results = {}
  for name, path in paths.items():
    with FileSystems.open(path) as f:
      results[name] = json.loads(f.read().decode("utf-8"))
  return results


def dataset_stats(captions: Iterable[str], classes: Sequence[str],
                  long_tail_words: Sequence[str]) -> dict[str, Any]:
  """CaptionStats of in-memory captions, on Beam's local runner (tests, notebooks)."""
  with tempfile.TemporaryDirectory() as tmp:
    sources = {"captions": beam.Create(list(captions))}
    return _run(("--direct_running_mode=in_memory",), sources, classes, long_tail_words,
                tmp)["captions"]


def coverage_curve(instances: Sequence[int], pairs: int,
                   thresholds: Sequence[float]) -> list[int]:
  """Number of classes with >= K instances per 1M captions, for each K."""
  per_million = np.asarray(instances, np.float64) * (1e6 / max(pairs, 1))
  return [int((per_million >= k).sum()) for k in thresholds]


def default_thresholds() -> list[float]:
  return [float(k) for k in np.unique(np.round(np.logspace(0, 5, 26)))]


def coverage_png(results: dict[str, dict[str, Any]], thresholds: Sequence[float]) -> bytes:
  # A bare Figure renders without pyplot's global state or a GUI backend.
  fig = Figure(figsize=(6, 4))
  ax = fig.subplots()
  for name, stats in results.items():
    ax.plot(thresholds, stats["coverage_curve"], marker="o", markersize=3, label=name)
  ax.set_xscale("log")
  ax.set_xlabel("K (instances per 1M captions)")
  ax.set_ylabel("classes with >= K instances per 1M")
  ax.set_title("Class coverage (cf. CC12M paper, Figure 5)")
  ax.grid(True, which="both", alpha=0.3)
  ax.legend()
  fig.tight_layout()
  png = io.BytesIO()
  fig.savefig(png, format="png", dpi=120)
  return png.getvalue()


def markdown(results: dict[str, dict[str, Any]], long_tail_words: Sequence[str]) -> str:
  names = list(results)
  head = "| | " + " | ".join(names) + " |\n|---|" + "---:|" * len(names)
  rows = [
      ("pairs", lambda s: f"{s['pairs']}"),
      ("tokens", lambda s: f"{s['tokens']}"),
      ("types", lambda s: f"{s['types']}"),
      ("token/type ratio", lambda s: f"{s['token_type_ratio']:.1f}"),
      ("mean caption length", lambda s: f"{s['mean_caption_length']:.2f}"),
      ("median caption length", lambda s: f"{s['median_caption_length']:.1f}"),
      ("captions with <PERSON>", lambda s: f"{100 * s['person_caption_share']:.1f}%"),
      ("classes with >= 1 instance", lambda s: f"{s['classes']['classes_with_any_instance']}"
       f" / {s['classes']['num_classes']}"),
      ("median instances per class", lambda s: f"{s['classes']['median_instances']:.1f}"),
      ("median per class per 1M captions",
       lambda s: f"{s['classes']['median_instances_per_1m']:.1f}"),
  ]
  rows += [(f"'{w}'", lambda s, w=w: f"{s['long_tail_words'][w]}") for w in long_tail_words]
  lines = ["# Dataset statistics", "", head]
  lines += ["| " + label + " | " + " | ".join(fn(results[n]) for n in names) + " |"
            for label, fn in rows]
  for n in names:
    top = ", ".join(f"{t} ({c})" for t, c in results[n]["top_content_tokens"][:15])
    lines += ["", f"Top content tokens, {n}: {top}"]
  lines += ["", "![class coverage](coverage.png)", ""]
  return "\n".join(lines)


def compare(datasets: Mapping[str, str], classes: Sequence[str],
            long_tail_words: Sequence[str], output_dir: str,
            pipeline_args: Sequence[str] = ()) -> dict[str, dict[str, Any]]:
  """Runs the job; writes stats.json / stats.md / coverage.png; returns the results.

  `datasets` maps a name to comma-separated globs of kept shards;
  `pipeline_args` are Beam pipeline options (runner and its settings).
  """
  for name in datasets:
    if not _DATASET_NAME.match(name):
      raise ValueError(f"dataset name {name!r}: use letters, digits, '_', '.' or '-'")
  sources = {name: caption_stats.ReadCaptions(pattern) for name, pattern in datasets.items()}
  results = _run(pipeline_args, sources, classes, long_tail_words, output_dir)
  thresholds = default_thresholds()
  for stats in results.values():
    stats["coverage_curve"] = coverage_curve(
        list(stats["classes"]["instances"].values()), stats["pairs"], thresholds)
  report.write_text(FileSystems.join(output_dir, "stats.json"), json.dumps(
      {"thresholds_per_1m": thresholds, "datasets": results}, indent=1))
  report.write_text(FileSystems.join(output_dir, "stats.md"), markdown(results, long_tail_words))
  with FileSystems.create(FileSystems.join(output_dir, "coverage.png")) as f:
    f.write(coverage_png(results, thresholds))
  return results


def _define_flags() -> None:
  """CLI flags, defined only when run as a program (no clashes on import)."""
  flags.DEFINE_multi_string("dataset", [], "name=glob[,glob] of kept shards.")
  flags.DEFINE_string("classes", "", "Class list file or synthetic-out-domain:N:SEED.")
  flags.DEFINE_list("long_tail_words", list(DEFAULT_LONG_TAIL), "Words to count.")
  flags.DEFINE_string("output_dir", None, "Where to write the report.")
  flags.mark_flag_as_required("output_dir")


def main(argv: Sequence[str]) -> None:
  f = flags.FLAGS
  datasets = {}
  for item in f.dataset:
    if "=" not in item:
      raise ValueError(f"--dataset={item!r}: expected name=glob")
    name, pattern = item.split("=", 1)
    datasets[name] = pattern
  if not datasets:
    raise ValueError("give at least one --dataset=name=glob")
  classes = load_classes(f.classes) if f.classes else []
  results = compare(datasets, classes, f.long_tail_words, f.output_dir, argv[1:])
  print(markdown(results, f.long_tail_words))


if __name__ == "__main__":
  _define_flags()
  # Flags this program does not know are Beam pipeline options.
  app.run(main, flags_parser=lambda argv: config_check.parse_flags(argv, known_only=True))
