"""Beam search, greedy decoding and sampling (see docs/decoding.md).

Modules: beam_search (beam_search.beam_search), sampling (greedy_search,
sample), captioner_decode (make_decode_fn, best_captions). Nothing is
re-exported here: a function named like its module would shadow it.
"""
