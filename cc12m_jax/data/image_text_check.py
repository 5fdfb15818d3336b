r"""How many of a source's pairs pass the curation's image-text filter.

Both CC pipelines keep CC3M's image-text filter (paper Section 2.2, step 3;
cc12m_jax/curation/tag_overlap.py): a pair survives only when a confident tag
of its image occurs in its text. A curated web source should therefore pass
it almost entirely; a source that does not holds pairs the pipeline would
have rejected. This reads feature records (their `tags`, `tag_scores` and
captions) and applies the very filter, with the curation's configuration,
to every caption:

  python -m cc12m_jax.data.image_text_check --data_dir=data/synthetic --sources=cc3m,cc12m

A caption that fails is counted under the filter's reason
(image_text/tag_overlap, image_text/no_confident_tags). CC3M-style captions
are hypernymized after the filter ran on the raw alt-text, so a CC3M source
fails some pairs (a brand's tag against the word 'brand') that passed it.
"""
from __future__ import annotations

import collections
import json
from typing import Iterable, Optional, Sequence

from absl import app, flags
import ml_collections

from cc12m_jax.curation import config as curation_config
from cc12m_jax.curation import tag_overlap
from cc12m_jax.curation import words as words_lib
from cc12m_jax.data import records

PASS = "pass"


def curation_image_text() -> ml_collections.ConfigDict:
  """The image-text filter's configuration as the curation runs it (the same in both presets)."""
  return curation_config.preset_config("cc12m").image_text


def rejection(text: str, tags: Sequence[str], tag_scores: Sequence[float],
              image_text: ml_collections.ConfigDict) -> Optional[str]:
  """The filter's reason for rejecting `text` beside these tags; None where it passes."""
  pairs = [[t, float(s)] for t, s in zip(tags, tag_scores)]
  return tag_overlap.tag_overlap_rejection(words_lib.words(text), pairs, image_text)


def caption_reasons(record: records.FeatureRecord,
                    image_text: ml_collections.ConfigDict) -> list[str | None]:
  """The filter's reason for rejecting each of the record's captions, None where it passes."""
  return [rejection(c, record.tags, record.tag_scores, image_text) for c in record.captions]


def check_records(feature_records: Iterable[records.FeatureRecord]) -> dict[str, int]:
  """{'records', 'captions', 'pass', <reason>: count} over the records."""
  image_text = curation_image_text()
  counts: collections.Counter = collections.Counter()
  for record in feature_records:
    counts["records"] += 1
    for reason in caption_reasons(record, image_text):
      counts["captions"] += 1
      counts[reason or PASS] += 1
  return dict(counts)


def check_sources(data_dir: str, sources: Sequence[str]) -> dict[str, dict[str, int]]:
  """check_records over each source, read and validated as every tool reads records
  (records.read_source_records: a bad record is an error naming it)."""
  return {source: check_records(records.read_source_records(data_dir, source))
          for source in sources}


def markdown(results: dict[str, dict[str, int]]) -> str:
  reasons = sorted({k for counts in results.values() for k in counts}
                   - {"records", "captions", PASS})
  lines = ["| source | records | captions | pass | " + " | ".join(reasons) + " |",
           "|---|---:|---:|---:|" + "---:|" * len(reasons)]
  for source, c in results.items():
    share = lambda n: f"{n} ({100 * n / max(1, c['captions']):.1f}%)"  # pylint: disable=cell-var-from-loop
    lines.append(f"| {source} | {c['records']} | {c['captions']} | {share(c.get(PASS, 0))} | "
                 + " | ".join(share(c.get(r, 0)) for r in reasons) + " |")
  return "\n".join(lines)


def _define_flags() -> None:
  """CLI flags, defined only when run as a program (no clashes on import)."""
  flags.DEFINE_string("data_dir", None, "A data directory of feature records.")
  flags.DEFINE_list("sources", ["cc3m", "cc12m"], "Its sources to check.")
  flags.DEFINE_string("json", "", "Also write the counts here.")
  flags.mark_flag_as_required("data_dir")


def main(argv: Sequence[str]) -> None:
  if len(argv) > 1:
    raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
  f = flags.FLAGS
  results = check_sources(f.data_dir, f.sources)
  if f.json:
    with open(f.json, "w", encoding="utf-8") as out:
      json.dump(results, out, indent=1)
  print(markdown(results))
  total = {s: c.get(PASS, 0) / max(1, c["captions"]) for s, c in results.items()}
  print("image_text_pass_share: " + ", ".join(f"{s} {100 * v:.1f}%" for s, v in total.items()))


if __name__ == "__main__":
  _define_flags()
  app.run(main)
