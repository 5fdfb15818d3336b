"""Writing predictions and evaluation reports.

Predictions: the JSON list of {"image_id", "caption"} that the COCO and
nocaps evaluation servers accept (image ids as in the reference file, so
integers for COCO/nocaps). Reports: the dict from nocaps.evaluate as JSON,
and a Markdown table (scores x 100, as papers print them).
"""
from __future__ import annotations

import json
import os
from typing import Any, Mapping, Sequence

from cc12m_jax.evaluation import nocaps

TABLE_METRICS = ("CIDEr", "BLEU-1", "BLEU-4", "METEOR", "ROUGE-L", "SPICE")


def _write_json(path: str, obj: Any) -> None:
  os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
  tmp = path + ".tmp"
  with open(tmp, "w") as f:
    json.dump(obj, f, indent=1)
  os.replace(tmp, path)  # readers never see a half-written file


def predictions_list(predictions: Mapping[str, str],
                     references: nocaps.References | None = None
                     ) -> list[dict[str, Any]]:
  """[{image_id, caption}], in reference order, with original id types."""
  if references is None:
    return [{"image_id": k, "caption": v} for k, v in predictions.items()]
  missing = [k for k in predictions if k not in references.original_ids]
  if missing:
    raise KeyError(f"predictions for images not in {references.source}: "
                   f"{missing[:5]}")
  return [{"image_id": references.original_ids[k], "caption": predictions[k]}
          for k in references.image_ids if k in predictions]


def write_predictions(path: str, predictions: Mapping[str, str],
                      references: nocaps.References | None = None) -> None:
  _write_json(path, predictions_list(predictions, references))


def read_predictions(path: str) -> dict[str, str]:
  """Reads a predictions JSON list back into {image_id (str): caption}."""
  with open(path) as f:
    data = json.load(f)
  if not isinstance(data, list):
    raise ValueError(f"{path}: expected a JSON list of {{image_id, caption}}")
  out: dict[str, str] = {}
  for i, item in enumerate(data):
    if not isinstance(item, dict) or "image_id" not in item or (
        "caption" not in item):
      raise ValueError(f"{path}: entry {i} is not {{image_id, caption}}: "
                       f"{item!r}")
    key = str(item["image_id"])
    if key in out:
      raise ValueError(f"{path}: image {item['image_id']!r} predicted twice")
    out[key] = item["caption"]
  return out


def write_report(path: str, report: Mapping[str, Any]) -> None:
  _write_json(path, report)


def markdown_table(report: Mapping[str, Any],
                   metrics: Sequence[str] = TABLE_METRICS) -> str:
  """Per-domain table; scores x 100; unavailable metrics listed below it."""
  shown = [m for m in metrics if m in report["metrics"]]
  header = "| split | images | " + " | ".join(shown) + " |"
  lines = [header, "|" + "---|" * (len(shown) + 2)]
  for group, row in report["scores"].items():
    cells = [f"{100 * row[m]:.1f}" for m in shown]
    lines.append(f"| {group} | {report['num_images'][group]} | "
                 + " | ".join(cells) + " |")
  for metric, reason in report.get("unavailable", {}).items():
    if metric in metrics:
      lines.append(f"\n{metric}: unavailable ({reason})")
  missing = report.get("num_references_without_prediction", 0)
  if missing:
    lines.append(f"\n{missing} reference images had no prediction and were "
                 "not scored.")
  return "\n".join(lines) + "\n"


def write_markdown(path: str, report: Mapping[str, Any]) -> None:
  os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
  with open(path, "w") as f:
    f.write(markdown_table(report))


def format_examples(predictions: Mapping[str, str],
                    references: nocaps.References, num: int = 5,
                    max_refs: int = 2) -> str:
  """A few predictions next to their references (first `num`, ref order)."""
  lines = []
  for k in [k for k in references.image_ids if k in predictions][:num]:
    domain = references.domains.get(k) or "-"
    lines.append(f"[{k}] ({domain})")
    lines.append(f"  predicted: {predictions[k]}")
    for ref in references.captions[k][:max_refs]:
      lines.append(f"  reference: {ref}")
  return "\n".join(lines)


def write_all(directory: str, predictions: Mapping[str, str],
              references: nocaps.References, report: Mapping[str, Any],
              prefix: str = "") -> dict[str, str]:
  """predictions.json, report.json, report.md under `directory`."""
  paths = {"predictions": os.path.join(directory, f"{prefix}predictions.json"),
           "report": os.path.join(directory, f"{prefix}report.json"),
           "markdown": os.path.join(directory, f"{prefix}report.md")}
  write_predictions(paths["predictions"], predictions, references)
  write_report(paths["report"], report)
  write_markdown(paths["markdown"], report)
  return paths
