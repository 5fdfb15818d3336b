"""Tiny dual-encoder configs and random batches shared by the retrieval tests."""
import ml_collections
import numpy as np

from configs import base

VOCAB_SIZE = 40
FEATURE_DIM = 12
CAPTION_LENGTH = 8
TAG_TOKENS = 3
REGIONS, TAGS = 4, 3  # fewer than the records' 16: the models take any count


def model_config(**overrides) -> ml_collections.ConfigDict:
  """configs/base.py with a 2-layer, width-32 dual encoder."""
  config = base.get_config()
  with config.unlocked():
    config.train.objective = "vlm"
    m = config.model
    m.emb_dim, m.num_heads, m.mlp_dim = 32, 4, 64
    m.num_encoder_layers, m.text_encoder_layers = 2, 2
    m.projection_dim = 16
    m.temperature = 0.1
    m.feature_dim = FEATURE_DIM
    m.vocab_size = VOCAB_SIZE
    config.data.max_caption_length = CAPTION_LENGTH
    config.data.max_tag_tokens = TAG_TOKENS
    config.mesh.data, config.mesh.fsdp, config.mesh.model = -1, 1, 1
    for key, value in overrides.items():
      m[key] = value
  return config


def random_batch(rng: np.random.Generator, batch_size: int,
                 config: ml_collections.ConfigDict) -> dict:
  """A random batch in the docs/architecture.md layout (numpy)."""
  m = config.model
  r, t = REGIONS, TAGS
  lengths = rng.integers(2, CAPTION_LENGTH + 1, size=batch_size)
  targets = rng.integers(6, VOCAB_SIZE, size=(batch_size, CAPTION_LENGTH))
  targets = np.where(np.arange(CAPTION_LENGTH)[None] < lengths[:, None] - 1, targets, 0)
  targets[np.arange(batch_size), lengths - 1] = 2  # EOS
  boxes = np.sort(rng.uniform(size=(batch_size, r, 2, 2)), axis=2).reshape(batch_size, r, 4)
  area = (boxes[..., 2] - boxes[..., 0]) * (boxes[..., 3] - boxes[..., 1])
  return {
      "global_feature": rng.normal(size=(batch_size, FEATURE_DIM)).astype(np.float32),
      "region_features": rng.normal(size=(batch_size, r, FEATURE_DIM)).astype(np.float32),
      "region_boxes": np.concatenate([boxes, area[..., None]], -1).astype(np.float32),
      "region_mask": rng.uniform(size=(batch_size, r)) < 0.8,
      "tag_tokens": rng.integers(6, VOCAB_SIZE, size=(batch_size, t, TAG_TOKENS)).astype(np.int32),
      "tag_mask": rng.uniform(size=(batch_size, t)) < 0.8,
      "tag_scores": rng.uniform(size=(batch_size, t)).astype(np.float32),
      "decoder_inputs": np.concatenate(
          [np.ones((batch_size, 1), np.int32), targets[:, :-1]], 1).astype(np.int32),
      "decoder_targets": targets.astype(np.int32),
      "example_mask": np.ones((batch_size,), bool),
      "domain": np.zeros((batch_size,), np.int32),
  }
