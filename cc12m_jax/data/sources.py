"""The run's data sources from config: which train sources, their weights and
fractions, the vocabulary file, and the feature dimension D they share.

Config parsing and small metadata reads only, without TensorFlow, so the
model's dimensions resolve where only JAX is installed (core/run_setup.py);
the tf.data pipeline (pipeline.py) builds its streams from the same answers.
"""
import dataclasses
import os
from typing import Sequence

import ml_collections

from cc12m_jax.data import metadata as metadata_lib


def split_csv(value: str) -> list[str]:
  return [v.strip() for v in str(value).split(",") if v.strip()]


@dataclasses.dataclass(frozen=True)
class TrainSource:
  name: str
  weight: float
  fraction: float


def train_sources(data_cfg: ml_collections.ConfigDict) -> list[TrainSource]:
  """Parses data.train_sources / train_weights / train_fractions (one weight and
  one fraction per source); a ValueError names the key."""
  names = split_csv(data_cfg.train_sources)
  weights = [float(w) for w in split_csv(data_cfg.train_weights)]
  fractions = [float(f) for f in split_csv(data_cfg.train_fractions)]
  if not names:
    raise ValueError("config.data.train_sources is empty")
  for key, values in (("train_weights", weights),
                      ("train_fractions", fractions)):
    if len(values) != len(names):
      raise ValueError(
          f"config.data.{key} has {len(values)} values for "
          f"{len(names)} train_sources {names}")
  for name, w, f in zip(names, weights, fractions):
    if w <= 0:
      raise ValueError(f"config.data.train_weights: weight of {name!r} "
                       f"must be > 0, got {w}")
    if not 0 < f <= 1:
      raise ValueError(f"config.data.train_fractions: fraction of {name!r} "
                       f"must be in (0, 1], got {f}")
  return [TrainSource(n, w, f) for n, w, f in zip(names, weights, fractions)]


def vocab_path(data_cfg: ml_collections.ConfigDict) -> str:
  return data_cfg.vocab_path or os.path.join(data_cfg.data_dir, "vocab.txt")


def source_metadata(data_cfg: ml_collections.ConfigDict, sources: Sequence[str]
                    ) -> dict[str, metadata_lib.DatasetMetadata]:
  """Each source's metadata.json (D, feature dtype, counts), read once."""
  return {s: metadata_lib.load_metadata(data_cfg.data_dir, s) for s in sources}


def shared_feature_dim(metadata: dict[str, metadata_lib.DatasetMetadata]) -> int:
  """D of sources that must agree on it (they feed one model). Their feature
  dtypes may differ: each source is parsed by its own map."""
  dims = {s: m.feature_dim for s, m in metadata.items()}
  if len(set(dims.values())) != 1:
    raise ValueError(f"sources disagree on feature_dim: {dims}")
  return next(iter(dims.values()))


def feature_dim(data_cfg: ml_collections.ConfigDict,
                sources: Sequence[str]) -> int:
  """D shared by `sources` (from their metadata.json)."""
  return shared_feature_dim(source_metadata(data_cfg, sources))
