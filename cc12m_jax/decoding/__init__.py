"""Beam search, greedy decoding and sampling (see docs/decoding.md)."""
from cc12m_jax.decoding.beam_search import beam_search, length_penalty
from cc12m_jax.decoding.captioner_decode import (all_captions, best_captions,
                                                 make_decode_fn)
from cc12m_jax.decoding.sampling import greedy_search, sample
