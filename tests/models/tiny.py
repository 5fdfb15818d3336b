"""Tiny model config and random batches following docs/architecture.md."""
from __future__ import annotations

import ml_collections
import numpy as np

from configs import base

VOCAB = 48
FEATURE_DIM = 12
CAPTION_LEN = 9
TAG_TOKENS = 3


def tiny_config(**model_overrides) -> ml_collections.ConfigDict:
  config = base.get_config()
  m = config.model
  m.emb_dim, m.num_heads, m.mlp_dim = 32, 4, 64
  m.num_encoder_layers = m.num_decoder_layers = 2
  m.vocab_size, m.feature_dim = VOCAB, FEATURE_DIM
  for k, v in model_overrides.items():
    m[k] = v
  config.data.max_caption_length = CAPTION_LEN
  config.data.max_tag_tokens = TAG_TOKENS
  return config


def random_batch(batch_size: int, seed: int = 0, *, regions: int = 4, tags: int = 3) -> dict:
  """Numpy batch with some padded regions, tags, tag pieces and caption tail."""
  rng = np.random.default_rng(seed)
  region_mask = rng.random((batch_size, regions)) < 0.75
  region_mask[:, 0] = True
  boxes = np.sort(rng.random((batch_size, regions, 2, 2)), axis=2)  # x1<x2, y1<y2
  x1, x2 = boxes[..., 0, 0], boxes[..., 1, 0]
  y1, y2 = boxes[..., 0, 1], boxes[..., 1, 1]
  region_boxes = np.stack([x1, y1, x2, y2, (x2 - x1) * (y2 - y1)], -1).astype(np.float32)
  tag_tokens = rng.integers(6, VOCAB, (batch_size, tags, TAG_TOKENS)).astype(np.int32)
  tag_tokens[:, :, 2] = np.where(rng.random((batch_size, tags)) < 0.5, 0, tag_tokens[:, :, 2])
  tag_mask = rng.random((batch_size, tags)) < 0.7
  tag_tokens[~tag_mask] = 0
  lengths = rng.integers(3, CAPTION_LEN, batch_size)
  words = rng.integers(6, VOCAB, (batch_size, CAPTION_LEN)).astype(np.int32)
  pos = np.arange(CAPTION_LEN)[None, :]
  targets = np.where(pos < lengths[:, None] - 1, words, 0)
  targets = np.where(pos == lengths[:, None] - 1, 2, targets).astype(np.int32)  # EOS
  inputs = np.concatenate([np.ones((batch_size, 1), np.int32), targets[:, :-1]], 1)
  inputs = np.where(inputs == 2, 0, inputs).astype(np.int32)
  features = rng.normal(size=(batch_size, regions, FEATURE_DIM)).astype(np.float32)
  features[~region_mask] = 0.0
  region_boxes[~region_mask] = 0.0
  return {
      "global_feature": rng.normal(size=(batch_size, FEATURE_DIM)).astype(np.float32),
      "region_features": features,
      "region_boxes": region_boxes,
      "region_mask": region_mask,
      "tag_tokens": tag_tokens,
      "tag_mask": tag_mask,
      "tag_scores": rng.random((batch_size, tags)).astype(np.float32),
      "decoder_inputs": inputs,
      "decoder_targets": targets,
      "example_mask": np.ones(batch_size, bool),
      "domain": np.zeros(batch_size, np.int32),
  }
