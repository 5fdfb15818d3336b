"""Helpers of the data tests: a tiny world config and synthetic records.

(A uniquely named module: every test directory has its own conftest.py.)
"""
import numpy as np

from configs import base
from cc12m_jax.data import records as records_lib

FEATURE_DIM = 8


def tiny_config(seed: int = 0):
  cfg = base.get_config()
  s = cfg.synthetic
  s.seed = seed
  s.feature_dim = FEATURE_DIM
  s.num_concepts = 60
  s.num_cc3m = 40
  s.num_cc3m_dev = 6
  s.num_cc12m = 120
  s.num_coco_train = 30
  s.num_coco_val = 10
  s.num_nocaps_val = 21
  s.num_flickr = 18
  s.num_flickr_val = 3
  s.num_flickr_test = 3
  s.vocab_size = 300
  s.records_per_shard = 30
  return cfg


def make_record(i: int, rng: np.random.Generator, **overrides
                ) -> records_lib.FeatureRecord:
  n = int(rng.integers(1, 5))
  xy = rng.uniform(0.0, 0.5, size=(n, 2))
  wh = rng.uniform(0.1, 0.5, size=(n, 2))
  fields = dict(
      image_id=f"img_{i:04d}", source="unit",
      global_feature=rng.normal(size=FEATURE_DIM).astype(np.float32),
      region_features=rng.normal(size=(n, FEATURE_DIM)).astype(np.float32),
      region_boxes=np.concatenate([xy, xy + wh], axis=1).astype(np.float32),
      tags=["dog", "hot dog", "park"][:int(rng.integers(0, 4))],
      tag_scores=None, captions=[f"a dog number {i} .", "another caption"],
      width=640, height=480, domain="")
  fields["tag_scores"] = rng.uniform(size=len(fields["tags"])).astype(
      np.float32)
  fields.update(overrides)
  return records_lib.FeatureRecord(**fields)
