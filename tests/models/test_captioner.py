"""Captioner behaviour: causal decoding, padding invariance, cache, overfitting, paper size."""
import functools

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from cc12m_jax.data import batch_spec
from cc12m_jax.models import captioner
from cc12m_jax.objectives import captioning, registry
from configs import base
from tests.models import tiny


def _forward(model):
  """Jitted teacher-forced forward (op-by-op dispatch is far slower on CPU)."""
  return jax.jit(lambda params, batch: model.apply({"params": params}, batch, train=False))


@functools.lru_cache(maxsize=None)
def _shared():
  """One tiny model, its params and jitted forward, shared by the tests (compiles once)."""
  cfg = tiny.tiny_config()
  model = captioner.Captioner(cfg.model, tiny.VOCAB)
  params = jax.jit(lambda: nn.meta.unbox(
      model.init(jax.random.PRNGKey(0), tiny.random_batch(2), train=False)["params"]))()
  return model, params, _forward(model)


def test_changing_future_tokens_leaves_earlier_logits_unchanged():
  model, params, forward = _shared()
  batch = tiny.random_batch(2, seed=3)
  logits = forward(params, batch)
  t = 4
  changed = dict(batch)
  inputs = batch["decoder_inputs"].copy()
  inputs[:, t:] = (inputs[:, t:] + 7) % tiny.VOCAB
  changed["decoder_inputs"] = inputs
  logits2 = forward(params, changed)
  np.testing.assert_allclose(logits[:, :t], logits2[:, :t], rtol=1e-5, atol=1e-5)
  assert not np.allclose(logits[:, t:], logits2[:, t:], atol=1e-3)


def test_padded_regions_and_tags_do_not_change_outputs():
  model, params, forward = _shared()
  batch = tiny.random_batch(2, seed=4)
  batch["region_mask"][:, -1] = False
  batch["tag_mask"][:, -1] = False
  logits = forward(params, batch)
  garbage = dict(batch)
  rng = np.random.default_rng(9)
  feats = batch["region_features"].copy()
  feats[:, -1] = rng.normal(size=feats[:, -1].shape) * 100
  boxes = batch["region_boxes"].copy()
  boxes[:, -1] = rng.random(boxes[:, -1].shape)
  tags = batch["tag_tokens"].copy()
  tags[:, -1] = rng.integers(6, tiny.VOCAB, tags[:, -1].shape)
  garbage.update(region_features=feats, region_boxes=boxes, tag_tokens=tags)
  logits2 = forward(params, garbage)
  np.testing.assert_allclose(logits, logits2, rtol=1e-5, atol=1e-5)
  # ... while a *real* region's content does matter.
  real = dict(batch)
  feats2 = batch["region_features"].copy()
  feats2[:, 0] += 1.0
  real["region_features"] = feats2
  assert not np.allclose(logits, forward(params, real), atol=1e-4)


@pytest.mark.parametrize("length", [tiny.CAPTION_LEN, 70])
def test_cached_decoding_matches_full_decoder(length):
  # 70 positions span three attention windows (32, 64, 70) of the cached step.
  # K = 2 rows per example, each fed its own tokens: both rows read their
  # example's primed cross-attention keys/values.
  model, params, forward = _shared()
  b, k = 2, 2
  batch = tiny.random_batch(b, seed=6)
  rng = np.random.default_rng(length)
  tokens = rng.integers(6, tiny.VOCAB, (b * k, length)).astype(np.int32)  # [B*K, L]
  tiled = {key: np.repeat(v, k, 0) for key, v in batch.items()}  # beam-major rows
  full = forward(params, dict(tiled, decoder_inputs=tokens))  # [B*K, L, V]
  encoded, mask = jax.jit(lambda p, b: model.apply(
      {"params": p}, b, train=False, method=captioner.Captioner.encode))(params, batch)
  _, state = jax.jit(lambda p: model.apply(
      {"params": p}, encoded, mask, num_hypotheses=k, max_decode_len=length,
      method=captioner.Captioner.init_decode_state,
      mutable=list(captioner.DECODE_COLLECTIONS)))(params)
  assert set(state) == set(captioner.DECODE_COLLECTIONS)
  for name in (captioner.STEP_CACHE, captioner.SLOT_CACHE):
    for leaf in jax.tree_util.tree_leaves(state[name]):
      assert leaf.shape[0] == b * k  # one row per hypothesis
  for leaf in jax.tree_util.tree_leaves(state[captioner.PRIMED_CACHE]):
    assert leaf.shape[0] == b  # one per example, shared by its K rows
  primed = state[captioner.PRIMED_CACHE]

  @jax.jit
  def decode_step(params, cache, slot_cache, token):
    return model.apply(
        {"params": params, captioner.PRIMED_CACHE: primed, captioner.STEP_CACHE: cache,
         captioner.SLOT_CACHE: slot_cache}, token, method=captioner.Captioner.decode_step,
        mutable=[captioner.STEP_CACHE, captioner.SLOT_CACHE])

  cache, slot_cache = state[captioner.STEP_CACHE], state[captioner.SLOT_CACHE]
  step_logits = []
  for t in range(length):
    logits, mutated = decode_step(params, cache, slot_cache, tokens[:, t:t + 1])  # [B*K, V]
    cache, slot_cache = mutated[captioner.STEP_CACHE], mutated[captioner.SLOT_CACHE]
    step_logits.append(logits)
  np.testing.assert_allclose(np.stack(step_logits, 1), full, rtol=1e-4, atol=1e-4)


