r"""Dataset statistics, side by side (paper Section 2.3 and Appendix B.1).

Per dataset: pairs, tokens, types, token/type ratio, mean and median caption
length (tokens), top tokens (all, and content words only), counts of chosen
long-tail words, share of captions with `<PERSON>`, and coverage of a class list
(e.g. nocaps' out-of-domain classes): the median number of instances per class,
the same per 1M captions, and the curve "number of classes with at least K
instances per 1M captions" over K, drawn like the paper's Figure 5.

Captions are tokenized with words.caption_tokens; a class instance is an
occurrence of the class's tokens in sequence, matching simple morphological
variants (words.stem: 'mangosteens' counts for 'mangosteen').

python -m cc12m_jax.curation.stats --dataset=cc3m='out/cc3m/kept-*.jsonl' \
    --dataset=cc12m='out/cc12m/kept-*.jsonl' --classes=classes.txt \
    --long_tail_words=sumo,mangosteen,pokemon --output_dir=out/stats

--classes takes a text file (one class per line) or
'synthetic-out-domain:<num_concepts>:<seed>' (the synthetic world's
out-of-domain concept names). Writes stats.json, stats.md, coverage.png.
"""
import collections
import glob
import json
import os
import statistics
from typing import Any, Iterable, Iterator, Sequence

from absl import app
from absl import flags
import numpy as np
import pyarrow.parquet as pq

from cc12m_jax.curation import words as words_lib

DEFAULT_LONG_TAIL = ("sumo", "mangosteen", "pokemon", "luffy", "zanzibar", "jellyfish",
                     "bagpipes")


def read_captions(pattern: str, field: str = "caption") -> Iterator[str]:
  """Captions from JSON Lines / Parquet shards matching `pattern` (comma-separated globs)."""
  paths = sorted(p for part in pattern.split(",") if part.strip()
                 for p in glob.glob(part.strip()))
  if not paths:
    raise FileNotFoundError(f"no files match {pattern!r}")
  for path in paths:
    if path.endswith(".parquet"):
      for value in pq.read_table(path, columns=[field]).column(field).to_pylist():
        yield value or ""
    else:
      with open(path, encoding="utf-8") as f:
        for line_number, line in enumerate(f, 1):
          if not line.strip():
            continue
          try:
            yield json.loads(line)[field]
          except (ValueError, KeyError, TypeError) as e:
            raise ValueError(f"{path}:{line_number}: no {field!r} in {line[:80]!r}") from e


def load_classes(spec: str) -> list[str]:
  if spec.startswith("synthetic-out-domain:"):
    from cc12m_jax.data.synthetic import concepts  # pylint: disable=g-import-not-at-top
    _, num, seed = spec.split(":")
    return [c.name for c in concepts.build_inventory(int(num), int(seed))
            if c.domain == concepts.OUT_DOMAIN]
  with open(spec, encoding="utf-8") as f:
    return [line.strip().lower() for line in f if line.strip()]


class _ClassMatcher:
  """Counts occurrences of (multi-word) classes in stemmed token sequences."""

  def __init__(self, classes: Sequence[str]):
    self.classes = list(classes)
    self.by_first: dict[str, list[tuple[int, tuple[str, ...]]]] = collections.defaultdict(list)
    for i, name in enumerate(self.classes):
      key = tuple(words_lib.stem(t) for t in words_lib.caption_tokens(name))
      if key:
        self.by_first[key[0]].append((i, key))

  def count(self, stems: list[str], counts: np.ndarray) -> None:
    for pos, token in enumerate(stems):
      for index, key in self.by_first.get(token, ()):
        if tuple(stems[pos:pos + len(key)]) == key:
          counts[index] += 1


