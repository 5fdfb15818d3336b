"""Greedy decoding and sampling."""
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from cc12m_jax.decoding import beam_search as bs
from cc12m_jax.decoding import sampling
from decoding_toys import BOS, EOS, PAD, RnnToy


def greedy(toy, batch, max_len):
  fn = jax.jit(functools.partial(sampling.greedy_search, batch_size=batch,
                                 tokens_to_logits=toy.tokens_to_logits,
                                 max_decode_len=max_len))
  seqs, logp = fn(toy.init_cache(1))
  return np.asarray(seqs), np.asarray(logp)


def numpy_greedy(toy, b, max_len):
  seq = []
  while len(seq) < max_len and (not seq or seq[-1] != EOS):
    seq.append(max(range(toy.out.shape[1]),
                   key=lambda t: toy.score_sequence(b, seq + [t])))
  return seq


def test_greedy_matches_step_by_step_argmax():
  toy = RnnToy.create(seed=21, vocab=8, hidden=8, batch=3, eos_bias=1.0)
  seqs, logp = greedy(toy, 3, 7)
  for b in range(3):
    ref = numpy_greedy(toy, b, 7)
    assert list(seqs[b, :len(ref)]) == ref
    assert np.all(seqs[b, len(ref):] == 0)
    np.testing.assert_allclose(logp[b], toy.score_sequence(b, ref), rtol=1e-5)


@pytest.mark.parametrize("alpha", [0.0, 0.6])
def test_greedy_equals_beam_width_one(alpha):
  # Without an early EOS both follow the arg-max path to max length, exactly.
  toy = RnnToy.create(seed=22, vocab=9, hidden=8, batch=4, eos_bias=-40.0)
  g_seqs, g_logp = greedy(toy, 4, 6)
  b_seqs, b_scores = jax.jit(functools.partial(
      bs.beam_search, batch_size=4, tokens_to_logits=toy.tokens_to_logits,
      beam_size=1, alpha=alpha, max_decode_len=6))(toy.init_cache(1))
  np.testing.assert_array_equal(np.asarray(b_seqs)[:, 0], g_seqs)
  np.testing.assert_allclose(np.asarray(b_scores)[:, 0],
                             g_logp / ((5 + 6) / 6) ** alpha, rtol=1e-5)


def test_beam_width_one_with_eos_is_best_stop_on_greedy_path():
  # With EOS allowed, width 1 keeps the arg-max non-EOS path and, at every
  # step, the option of stopping there; with alpha=0 it returns the most
  # likely of those stops, which is the greedy caption whenever greedy ends
  # on its own arg-max EOS no later than any better stop.
  toy = RnnToy.create(seed=23, vocab=7, hidden=8, batch=6, eos_bias=1.5)
  g_seqs, _ = greedy(toy, 6, 8)
  b_seqs, b_scores = jax.jit(functools.partial(
      bs.beam_search, batch_size=6, tokens_to_logits=toy.tokens_to_logits,
      beam_size=1, alpha=0.0, max_decode_len=8))(toy.init_cache(1))
  for b in range(6):
    g = [t for t in g_seqs[b] if t]
    path = [t for t in g if t != EOS]
    stops = [path[:i] + [EOS] for i in range(min(len(path) + 1, 8))]
    if len(path) == 8:
      stops.append(path)  # finished by truncation
    best = max(stops, key=lambda c: toy.score_sequence(b, c))
    got = [t for t in np.asarray(b_seqs)[b, 0] if t]
    assert got == best
    np.testing.assert_allclose(b_scores[b, 0], toy.score_sequence(b, best),
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kw", [dict(top_k=1), dict(top_p=1e-4),
                                dict(top_k=1, temperature=3.0)])
def test_sampling_with_single_candidate_equals_greedy(kw):
  toy = RnnToy.create(seed=24, vocab=9, hidden=8, batch=4, eos_bias=1.0)
  g_seqs, g_logp = greedy(toy, 4, 7)
  s_seqs, s_logp = jax.jit(functools.partial(
      sampling.sample, batch_size=4, tokens_to_logits=toy.tokens_to_logits,
      max_decode_len=7, **kw))(toy.init_cache(1), rng=jax.random.key(0))
  np.testing.assert_array_equal(np.asarray(s_seqs), g_seqs)
  np.testing.assert_allclose(np.asarray(s_logp), g_logp, rtol=1e-5)