def test_attention_parameter_names_and_shapes_are_the_checkpoint_layout():
  # Checkpoints store parameters by these paths: the attention modules must keep them.
  model, params, _ = _shared()
  e, h = 32, 4
  expected = {f"{n}_kernel": (e, h, e // h) for n in ("query", "key", "value")}
  expected.update({f"{n}_bias": (h, e // h) for n in ("query", "key", "value")})
  expected.update(out_kernel=(h, e // h, e), out_bias=(e,))
  stacks = {
      "encoder": {"attention", "attention_norm", "mlp", "mlp_norm"},
      "decoder": {"self_attention", "self_attention_norm", "cross_attention",
                  "cross_attention_norm", "mlp", "mlp_norm"}}
  for stack, names in stacks.items():
    assert set(params[stack]) == {"layer_0", "layer_1", "final_norm"}
    for i in range(2):
      layer = params[stack][f"layer_{i}"]
      assert set(layer) == names
      for name in names:
        if name.endswith("attention"):
          assert {k: v.shape for k, v in layer[name].items()} == expected


def test_loss_ignores_padding_and_reports_metrics():
  objective = registry.get("ic")
  model, params, forward = _shared()
  batch = tiny.random_batch(2, seed=8)
  loss_fn = jax.jit(lambda p, b: objective.loss_fn(model, p, b, jax.random.PRNGKey(1), train=False))
  loss, metrics = loss_fn(params, batch)
  logits = np.asarray(forward(params, batch), np.float64)
  logp = logits - np.log(np.exp(logits - logits.max(-1, keepdims=True)).sum(-1, keepdims=True)) - logits.max(-1, keepdims=True)
  t = batch["decoder_targets"]
  nll = -np.take_along_axis(logp, t[..., None], -1)[..., 0]
  w = t != 0
  np.testing.assert_allclose(loss, nll[w].mean(), rtol=1e-5)
  np.testing.assert_allclose(metrics["token_accuracy"], (logits.argmax(-1) == t)[w].mean(), rtol=1e-6)
  np.testing.assert_allclose(metrics["perplexity"], np.exp(nll[w].mean()), rtol=1e-5)
  assert float(metrics["num_tokens"]) == w.sum()
  # Eval padding examples contribute nothing.
  masked = dict(batch, example_mask=np.array([True, False]))
  loss2, _ = loss_fn(params, masked)
  np.testing.assert_allclose(loss2, nll[:1][w[:1]].mean(), rtol=1e-5)


def test_registry_rejects_unknown_objective():
  import pytest
  with pytest.raises(ValueError, match="unknown"):
    registry.get("nosuch")


def test_tiny_model_overfits_one_batch():
  model, params, _ = _shared()  # train=False below: no dropout, plain memorisation
  batch = jax.tree_util.tree_map(jnp.asarray, tiny.random_batch(2, seed=11))
  tx = optax.adam(3e-3)
  opt_state = tx.init(params)

  @jax.jit
  def step(params, opt_state):
    (loss, _), grads = jax.value_and_grad(
        lambda p: captioning.loss_fn(model, p, batch, jax.random.PRNGKey(0), train=False),
        has_aux=True)(params)
    updates, opt_state = tx.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, loss

  first = None
  for _ in range(150):
    params, opt_state, loss = step(params, opt_state)
    first = float(loss) if first is None else first
  assert first > 3.0
  assert float(loss) < 0.05, float(loss)


def test_paper_size_config_shapes_and_parameter_count():
  cfg = base.get_config()
  m = cfg.model
  assert (m.num_encoder_layers, m.num_decoder_layers, m.emb_dim, m.num_heads, m.mlp_dim) == (6, 6, 512, 8, 2048)
  vocab, feature_dim = 16_000, 1024
  model = captioner.Captioner(m, vocab)
  batch = batch_spec.zeros(batch_spec.Dims(batch=1, feature_dim=feature_dim, tag_tokens=4,
                                           caption_length=36), captioning.INPUT_KEYS)
  shapes = nn.meta.unbox(jax.eval_shape(
      lambda: model.init(jax.random.PRNGKey(0), batch, train=False)["params"]))
  enc_layers = [k for k in shapes["encoder"] if k.startswith("layer_")]
  dec_layers = [k for k in shapes["decoder"] if k.startswith("layer_")]
  assert len(enc_layers) == 6 and len(dec_layers) == 6
  att = shapes["decoder"]["layer_0"]["cross_attention"]
  assert att["query_kernel"].shape == (512, 8, 64)
  assert shapes["encoder"]["layer_0"]["mlp"]["wi"]["kernel"].shape == (512, 2048)
  assert shapes["logits_projection"]["kernel"].shape == (512, vocab)
  count = sum(int(np.prod(x.shape)) for x in jax.tree_util.tree_leaves(shapes))
  # Per encoder layer: 4 E^2 + 4E attention, 2 E F + F + E MLP, 2 x 2E LayerNorm.
  e, f = 512, 2048
  enc_layer = 4 * e * e + 4 * e + 2 * e * f + f + e + 4 * e
  dec_layer = enc_layer + 4 * e * e + 4 * e + 2 * e
  assert sum(int(np.prod(x.shape)) for x in jax.tree_util.tree_leaves(shapes["encoder"])) == 6 * enc_layer + 2 * e
  assert sum(int(np.prod(x.shape)) for x in jax.tree_util.tree_leaves(shapes["decoder"])) == 6 * dec_layer + 2 * e
  print(f"paper-size captioner (vocab {vocab}, feature dim {feature_dim}): {count:,} parameters")
  assert 60e6 < count < 80e6
