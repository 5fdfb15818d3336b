"""The batch contract: every array a model step can receive, written once.

The input pipelines (data/pipeline.py, data/eval_pipeline.py) put exactly
`device_keys(kind)` on the device; each objective's dummy batch (parameter
init and shape inference) is `zeros(dims, keys)`; the table in
docs/architecture.md is `markdown_table()` (a test checks they agree).

Dimension symbols:
  B  global batch                 D  feature dimension (metadata.json)
  R  regions per image (16)       T  tags per image (16)
  K  subword tokens per tag       L  caption tokens, EOS included
     (config.data.max_tag_tokens)    (config.data.max_caption_length)

Strings (image ids, reference captions) never go to the device: the host
iterators keep them, keyed by `example_index` for evaluation.
"""
from __future__ import annotations

import dataclasses
from typing import Mapping, Sequence

import numpy as np

from cc12m_jax.data import record_schema

TRAIN, EVAL = "train", "eval"
KINDS = (TRAIN, EVAL)


@dataclasses.dataclass(frozen=True)
class Dims:
  """Sizes of the dimension symbols of one batch."""
  batch: int
  feature_dim: int
  tag_tokens: int
  caption_length: int
  regions: int = record_schema.MAX_REGIONS
  tags: int = record_schema.MAX_TAGS

  def size(self, symbol: str | int) -> int:
    if isinstance(symbol, int):
      return symbol
    return {"B": self.batch, "D": self.feature_dim, "R": self.regions, "T": self.tags,
            "K": self.tag_tokens, "L": self.caption_length}[symbol]


@dataclasses.dataclass(frozen=True)
class Field:
  name: str
  dtype: type
  shape: tuple[str | int, ...]   # dimension symbols (see module docstring) or sizes
  meaning: str
  kinds: tuple[str, ...] = KINDS  # batches that carry the field

  def shape_for(self, dims: Dims) -> tuple[int, ...]:
    return tuple(dims.size(s) for s in self.shape)


FIELDS: tuple[Field, ...] = (
    Field("global_feature", np.float32, ("B", "D"), "whole-image feature"),
    Field("region_features", np.float32, ("B", "R", "D"),
          "per-region features, zero where padded"),
    Field("region_boxes", np.float32, ("B", "R", 5),
          "x1, y1, x2, y2, relative area, all in [0, 1]"),
    Field("region_mask", np.bool_, ("B", "R"), "True for real regions"),
    Field("tag_tokens", np.int32, ("B", "T", "K"), "word-piece ids of each tag, 0-padded"),
    Field("tag_mask", np.bool_, ("B", "T"), "True for real tags"),
    Field("tag_scores", np.float32, ("B", "T"), "tagger confidence"),
    Field("decoder_inputs", np.int32, ("B", "L"), "`[BOS] y1 .. y(n)`, 0-padded"),
    Field("decoder_targets", np.int32, ("B", "L"),
          "`y1 .. y(n) [EOS]`, 0-padded (0 = ignored)"),
    Field("example_mask", np.bool_, ("B",), "False for eval padding examples"),
    Field("domain", np.int32, ("B",), "0 none, 1 in-domain, 2 near-domain, 3 out-domain"),
    Field("example_index", np.int32, ("B",),
          "position of the example in its eval set, -1 for padding", (EVAL,)),
)
_BY_NAME = {f.name: f for f in FIELDS}

# What an image encoder reads (every model's image side).
IMAGE_KEYS = ("global_feature", "region_features", "region_boxes", "region_mask",
              "tag_tokens", "tag_mask", "tag_scores")
# Caption token arrays (teacher forcing / text towers); decoding drops them.
TEXT_KEYS = ("decoder_inputs", "decoder_targets")


def field(name: str) -> Field:
  if name not in _BY_NAME:
    raise KeyError(f"{name!r} is not a batch key; known: {sorted(_BY_NAME)}")
  return _BY_NAME[name]


def device_keys(kind: str) -> tuple[str, ...]:
  """The keys a `kind` ('train' or 'eval') batch carries to the device, in spec order."""
  if kind not in KINDS:
    raise ValueError(f"batch kind {kind!r}; expected one of {KINDS}")
  return tuple(f.name for f in FIELDS if kind in f.kinds)


def zeros(dims: Dims, keys: Sequence[str]) -> dict[str, np.ndarray]:
  """A batch of zeros (masks True) with the spec's shapes and dtypes, for `keys`."""
  out = {}
  for name in keys:
    f = field(name)
    fill = np.ones if f.dtype is np.bool_ else np.zeros
    out[name] = fill(f.shape_for(dims), f.dtype)
  return out


def check(batch: Mapping[str, object], dims: Dims, keys: Sequence[str]) -> None:
  """Raises ValueError naming the first key of `keys` missing from `batch` or off-spec."""
  for name in keys:
    f = field(name)
    if name not in batch:
      raise ValueError(f"batch has no {name!r} (has {sorted(batch)})")
    value = batch[name]
    shape, dtype = tuple(value.shape), np.dtype(value.dtype)
    if shape != f.shape_for(dims) or dtype != np.dtype(f.dtype):
      raise ValueError(f"batch[{name!r}] is {dtype} {list(shape)}; the batch spec says "
                       f"{np.dtype(f.dtype)} {list(f.shape_for(dims))} "
                       f"({' x '.join(map(str, f.shape))})")


_DTYPE_NAMES = {np.float32: "f32", np.int32: "i32", np.bool_: "bool"}


def markdown_table() -> str:
  """The docs/architecture.md table of a batch."""
  rows = ["| key | dtype, shape | meaning |", "|---|---|---|"]
  for f in FIELDS:
    shape = ", ".join(str(s) for s in f.shape)
    note = "" if f.kinds == KINDS else f" ({', '.join(f.kinds)} only)"
    rows.append(f"| `{f.name}` | {_DTYPE_NAMES[f.dtype]} [{shape}] | {f.meaning}{note} |")
  return "\n".join(rows)
