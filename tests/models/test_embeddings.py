"""Input embeddings against a hand (numpy) computation, and padding invariance."""
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from cc12m_jax.models import embeddings
from tests.models import tiny


def _layer_norm(x, scale, bias, eps=1e-6):
  mean = x.mean(-1, keepdims=True)
  var = ((x - mean) ** 2).mean(-1, keepdims=True)
  return (x - mean) / np.sqrt(var + eps) * scale + bias


def _randomize(params, seed):
  """Replace every parameter (zeros/ones biases and scales too) by random values."""
  leaves, treedef = jax.tree_util.tree_flatten(params)
  keys = jax.random.split(jax.random.PRNGKey(seed), len(leaves))
  return jax.tree_util.tree_unflatten(
      treedef, [0.3 * jax.random.normal(k, x.shape) for k, x in zip(keys, leaves)])


def test_geometry_and_fusion_match_numpy():
  cfg = tiny.tiny_config().model
  batch = tiny.random_batch(2, seed=1)
  boxes = batch["region_boxes"]  # [B, R, 5]
  semantic = np.random.default_rng(2).normal(size=boxes.shape[:2] + (cfg.emb_dim,)).astype(np.float32)

  geo_mod = embeddings.GeometryEmbedding(cfg)
  geo_params = _randomize(nn.meta.unbox(geo_mod.init(jax.random.PRNGKey(0), boxes, train=False)["params"]), 3)
  geometry = np.asarray(geo_mod.apply({"params": geo_params}, boxes, train=False))

  p = jax.tree_util.tree_map(np.asarray, geo_params)
  per_value = boxes[..., None] * p["value_kernel"] + p["value_bias"]  # [B, R, 5, E]
  concat = per_value.reshape(boxes.shape[:2] + (5 * cfg.emb_dim,))
  hidden = np.maximum(concat @ p["mlp"]["hidden"]["kernel"] + p["mlp"]["hidden"]["bias"], 0)
  expected_geo = hidden @ p["mlp"]["output"]["kernel"] + p["mlp"]["output"]["bias"]
  np.testing.assert_allclose(geometry, expected_geo, rtol=1e-4, atol=1e-4)

  fusion = embeddings.RegionFusion(cfg)
  f_params = _randomize(nn.meta.unbox(
      fusion.init(jax.random.PRNGKey(0), semantic, geometry, train=False)["params"]), 4)
  fused = np.asarray(fusion.apply({"params": f_params}, semantic, geometry, train=False))
  q = jax.tree_util.tree_map(np.asarray, f_params)
  x = (_layer_norm(geometry, q["geometry_norm"]["scale"], q["geometry_norm"]["bias"])
       + _layer_norm(semantic, q["semantic_norm"]["scale"], q["semantic_norm"]["bias"]))
  x = np.maximum(x @ q["mlp"]["hidden"]["kernel"] + q["mlp"]["hidden"]["bias"], 0)
  x = x @ q["mlp"]["output"]["kernel"] + q["mlp"]["output"]["bias"]
  expected = _layer_norm(x, q["output_norm"]["scale"], q["output_norm"]["bias"])
  np.testing.assert_allclose(fused, expected, rtol=1e-4, atol=1e-4)


def test_dropout_is_active_only_in_training():
  cfg = tiny.tiny_config().model
  batch = tiny.random_batch(2, seed=1)
  mod = embeddings.GeometryEmbedding(cfg)
  params = nn.meta.unbox(mod.init(jax.random.PRNGKey(0), batch["region_boxes"], train=False)["params"])
  a = mod.apply({"params": params}, batch["region_boxes"], train=True, rngs={"dropout": jax.random.PRNGKey(1)})
  b = mod.apply({"params": params}, batch["region_boxes"], train=False)
  assert not np.allclose(a, b)


class _Holder(nn.Module):
  """ImageInputEmbedding with its own TextEmbedding (as inside the Captioner)."""
  config: object

  def setup(self):
    self.text = embeddings.TextEmbedding(self.config, tiny.VOCAB)
    self.image = embeddings.ImageInputEmbedding(self.config, text_embedding=self.text)

  def __call__(self, batch):
    return self.image(batch, train=False)

  def embed_text(self, ids):
    return self.text(ids, train=False)


def test_bag_layout_mask_and_tag_mean():
  cfg = tiny.tiny_config().model
  batch = tiny.random_batch(3, seed=5)
  holder = _Holder(cfg)
  params = nn.meta.unbox(holder.init(jax.random.PRNGKey(0), batch)["params"])
  vectors, mask = holder.apply({"params": params}, batch)
  r, t = batch["region_mask"].shape[1], batch["tag_mask"].shape[1]
  assert vectors.shape == (3, 1 + r + t, cfg.emb_dim)
  np.testing.assert_array_equal(
      mask, np.concatenate([np.ones((3, 1), bool), batch["region_mask"], batch["tag_mask"]], 1))
  # Padded slots are zero vectors.
  np.testing.assert_array_equal(np.asarray(vectors)[~np.asarray(mask)], 0.0)
  # A tag vector is the mean of its (non-PAD) word-piece text embeddings.
  b, k = np.argwhere(batch["tag_mask"])[0]
  pieces = batch["tag_tokens"][b, k]
  pieces = pieces[pieces != 0]
  piece_vecs = holder.apply({"params": params}, jnp.asarray(pieces), method=_Holder.embed_text)
  np.testing.assert_allclose(vectors[b, 1 + r + k], np.asarray(piece_vecs).mean(0), rtol=1e-5, atol=1e-5)


def test_without_tags_the_bag_has_global_and_regions():
  cfg = tiny.tiny_config(use_tags=False).model
  batch = tiny.random_batch(2)
  holder = _Holder(cfg)
  params = nn.meta.unbox(holder.init(jax.random.PRNGKey(0), batch)["params"])
  vectors, mask = holder.apply({"params": params}, batch)
  assert vectors.shape[1] == mask.shape[1] == 1 + batch["region_mask"].shape[1]
