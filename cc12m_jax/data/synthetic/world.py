"""The visual side of the synthetic world: what an image *is*.

An image shows 1-3 salient concept instances (each with a colour) in a scene.
Its feature record mimics a detector's output:
  region feature = concept prototype + colour direction + noise (1-2 regions
                   per instance) or scene prototype + noise (background);
  global feature = mean of the regions + scene prototype + noise;
  tags           = a tagger with imperfect precision: most salient concepts,
                   sometimes the scene / colour / hypernym, plus a few
                   confident-looking false positives.
Prototypes are independent Gaussian vectors, so in D >= 64 they are nearly
orthogonal and a model can tell every concept apart from its regions.

Appearance modes (num_modes > 1): a real class varies within (sub-type, pose,
part, viewpoint), and one that a model has seen in few images it recognizes
only in the appearances those images showed. Each concept then has num_modes
appearances with Zipfian frequencies (mode_zipf_exponent: a few typical
views, a tail of unusual ones); mode m's prototype is
  sqrt(mode_shared) * concept prototype + sqrt(1 - mode_shared) * own direction,
so mode_shared is the share of a mode's variance that every appearance of the
concept has in common (1: one appearance; 0: unrelated ones). Every source
draws an instance's mode by the same frequencies; only how many images of a
concept a source has decides how many of its appearances it shows. Modes are
drawn when an image is rendered, after its captions: they change features,
tags and image sizes, never a caption.
"""
import dataclasses

import numpy as np

from cc12m_jax.data import records
from cc12m_jax.data.synthetic import concepts as concepts_lib

COLORS = ("red", "blue", "green", "yellow", "white", "black", "brown", "pink",
          "gray", "purple")
# (scene name, phrase used in captions)
SCENES = (("beach", "on the beach"), ("street", "on the street"),
          ("kitchen", "in a kitchen"), ("field", "in a grassy field"),
          ("living room", "in a living room"), ("park", "in the park"),
          ("forest", "in the forest"), ("city", "in the city"),
          ("snow", "in the snow"), ("studio", "in a studio"),
          ("garden", "in a garden"), ("lake", "by the lake"))
_SIZES = ((640, 480), (480, 640), (800, 600), (1024, 768), (500, 375),
          (375, 500), (640, 427))
_NUM_CONCEPTS_P = (0.5, 0.35, 0.15)  # P(1, 2, 3 salient concepts)


@dataclasses.dataclass
class Instance:
  concept: int  # index into World.concepts
  color: int    # index into COLORS


@dataclasses.dataclass
class Scene:
  """What an image shows, before rendering to features (caption input)."""
  instances: list[Instance]
  scene: int    # index into SCENES


@dataclasses.dataclass
class Rendered:
  global_feature: np.ndarray   # f32 [D]
  region_features: np.ndarray  # f32 [N, D]
  region_boxes: np.ndarray     # f32 [N, 4]
  tags: list[str]
  tag_scores: np.ndarray       # f32 [len(tags)]
  width: int
  height: int


