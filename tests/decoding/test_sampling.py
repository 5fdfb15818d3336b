"""Greedy decoding and sampling."""
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from cc12m_jax.decoding import beam_search as bs
from cc12m_jax.decoding import sampling
from decoding_toys import EOS, RnnToy


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


def test_sampling_frequencies_follow_tempered_filtered_distribution():
  logits = jnp.array([[0.0, -9.0, 1.0, 2.0, 0.5, -1.0]])
  n = 20000
  filtered = sampling.filter_logits(logits, temperature=2.0, top_k=3)
  probs = np.asarray(jax.nn.softmax(filtered[0]))
  assert np.count_nonzero(probs > 1e-9) == 3
  draws = np.asarray(jax.random.categorical(
      jax.random.key(1), jnp.broadcast_to(filtered, (n, 6)), axis=-1))
  freq = np.bincount(draws, minlength=6) / n
  np.testing.assert_allclose(freq, probs, atol=0.015)


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