def reference_distribution(logits, temperature=1.0, top_k=0, top_p=1.0):
  """NumPy: softmax(logits / T) over allowed tokens (not PAD/BOS), then top-k, then nucleus."""
  x = np.asarray(logits, np.float64) / temperature
  x[[PAD, BOS]] = -np.inf
  if top_k:
    x[x < np.sort(x)[::-1][top_k - 1]] = -np.inf
  p = np.exp(x - x.max())
  p /= p.sum()
  if top_p < 1.0:
    order = np.argsort(-p)
    mass_before = np.cumsum(p[order]) - p[order]
    keep = np.zeros_like(p, bool)
    keep[order[mass_before < top_p]] = True  # the smallest set reaching top_p
    p = np.where(keep, p, 0.0)
    p /= p.sum()
  return p


FIXED_LOGITS = np.array([0.3, -0.2, 1.0, 2.0, 0.5, -1.0, 1.5, 0.2], np.float32)
SAMPLES = 40_000


@pytest.mark.parametrize("kw", [dict(temperature=1.0), dict(temperature=0.5),
                                dict(temperature=2.0), dict(temperature=2.0, top_k=3),
                                dict(temperature=0.7, top_p=0.8),
                                dict(temperature=1.5, top_k=4, top_p=0.7)])
def test_sample_draws_from_the_tempered_filtered_distribution(kw):
  # One step of `sampling.sample` itself on SAMPLES rows that all see
  # FIXED_LOGITS: the token frequencies estimate its distribution.
  def tokens_to_logits(ids, cache, slot_cache):
    logits = jnp.broadcast_to(jnp.asarray(FIXED_LOGITS), (ids.shape[0], FIXED_LOGITS.size))
    return logits, cache, slot_cache

  seqs, _ = jax.jit(functools.partial(
      sampling.sample, tokens_to_logits=tokens_to_logits, batch_size=SAMPLES,
      max_decode_len=1, **kw))(None, rng=jax.random.key(5))
  freq = np.bincount(np.asarray(seqs)[:, 0], minlength=FIXED_LOGITS.size) / SAMPLES
  expected = reference_distribution(FIXED_LOGITS, **kw)
  # Five binomial standard deviations per token, from the sample count.
  tol = 5 * np.sqrt(expected * (1 - expected) / SAMPLES)
  np.testing.assert_array_less(np.abs(freq - expected), tol + 1e-12)
  # Filtered-out tokens (and PAD, BOS) are never drawn.
  assert np.all(freq[expected == 0] == 0)
  # The check can tell this distribution from the untempered, unfiltered one.
  if kw != dict(temperature=1.0):
    assert np.any(np.abs(reference_distribution(FIXED_LOGITS) - expected) > 3 * tol)


def test_nucleus_keeps_smallest_set_reaching_p():
  probs = np.array([0.5, 0.25, 0.15, 0.1])
  logits = jnp.log(jnp.asarray(probs))[None]
  kept = lambda p: np.asarray(sampling.filter_logits(logits, top_p=p)[0]
                              > bs.NEG_INF / 2)
  np.testing.assert_array_equal(kept(0.5), [1, 0, 0, 0])
  np.testing.assert_array_equal(kept(0.6), [1, 1, 0, 0])
  np.testing.assert_array_equal(kept(0.9), [1, 1, 1, 0])
  np.testing.assert_array_equal(kept(1.0), [1, 1, 1, 1])


def test_sampling_respects_max_len_and_eos():
  toy = RnnToy.create(seed=25, vocab=8, hidden=8, batch=16, eos_bias=0.5)
  seqs, logp = jax.jit(functools.partial(
      sampling.sample, batch_size=16, tokens_to_logits=toy.tokens_to_logits,
      max_decode_len=5))(toy.init_cache(1), rng=jax.random.key(3))
  seqs = np.asarray(seqs)
  assert seqs.shape == (16, 5)
  for b, seq in enumerate(seqs):
    body = list(seq[:list(seq).index(EOS) + 1]) if EOS in seq else list(seq)
    assert all(t not in (0, 1) for t in body)
    assert np.all(seq[len(body):] == 0)
    np.testing.assert_allclose(logp[b], toy.score_sequence(b, body),
                               rtol=1e-4)


def test_bad_sampling_settings_raise():
  toy = RnnToy.create(seed=0, vocab=5, hidden=2, batch=1)
  for kw, name in [(dict(temperature=0.0), "temperature"),
                   (dict(top_k=-1), "top_k"), (dict(top_p=0.0), "top_p")]:
    with pytest.raises(ValueError, match=name):
      sampling.sample(toy.init_cache(1), toy.tokens_to_logits, 1,
                      jax.random.key(0), **kw)
