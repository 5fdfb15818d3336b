"""Masks of the masked objectives: rates, BERT replacement shares, contiguous spans."""
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest

from cc12m_jax.data.text import special_tokens
from cc12m_jax.objectives import mass, masking, mlm, moc

B, L, V = 512, 32, 1000


def _captions(seed: int = 0) -> np.ndarray:
  """i32 [B, L]: captions of 4 .. L-1 words, then [EOS], then padding."""
  rng = np.random.default_rng(seed)
  words = rng.integers(4, L, B)  # words per caption
  tokens = rng.integers(masking.FIRST_WORD_ID, V, (B, L))
  pos = np.arange(L)[None, :]
  tokens = np.where(pos < words[:, None], tokens, 0)
  tokens[np.arange(B), words] = special_tokens.EOS_ID
  return tokens.astype(np.int32)


def _settings(rate: float) -> ml_collections.FrozenConfigDict:
  return ml_collections.FrozenConfigDict({"text_mask_rate": rate, "mask_token_prob": 0.8,
                                          "random_token_prob": 0.1})


@pytest.mark.parametrize("rate", [0.1, 0.8])
def test_mlm_masks_the_configured_share_of_words_only(rate):
  tokens = _captions()
  inputs, chosen = jax.jit(mlm.mask_caption, static_argnums=(2, 3))(
      jax.random.PRNGKey(1), tokens, _settings(rate), V)
  chosen = np.asarray(chosen)
  words = np.asarray(masking.caption_words(tokens))
  assert not (chosen & ~words).any()  # never [EOS] or padding
  observed = chosen.sum() / words.sum()
  # ~9000 words: the binomial-like sd of the share is < 0.005.
  assert abs(observed - rate) < 0.015, observed
  # Stochastic rounding: every caption masks floor(r n) or ceil(r n) words.
  n, k = words.sum(1), chosen.sum(1)
  assert np.all((k >= np.floor(rate * n)) & (k <= np.ceil(rate * n)))
  # Unchosen tokens are untouched; chosen ones are 80% [MASK], 10% random, 10% kept.
  inputs = np.asarray(inputs)
  np.testing.assert_array_equal(inputs[~chosen], tokens[~chosen])
  if rate >= 0.4:
    total = chosen.sum()
    as_mask = (inputs[chosen] == special_tokens.MASK_ID).sum() / total
    kept = (inputs[chosen] == tokens[chosen]).sum() / total
    assert abs(as_mask - 0.8) < 0.03 and abs(kept - 0.1) < 0.03, (as_mask, kept)
    assert inputs[chosen].min() >= special_tokens.MASK_ID  # no PAD/BOS/EOS/UNK put in


def test_masks_depend_on_the_key_and_rbg_keys_work():
  tokens = _captions()
  f = jax.jit(lambda key: mlm.mask_caption(key, tokens, _settings(0.2), V)[1])
  a, b = np.asarray(f(jax.random.PRNGKey(1))), np.asarray(f(jax.random.PRNGKey(2)))
  assert (a != b).mean() > 0.05
  np.testing.assert_array_equal(a, np.asarray(f(jax.random.PRNGKey(1))))
  rbg = jax.random.wrap_key_data(jnp.arange(4, dtype=jnp.uint32), impl="rbg")
  assert np.asarray(f(rbg)).sum() > 0


@pytest.mark.parametrize("rate", [0.2, 0.8])
def test_mass_span_is_contiguous_of_the_rate_and_feeds_the_decoder(rate):
  tokens = _captions(1)
  out = jax.jit(mass.mask_span, static_argnums=(2, 3))(
      jax.random.PRNGKey(3), tokens, _settings(rate), V)
  out = {k: np.asarray(v) for k, v in out.items()}
  span, words = out["span"], np.asarray(masking.caption_words(tokens))
  n, k = words.sum(1), span.sum(1)
  assert np.all((k >= np.floor(rate * n)) & (k <= np.ceil(rate * n)))
  assert abs(k.sum() / n.sum() - rate) < 0.015
  assert not (span & ~words).any()
  for b in range(B):
    where = np.flatnonzero(span[b])
    if not len(where):
      continue
    start = where[0]
    np.testing.assert_array_equal(where, np.arange(start, start + k[b]))  # one run
    # The decoder generates the span from [BOS], each input at its caption position.
    np.testing.assert_array_equal(out["decoder_targets"][b, :k[b]], tokens[b, where])
    np.testing.assert_array_equal(out["decoder_inputs"][b, :k[b]],
                                  np.concatenate([[special_tokens.BOS_ID],
                                                  tokens[b, where[:-1]]]))
    np.testing.assert_array_equal(out["decoder_positions"][b, :k[b]], where)
    assert not out["decoder_targets"][b, k[b]:].any()
    np.testing.assert_array_equal(out["inputs"][b, ~span[b]], tokens[b, ~span[b]])
  # Starts are uniform over the n - k + 1 possible ones: on average in the middle.
  has = k > 0
  starts = np.array([np.flatnonzero(s)[0] for s in span[has]])
  relative = (starts + 0.5) / (n[has] - k[has] + 1)  # uniform over (0, 1) in the limit
  assert abs(relative.mean() - 0.5) < 0.05, relative.mean()


def test_moc_masks_real_regions_at_the_rate_and_zeroes_their_features():
  rng = np.random.default_rng(0)
  region_mask = rng.random((B, 16)) < 0.7
  features = rng.normal(size=(B, 16, 6)).astype(np.float32) * region_mask[..., None]
  batch = {"region_mask": region_mask, "region_features": features}
  masked, chosen = jax.jit(moc.mask_regions, static_argnums=2)(
      jax.random.PRNGKey(5), batch, 0.15)
  chosen = np.asarray(chosen)
  assert not (chosen & ~region_mask).any()
  assert abs(chosen.sum() / region_mask.sum() - 0.15) < 0.015
  got = np.asarray(masked["region_features"])
  assert not got[chosen].any()
  np.testing.assert_array_equal(got[~chosen], features[~chosen])
