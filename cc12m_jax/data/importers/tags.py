"""Image tags as JSON Lines: {"image_id": ..., "tags": [{"name", "score"}]}.

The tagger's labels become the record's `tags` and `tag_scores`. More than
16 tags: the 16 highest scores are kept (ties: earlier first), in their
given order. Names are stripped of surrounding whitespace, kept otherwise as
given; a tag with an empty name, or a score that is not a finite number, makes
the row bad (`bad_tags`).
"""
import json
import math
from typing import Any

import numpy as np

from cc12m_jax.data import records as records_lib
from cc12m_jax.data.importers import rows as rows_lib


def clean_tags(value: Any) -> list[tuple[str, float]]:
  """[(name, score)] from [{"name", "score"}] (or [[name, score]]); <= 16."""
  if not isinstance(value, list):
    raise rows_lib.RowError("bad_tags", f"tags is {type(value).__name__}, not a list")
  tags = []
  for i, item in enumerate(value):
    if isinstance(item, dict):
      name, score = item.get("name"), item.get("score")
    elif isinstance(item, (list, tuple)) and len(item) == 2:
      name, score = item
    else:
      raise rows_lib.RowError("bad_tags", f"tags[{i}] is {item!r}")
    if (not isinstance(name, str) or not name.strip()
        or isinstance(score, bool) or not isinstance(score, (int, float))
        or not math.isfinite(score)):
      raise rows_lib.RowError("bad_tags", f"tags[{i}] is {item!r}")
    tags.append((name.strip(), float(score)))
  if len(tags) > records_lib.MAX_TAGS:
    scores = np.array([s for _, s in tags])
    keep = np.sort(np.argsort(-scores, kind="stable")[:records_lib.MAX_TAGS])
    tags = [tags[i] for i in keep]
  return tags


def parse_line(location: rows_lib.Location, line: bytes) -> rows_lib.TagRow:
  try:
    obj = json.loads(line)
  except UnicodeDecodeError as err:
    raise rows_lib.RowError("bad_utf8", str(err)) from None
  except ValueError as err:
    raise rows_lib.RowError("bad_json", str(err)) from None
  if not isinstance(obj, dict):
    raise rows_lib.RowError("bad_json", "not a JSON object")
  image_id = obj.get("image_id")
  if image_id is None or not str(image_id).strip():
    raise rows_lib.RowError("missing_id", "no image_id")
  image_id = str(image_id).strip()
  try:
    tags = clean_tags(obj.get("tags", []))
  except rows_lib.RowError as err:
    err.image_id = image_id
    raise
  return rows_lib.TagRow(image_id, location, [n for n, _ in tags],
                         [s for _, s in tags])