def dataset_stats(captions: Iterable[str], classes: Sequence[str],
                  long_tail_words: Sequence[str], top_k: int = 25) -> dict[str, Any]:
  token_counts: collections.Counter = collections.Counter()
  lengths = []
  with_person = 0
  matcher = _ClassMatcher(classes)
  class_counts = np.zeros(len(classes), np.int64)
  for caption in captions:
    tokens = words_lib.caption_tokens(caption)
    token_counts.update(tokens)
    lengths.append(len(tokens))
    with_person += "<person>" in tokens
    matcher.count([words_lib.stem(t) for t in tokens], class_counts)
  pairs = len(lengths)
  num_tokens = int(sum(lengths))
  per_million = class_counts * (1e6 / max(pairs, 1))
  content = [(t, n) for t, n in token_counts.most_common()
             if t not in words_lib.FUNCTION_WORDS and t.isalpha()][:top_k]
  return {
      "pairs": pairs,
      "tokens": num_tokens,
      "types": len(token_counts),
      "token_type_ratio": num_tokens / max(len(token_counts), 1),
      "mean_caption_length": num_tokens / max(pairs, 1),
      "median_caption_length": float(statistics.median(lengths)) if lengths else 0.0,
      "person_caption_share": with_person / max(pairs, 1),
      "top_tokens": token_counts.most_common(top_k),
      "top_content_tokens": content,
      "long_tail_words": {w: int(token_counts.get(w, 0)) for w in long_tail_words},
      "classes": {
          "num_classes": len(classes),
          "median_instances": float(np.median(class_counts)) if len(classes) else 0.0,
          "median_instances_per_1m": float(np.median(per_million)) if len(classes) else 0.0,
          "classes_with_any_instance": int((class_counts > 0).sum()),
          "instances": {c: int(n) for c, n in zip(classes, class_counts)},
      },
  }


def coverage_curve(instances: Sequence[int], pairs: int,
                   thresholds: Sequence[float]) -> list[int]:
  """Number of classes with >= K instances per 1M captions, for each K."""
  per_million = np.asarray(instances, np.float64) * (1e6 / max(pairs, 1))
  return [int((per_million >= k).sum()) for k in thresholds]


def default_thresholds() -> list[float]:
  return [float(k) for k in np.unique(np.round(np.logspace(0, 5, 26)))]


def plot_coverage(results: dict[str, dict[str, Any]], thresholds: Sequence[float],
                  path: str) -> None:
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use("Agg")
  from matplotlib import pyplot as plt  # pylint: disable=g-import-not-at-top
  fig, ax = plt.subplots(figsize=(6, 4))
  for name, stats in results.items():
    ax.plot(thresholds, stats["coverage_curve"], marker="o", markersize=3, label=name)
  ax.set_xscale("log")
  ax.set_xlabel("K (instances per 1M captions)")
  ax.set_ylabel("classes with >= K instances per 1M")
  ax.set_title("Class coverage (cf. CC12M paper, Figure 5)")
  ax.grid(True, which="both", alpha=0.3)
  ax.legend()
  fig.tight_layout()
  fig.savefig(path, dpi=120)
  plt.close(fig)


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


def compare(datasets: dict[str, str], classes: Sequence[str], long_tail_words: Sequence[str],
            output_dir: str) -> dict[str, dict[str, Any]]:
  """Computes, writes stats.json / stats.md / coverage.png, returns the results."""
  thresholds = default_thresholds()
  results = {}
  for name, pattern in datasets.items():
    stats = dataset_stats(read_captions(pattern), classes, long_tail_words)
    stats["coverage_curve"] = coverage_curve(
        list(stats["classes"]["instances"].values()), stats["pairs"], thresholds)
    results[name] = stats
  os.makedirs(output_dir, exist_ok=True)
  with open(os.path.join(output_dir, "stats.json"), "w", encoding="utf-8") as f:
    json.dump({"thresholds_per_1m": thresholds, "datasets": results}, f, indent=1)
  with open(os.path.join(output_dir, "stats.md"), "w", encoding="utf-8") as f:
    f.write(markdown(results, long_tail_words))
  plot_coverage(results, thresholds, os.path.join(output_dir, "coverage.png"))
  return results


def _define_flags() -> None:
  """CLI flags, defined only when run as a program (no clashes on import)."""
  flags.DEFINE_multi_string("dataset", [], "name=glob[,glob] of kept shards.")
  flags.DEFINE_string("classes", "", "Class list file or synthetic-out-domain:N:SEED.")
  flags.DEFINE_list("long_tail_words", list(DEFAULT_LONG_TAIL), "Words to count.")
  flags.DEFINE_string("output_dir", None, "Where to write the report.")
  flags.mark_flag_as_required("output_dir")


def main(argv: Sequence[str]) -> None:
  del argv
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
  results = compare(datasets, classes, f.long_tail_words, f.output_dir)
  print(markdown(results, f.long_tail_words))


if __name__ == "__main__":
  _define_flags()
  app.run(main)
