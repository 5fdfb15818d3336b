"""Beam search against exhaustive enumeration and its edge cases."""
import functools
import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from cc12m_jax.decoding import beam_search as bs
from decoding_toys import EOS, PAD, ChainToy, RnnToy, SlotRnnToy


def all_sequences(vocab: int, max_len: int):
  """Every sequence the search may return: words then EOS, or max_len words."""
  words = [t for t in range(vocab) if t not in (PAD, 1, EOS)]
  for n in range(max_len + 1):
    for body in itertools.product(words, repeat=n):
      if n < max_len:
        yield list(body) + [EOS]
      else:
        yield list(body)


def run_beam(toy, batch, **kw):
  fn = jax.jit(functools.partial(bs.beam_search, batch_size=batch,
                                 tokens_to_logits=toy.tokens_to_logits, **kw))
  seqs, scores = fn(toy.init_cache(kw["beam_size"]))
  return np.asarray(seqs), np.asarray(scores)


def strip(seq):
  seq = list(seq)
  return seq[:seq.index(EOS) + 1] if EOS in seq else [t for t in seq if t]


@pytest.mark.parametrize("alpha", [0.0, 0.6, 2.0])
def test_wide_beam_equals_exhaustive_ranking(alpha):
  vocab, max_len, batch = 5, 3, 3  # words {3, 4}: 15 possible sequences
  toy = RnnToy.create(seed=1, vocab=vocab, hidden=6, batch=batch)
  cands = list(all_sequences(vocab, max_len))
  k = len(cands)
  seqs, scores = run_beam(toy, batch, beam_size=k, alpha=alpha,
                          max_decode_len=max_len)
  assert seqs.shape == (batch, k, max_len)
  for b in range(batch):
    ref = sorted(((toy.score_sequence(b, c) /
                   ((5 + len(c)) / 6) ** alpha, c) for c in cands),
                 key=lambda x: -x[0])
    got = [strip(s) for s in seqs[b]]
    assert got[0] == ref[0][1]
    np.testing.assert_allclose(scores[b], [r[0] for r in ref], rtol=1e-4,
                               atol=1e-4)
    assert sorted(map(tuple, got)) == sorted(map(tuple, cands))


def test_best_sequence_matches_enumeration_with_larger_vocab():
  # 3 words, length 3: 40 sequences; width 27 covers every live prefix.
  vocab, max_len, batch = 6, 3, 2
  toy = RnnToy.create(seed=7, vocab=vocab, hidden=8, batch=batch)
  seqs, scores = run_beam(toy, batch, beam_size=27, alpha=0.6,
                          max_decode_len=max_len)
  for b in range(batch):
    best = max(all_sequences(vocab, max_len),
               key=lambda c: toy.score_sequence(b, c) /
               ((5 + len(c)) / 6) ** 0.6)
    assert strip(seqs[b, 0]) == best


def test_max_len_means_max_generated_tokens():
  # EOS strongly discouraged: the best hypotheses use all max_len positions.
  toy = RnnToy.create(seed=3, vocab=7, hidden=8, batch=2, eos_bias=-50.0)
  seqs, scores = run_beam(toy, 2, beam_size=4, alpha=0.6, max_decode_len=5)
  assert seqs.shape == (2, 4, 5)
  assert np.all(seqs[:, 0] > 2)  # five real tokens, no EOS, no padding
  for b in range(2):
    lp = ((5 + 5) / 6) ** 0.6
    np.testing.assert_allclose(scores[b, 0],
                               toy.score_sequence(b, list(seqs[b, 0])) / lp,
                               rtol=1e-5)


def test_eos_first_gives_empty_caption_and_padding():
  toy = RnnToy.create(seed=3, vocab=7, hidden=8, batch=2, eos_bias=50.0)
  seqs, scores = run_beam(toy, 2, beam_size=3, alpha=0.6, max_decode_len=6)
  np.testing.assert_array_equal(seqs[:, 0], [[EOS, 0, 0, 0, 0, 0]] * 2)
  # Scores are sorted best first, and EOS tokens are followed by PAD only.
  assert np.all(np.diff(scores, axis=1) <= 1e-6)
  for seq in seqs.reshape(-1, 6):
    if EOS in seq:
      assert np.all(seq[list(seq).index(EOS) + 1:] == PAD)


def test_max_len_one():
  toy = RnnToy.create(seed=5, vocab=6, hidden=4, batch=1)
  seqs, scores = run_beam(toy, 1, beam_size=4, alpha=0.6, max_decode_len=1)
  assert seqs.shape == (1, 4, 1)
  ref = sorted(([t] for t in (2, 3, 4, 5)),
               key=lambda c: -toy.score_sequence(0, c))
  assert [list(s) for s in seqs[0]] == ref


def test_never_generates_pad_or_bos():
  toy = RnnToy.create(seed=2, vocab=6, hidden=4, batch=2)
  toy.out[:, [0, 1]] += 100.0  # the model loves PAD and BOS
  seqs, _ = run_beam(toy, 2, beam_size=3, alpha=0.6, max_decode_len=4)
  for seq in seqs.reshape(-1, 4):
    body = strip(seq)
    assert 0 not in body and 1 not in body and len(body) >= 1


def test_batch_elements_decode_independently():
  toy = RnnToy.create(seed=11, vocab=9, hidden=8, batch=4)
  seqs, scores = run_beam(toy, 4, beam_size=3, alpha=0.6, max_decode_len=6)
  one = jax.jit(functools.partial(bs.beam_search, batch_size=1,
                                  tokens_to_logits=toy.tokens_to_logits,
                                  beam_size=3, alpha=0.6, max_decode_len=6))
  for b in range(4):
    s1, sc1 = one({"h": jnp.repeat(jnp.asarray(toy.memory[b:b + 1]), 3, 0)})
    np.testing.assert_array_equal(s1[0], seqs[b])
    np.testing.assert_allclose(sc1[0], scores[b], rtol=1e-5)


