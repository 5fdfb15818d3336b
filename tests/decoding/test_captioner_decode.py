"""Decoding glue on the real Captioner (tiny config)."""
import jax
import numpy as np
import pytest

from configs import base
from cc12m_jax.decoding import captioner_decode as cd
from cc12m_jax.models import captioner as captioner_lib
from decoding_toys import BOS, EOS

VOCAB, FEATURES, B = 40, 12, 4


def tiny_captioner():
  cfg = base.model_config()
  cfg.emb_dim, cfg.num_heads, cfg.mlp_dim = 32, 4, 64
  cfg.num_encoder_layers = cfg.num_decoder_layers = 2
  return captioner_lib.Captioner(cfg, VOCAB)


def captioner_batch(batch_size, seed=0):
  rng = np.random.RandomState(seed)
  boxes = np.sort(rng.rand(batch_size, 4, 4), -1).astype(np.float32)
  return {
      "global_feature": rng.normal(size=(batch_size, FEATURES)
                                   ).astype(np.float32),
      "region_features": rng.normal(size=(batch_size, 4, FEATURES)
                                    ).astype(np.float32),
      "region_boxes": np.concatenate([boxes, boxes[..., :1]], -1),
      "region_mask": rng.rand(batch_size, 4) < 0.8,
      "tag_tokens": rng.randint(6, VOCAB, (batch_size, 3, 2)).astype(np.int32),
      "tag_mask": rng.rand(batch_size, 3) < 0.7,
      "tag_scores": rng.rand(batch_size, 3).astype(np.float32),
      "decoder_inputs": rng.randint(6, VOCAB, (batch_size, 7)).astype(np.int32),
  }


@pytest.fixture(scope="module")
def model_and_params():
  model, batch = tiny_captioner(), captioner_batch(B)
  params = jax.jit(lambda r: model.init(r, batch, train=False))(
      jax.random.key(1))["params"]
  # Sharper, more varied distributions than the init gives.
  params = jax.tree_util.tree_map(
      lambda p: p * 3.0 if p.ndim == 2 else p, params)
  return model, params, batch


def full_logprobs(model, params, batch, seqs, never=(0, 1)):
  """log p of each token of seqs [N, L] (EOS then PAD) by teacher forcing.

  `never`: ids the search never generates (PAD and BOS; the caller's logits
  hook may forbid more), renormalised away as the search does.
  """
  n, length = seqs.shape
  inputs = np.concatenate([np.ones((n, 1), np.int32), seqs[:, :-1]], 1)
  batch = dict(batch, decoder_inputs=inputs)
  logits = jax.jit(lambda p, b: model.apply({"params": p}, b, train=False))(
      params, batch)                                          # [N, L, V]
  logits = np.asarray(logits, np.float64)
  logits[..., list(never)] = -np.inf
  logp = logits - np.logaddexp.reduce(logits, axis=-1, keepdims=True)
  return np.take_along_axis(logp, seqs[..., None], -1)[..., 0]


BEAM_CFG = dict(beam_size=3, max_decode_len=6, alpha=0.6)


@pytest.fixture(scope="module")
def beam_output(model_and_params):
  model, params, batch = model_and_params
  cfg = base.decode_config()
  cfg.update(BEAM_CFG)
  out = cd.make_decode_fn(model, cfg)(params, batch, jax.random.key(0))
  return np.asarray(out["tokens"]), np.asarray(out["scores"])


def test_beam_hypotheses_scores_match_teacher_forced_full_decoder(
    model_and_params, beam_output):
  # Checks the cache end to end: every step's logits come from the cached
  # decoder, gathered along surviving beams, and must equal the full
  # decoder's on the same prefix. (Step-by-step cache == full-decoder logits
  # for the Captioner itself: tests/models/test_captioner.py.)
  model, params, batch = model_and_params
  tokens, scores = beam_output
  k, length = BEAM_CFG["beam_size"], BEAM_CFG["max_decode_len"]
  assert tokens.shape == (B, k, length) and scores.shape == (B, k)
  assert np.all(np.diff(scores, axis=1) <= 1e-5)
  # Every hypothesis, re-scored by the full (uncached) decoder.
  flat = {key: np.repeat(v, k, 0) for key, v in batch.items()}
  logp = full_logprobs(model, params, flat, tokens.reshape(B * k, length))
  for i, seq in enumerate(tokens.reshape(B * k, length)):
    seq = list(seq)
    n = seq.index(EOS) + 1 if EOS in seq else length
    assert all(t == 0 for t in seq[n:])
    expected = logp[i, :n].sum() / ((5 + n) / 6) ** BEAM_CFG["alpha"]
    np.testing.assert_allclose(scores.reshape(-1)[i], expected, rtol=1e-3,
                               atol=1e-4)


def test_sharded_batch_decodes_like_unsharded(model_and_params, beam_output):
  model, params, batch = model_and_params
  cfg = base.decode_config()
  cfg.update(BEAM_CFG)
  mesh = jax.sharding.Mesh(np.array(jax.devices()[:B]), ("data",))
  spec = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("data"))
  out = cd.make_decode_fn(model, cfg)(params, jax.device_put(batch, spec),
                                      jax.random.key(0))
  assert out["tokens"].sharding.spec[0] == "data"
  np.testing.assert_array_equal(np.asarray(out["tokens"]), beam_output[0])
  np.testing.assert_allclose(np.asarray(out["scores"]), beam_output[1],
                             rtol=1e-5)