class World:
  """Concept inventory plus the feature-space prototypes of everything."""

  def __init__(self, num_concepts: int, feature_dim: int, seed: int, *,
               region_noise: float = 0.5, max_regions: int = records.MAX_REGIONS,
               max_tags: int = records.MAX_TAGS, zipf_exponent: float = 1.0,
               num_modes: int = 1, mode_shared: float = 0.5,
               mode_zipf_exponent: float = 1.0):
    if num_modes < 1 or not 0.0 <= mode_shared <= 1.0 or mode_zipf_exponent < 0:
      raise ValueError(f"appearance modes: num_modes >= 1 (got {num_modes}), 0 <= "
                       f"mode_shared <= 1 (got {mode_shared}), mode_zipf_exponent >= 0 "
                       f"(got {mode_zipf_exponent})")
    self.concepts = concepts_lib.build_inventory(num_concepts, seed,
                                                 zipf_exponent=zipf_exponent)
    self.feature_dim = feature_dim
    self.region_noise = region_noise
    self.max_regions = max_regions
    self.max_tags = max_tags
    rng = np.random.default_rng([seed, 1])
    d = feature_dim
    self.concept_protos = rng.normal(size=(len(self.concepts), d))  # [C, D]
    self.color_protos = 0.5 * rng.normal(size=(len(COLORS), d))     # [K, D]
    self.scene_protos = rng.normal(size=(len(SCENES), d))           # [S, D]
    freqs = np.array([c.frequency for c in self.concepts])
    self.frequencies = freqs / freqs.sum()
    self.by_domain = {
        dom: np.array([i for i, c in enumerate(self.concepts)
                       if c.domain == dom], dtype=np.int64)
        for dom in concepts_lib.CONCEPT_DOMAINS}
    self.num_modes = num_modes
    # With one mode nothing below is drawn: the world is the one before modes.
    self.mode_frequencies = np.ones(1)
    self.mode_protos = self.concept_protos[:, None]                 # [C, 1, D]
    if num_modes > 1:
      weights = 1.0 / np.arange(1, num_modes + 1) ** mode_zipf_exponent
      self.mode_frequencies = weights / weights.sum()               # [M]
      own = np.random.default_rng([seed, 3]).normal(
          size=(len(self.concepts), num_modes, d))                  # [C, M, D]
      self.mode_protos = (np.sqrt(mode_shared) * self.concept_protos[:, None]
                          + np.sqrt(1.0 - mode_shared) * own)       # [C, M, D]

  # ---------------------------------------------------------------- scenes --
  def sample_scene(self, rng: np.random.Generator, *,
                   pool: np.ndarray | None = None,
                   uniform: bool = False) -> Scene:
    """1-3 distinct concepts drawn from `pool` (all concepts by default),
    Zipfian unless `uniform`."""
    pool = np.arange(len(self.concepts)) if pool is None else pool
    k = min(int(rng.choice(3, p=_NUM_CONCEPTS_P)) + 1, len(pool))
    if uniform:
      p = None
    else:
      p = self.frequencies[pool] / self.frequencies[pool].sum()
    chosen = rng.choice(pool, size=k, replace=False, p=p)
    instances = [Instance(int(c), int(rng.integers(len(COLORS))))
                 for c in chosen]
    return Scene(instances=instances, scene=int(rng.integers(len(SCENES))))

  # ------------------------------------------------------------- rendering --
  def _box(self, rng: np.random.Generator, lo: float) -> np.ndarray:
    w, h = rng.uniform(lo, 0.95, size=2)
    x1, y1 = rng.uniform(0.0, 1.0 - w), rng.uniform(0.0, 1.0 - h)
    return np.array([x1, y1, x1 + w, y1 + h])

  def modes(self, scene: Scene, rng: np.random.Generator) -> list[int]:
    """The appearance of each instance; no draw with one mode, so that the
    world with one mode is byte for byte the one before modes."""
    if self.num_modes == 1:
      return [0] * len(scene.instances)
    return [int(m) for m in rng.choice(self.num_modes, size=len(scene.instances),
                                       p=self.mode_frequencies)]

  def render(self, scene: Scene, rng: np.random.Generator) -> Rendered:
    d = self.feature_dim
    feats, boxes = [], []
    for inst, mode in zip(scene.instances, self.modes(scene, rng)):
      for _ in range(int(rng.integers(1, 3))):  # 1-2 regions per instance
        feats.append(self.mode_protos[inst.concept, mode]
                     + self.color_protos[inst.color]
                     + self.region_noise * rng.normal(size=d))
        boxes.append(self._box(rng, 0.25))
    num_background = int(rng.integers(1, 5))
    for _ in range(num_background):
      feats.append(self.scene_protos[scene.scene]
                   + 2 * self.region_noise * rng.normal(size=d))
      boxes.append(self._box(rng, 0.1))
    order = rng.permutation(len(feats))[:self.max_regions]
    region_features = np.stack([feats[i] for i in order])           # [N, D]
    region_boxes = np.clip(np.stack([boxes[i] for i in order]), 0, 1)
    global_feature = (region_features.mean(0)
                      + 0.5 * self.scene_protos[scene.scene]
                      + 0.3 * rng.normal(size=d))                   # [D]
    tags, scores = self._tags(scene, rng)
    width, height = _SIZES[int(rng.integers(len(_SIZES)))]
    return Rendered(global_feature.astype(np.float32),
                    region_features.astype(np.float32),
                    region_boxes.astype(np.float32), tags,
                    np.asarray(scores, np.float32), width, height)

  def _tags(self, scene: Scene, rng: np.random.Generator
            ) -> tuple[list[str], list[float]]:
    """A tagger with recall ~0.85 on salient concepts and some false tags."""
    tags: dict[str, float] = {}
    for inst in scene.instances:
      concept = self.concepts[inst.concept]
      if rng.random() < 0.85:
        tags[concept.name] = rng.uniform(0.55, 0.99)
      if rng.random() < 0.3:
        tags.setdefault(concept.hypernym, rng.uniform(0.4, 0.9))
      if rng.random() < 0.3:
        tags.setdefault(COLORS[inst.color], rng.uniform(0.3, 0.8))
    if rng.random() < 0.6:
      tags.setdefault(SCENES[scene.scene][0], rng.uniform(0.4, 0.9))
    for c in rng.choice(len(self.concepts), size=int(rng.integers(1, 4)),
                        p=self.frequencies):
      tags.setdefault(self.concepts[int(c)].name, rng.uniform(0.05, 0.6))
    items = list(tags.items())[:self.max_tags]
    order = rng.permutation(len(items))
    return ([items[i][0] for i in order], [float(items[i][1]) for i in order])

  def domain_of(self, scene: Scene) -> str:
    return concepts_lib.image_domain(
        [self.concepts[i.concept] for i in scene.instances])