def count_steps(tokens_to_logits, steps: list):
  """tokens_to_logits that appends to `steps` each time the search calls it."""
  def counted(ids, cache, slot_cache):
    jax.debug.callback(lambda _: steps.append(1), ids[0, 0])
    return tokens_to_logits(ids, cache, slot_cache)
  return counted


# Words A = 3, B = 4. Width 2 = the number of live prefixes of every length
# (the chains A^n and B^n), so the search never prunes and must return exactly
# the best two of all sequences; the finished set is full after one step, and
# each case stops before max_len = 10. A stop that came too early would miss
# the second best, found at step 2:
#  * alpha = 0: best [B EOS], then [B B EOS]; after one step the finished set
#    holds [B EOS] and [EOS], so stopping once K hypotheses are finished fails;
#  * alpha = 1, 1.5: best [B EOS], then [B B EOS], then [A EOS]; after one step
#    the live A A can still beat [A EOS] only thanks to the longer length's
#    penalty, so a bound using the current length's penalty instead of
#    max_len's stops with [A EOS] second.
EARLY_STOP_CASES = [
    (0.0, {EOS: 0.05, 3: 0.05, 4: 0.9}, {3: 0.05, 4: 0.7}),
    (1.0, {EOS: 0.05, 3: 0.15, 4: 0.8}, {3: 0.4, 4: 0.1}),
    (1.5, {EOS: 0.05, 3: 0.15, 4: 0.8}, {3: 0.4, 4: 0.1}),
]


@pytest.mark.parametrize("alpha,first,stay", EARLY_STOP_CASES)
def test_early_stop_keeps_the_exact_result_of_a_never_pruning_beam(alpha, first, stay):
  k, max_len = 2, 10
  toy = ChainToy.from_probabilities(first, stay)
  steps = []
  fn = jax.jit(functools.partial(
      bs.beam_search, tokens_to_logits=count_steps(toy.tokens_to_logits, steps),
      batch_size=1, beam_size=k, alpha=alpha, max_decode_len=max_len))
  seqs, scores = jax.block_until_ready(fn(toy.init_cache(k)))
  jax.effects_barrier()
  assert 2 < len(steps) < max_len  # it went past the full finished set and stopped early
  ranked = sorted(((toy.score_sequence(0, c) / ((5 + len(c)) / 6) ** alpha, c)
                   for c in toy.sequences(max_len)), key=lambda x: -x[0])[:k]
  assert [strip(s) for s in np.asarray(seqs[0])] == [c for _, c in ranked]
  assert ranked[1][1] == [4, 4, EOS]
  np.testing.assert_allclose(scores[0], [sc for sc, _ in ranked], rtol=1e-5)


def test_slot_cache_is_carried_and_never_reordered():
  # The slot-major toy reads each hypothesis's state through the ancestor
  # table in `cache`: it decodes like the plain toy only if the search
  # reorders `cache` with the beams and leaves `slot_cache` in place.
  batch, k, max_len = 3, 4, 6
  rnn = RnnToy.create(seed=12, vocab=9, hidden=8, batch=batch, eos_bias=-1.0)
  slot_toy = SlotRnnToy(rnn)
  cache, slot_cache = slot_toy.init_state(k, max_len)
  seqs, scores = jax.jit(functools.partial(
      bs.beam_search, tokens_to_logits=slot_toy.tokens_to_logits, batch_size=batch,
      beam_size=k, alpha=0.6, max_decode_len=max_len))(cache, slot_cache=slot_cache)
  ref_seqs, ref_scores = run_beam(rnn, batch, beam_size=k, alpha=0.6,
                                  max_decode_len=max_len)
  np.testing.assert_array_equal(np.asarray(seqs), ref_seqs)
  np.testing.assert_allclose(np.asarray(scores), ref_scores, rtol=1e-5)
  # Beams did change parents along the way (otherwise reordering is untested).
  assert len({tuple(strip(s)[:2]) for s in ref_seqs[0]}) > 1


def test_bad_arguments_raise():
  toy = RnnToy.create(seed=0, vocab=5, hidden=2, batch=1)
  with pytest.raises(ValueError, match="alpha"):
    bs.beam_search(toy.init_cache(2), toy.tokens_to_logits, 1, beam_size=2,
                   alpha=-1.0, max_decode_len=3)
  with pytest.raises(ValueError, match="max_decode_len"):
    bs.beam_search(toy.init_cache(2), toy.tokens_to_logits, 1, beam_size=2,
                   alpha=0.6, max_decode_len=0)


def test_jit_under_data_sharding_matches_single_device():
  devices = np.array(jax.devices()[:4])
  mesh = jax.sharding.Mesh(devices, ("data",))
  spec = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("data"))
  toy = RnnToy.create(seed=8, vocab=7, hidden=8, batch=4)
  cache = jax.device_put(toy.init_cache(2), spec)
  fn = jax.jit(functools.partial(bs.beam_search, batch_size=4,
                                 tokens_to_logits=toy.tokens_to_logits,
                                 beam_size=2, alpha=0.6, max_decode_len=5))
  seqs, scores = fn(cache)
  ref_seqs, ref_scores = run_beam(toy, 4, beam_size=2, alpha=0.6,
                                  max_decode_len=5)
  np.testing.assert_array_equal(np.asarray(seqs), ref_seqs)
  np.testing.assert_allclose(np.asarray(scores), ref_scores, rtol=1e-5)