@pytest.fixture(scope="module")
def greedy_params(model_and_params):
  # Init key 5, unscaled: the four examples get four different greedy
  # captions within 10 tokens, one of them ending with EOS.
  model, _, batch = model_and_params
  return jax.jit(lambda r: model.init(r, batch, train=False))(jax.random.key(5))["params"]


@pytest.mark.parametrize("max_len,forbid_eos", [(10, False), (40, True)])
def test_greedy_tokens_equal_teacher_forced_argmax(model_and_params, greedy_params, max_len,
                                                   forbid_eos):
  # Reference: each greedy prefix through the full-length (teacher-forced)
  # decoder, arg-max of its last position. The cached step (primed
  # cross-attention, slot-major self-attention) must pick the same token at
  # every step; 40 steps cross the first attention window (32 positions).
  model, _, batch = model_and_params
  params = greedy_params
  cfg = base.decode_config()
  cfg.method, cfg.max_decode_len = "greedy", max_len
  never = (0, BOS, EOS) if forbid_eos else (0, BOS)
  hook = (lambda logits: logits.at[:, EOS].set(-1e9)) if forbid_eos else None
  out = cd.make_decode_fn(model, cfg, logits_hook=hook)(params, batch, jax.random.key(0))
  tokens, scores = np.asarray(out["tokens"])[:, 0], np.asarray(out["scores"])[:, 0]  # [B, L], [B]

  forward = jax.jit(lambda p, b: model.apply({"params": p}, b, train=False))
  inputs = np.zeros((B, max_len), np.int32)  # the prefix, then padding the causal mask hides
  inputs[:, 0] = BOS
  expected = np.zeros((B, max_len), np.int32)
  finished = np.zeros(B, bool)
  for t in range(max_len):
    logits = np.array(forward(params, dict(batch, decoder_inputs=inputs))[:, t])  # [B, V]
    logits[:, list(never)] = -np.inf
    expected[:, t] = np.where(finished, 0, logits.argmax(-1))
    finished |= expected[:, t] == EOS
    if t + 1 < max_len:
      inputs[:, t + 1] = expected[:, t]
  np.testing.assert_array_equal(tokens, expected)
  assert len({tuple(seq) for seq in expected}) == B  # the image matters
  logp = full_logprobs(model, params, batch, expected, never=never)  # [B, L]
  lengths = [list(seq).index(EOS) + 1 if EOS in seq else max_len for seq in expected]
  np.testing.assert_allclose(scores, [logp[b, :n].sum() for b, n in enumerate(lengths)],
                             rtol=1e-3, atol=1e-4)


def test_sampling_logprobs_match_full_decoder(model_and_params):
  # (Greedy shares this code path; greedy == top-k 1 sampling is tested in
  # test_sampling.py.)
  model, params, batch = model_and_params
  cfg = base.decode_config()
  cfg.method, cfg.max_decode_len, cfg.top_k = "sample", 6, 5
  out = cd.make_decode_fn(model, cfg)(params, batch, jax.random.key(3))
  tokens, scores = np.asarray(out["tokens"]), np.asarray(out["scores"])
  assert tokens.shape == (B, 1, 6)
  logp = full_logprobs(model, params, batch, tokens[:, 0])
  for b in range(B):
    seq = list(tokens[b, 0])
    n = seq.index(EOS) + 1 if EOS in seq else 6
    np.testing.assert_allclose(scores[b, 0], logp[b, :n].sum(), rtol=1e-3,
                               atol=1e-4)


def test_bad_decode_config_fails_before_compute():
  cfg = base.decode_config()
  cfg.method = "nucleus"
  with pytest.raises(ValueError, match="config.decode.method"):
    cd.make_decode_fn(tiny_captioner(), cfg)
  cfg = base.decode_config()
  cfg.top_p = 0.0
  with pytest.raises(ValueError, match="config.decode.top_p"):
    cd.make_decode_fn(tiny_captioner(), cfg)


def test_long_beams_across_attention_windows_match_full_decoder(model_and_params):
  # 40 steps cross the first cached-attention window (32 positions): the
  # window switch must keep each beam's history through the ancestor table.
  model, params, batch = model_and_params
  k, length, alpha = 2, 40, 0.6
  cfg = base.decode_config()
  cfg.update(beam_size=k, max_decode_len=length, alpha=alpha)
  forbid_eos = lambda logits: logits.at[:, EOS].set(-1e9)  # every beam runs 40 tokens
  decode = cd.make_decode_fn(model, cfg, logits_hook=forbid_eos)
  out = decode(params, batch, jax.random.key(0))
  tokens, scores = np.asarray(out["tokens"]), np.asarray(out["scores"])
  assert tokens.shape == (B, k, length) and np.all(tokens > EOS)
  # The window switch under a mesh: sharded over the batch, same result.
  mesh = jax.sharding.Mesh(np.array(jax.devices()[:B]), ("data",))
  spec = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("data"))
  sharded = decode(params, jax.device_put(batch, spec), jax.random.key(0))
  np.testing.assert_array_equal(np.asarray(sharded["tokens"]), tokens)
  np.testing.assert_allclose(np.asarray(sharded["scores"]), scores, rtol=1e-5)
  flat = {key: np.repeat(v, k, 0) for key, v in batch.items()}
  logp = full_logprobs(model, params, flat, tokens.reshape(B * k, length), never=(0, 1, EOS))
  expected = logp.sum(1) / ((5 + length) / 6) ** alpha
  np.testing.assert_allclose(scores.reshape(-1), expected, rtol=1e-3, atol=1e-4)
