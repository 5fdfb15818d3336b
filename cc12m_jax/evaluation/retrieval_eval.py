"""The retrieval evaluator: zero-shot and fine-tuned retrieval with a dual encoder.

  eval source (feature records) --encode_image, in batches--> gallery [N, P]
  captions (Karpathy JSON or the records' own) --tokenize--> [M, L]
        --encode_text, in batches--> queries [M, P]
  retrieval.retrieval_metrics(gallery, queries, caption -> image)
        --> image_retrieval/R@{1,5,10} (the paper's Table 8), text_retrieval/R@{1,5,10}

retrieval.json also holds, for every image-retrieval query (caption), the
image it describes and the 0-based rank of that image in the query's top 10
(-1: not in it), so a paired bootstrap can resample images
(cc12m_jax/experiments/bootstrap.py); the fraction of ranks below K is R@K.

Every image of the eval source is encoded exactly once (the eval iterator
pads the last batch; padding rows are dropped by `example_mask`). Captions
come from `config.eval.references` (a Karpathy-split JSON such as
`<data_dir>/flickr/dataset_flickr30k.json`) joined to the records by image
id; with no references, each record's own captions are the queries.

`RetrievalEvaluator` is the 'retrieval' entry of evaluation/registry.py;
checkpoints are chosen by the evaluate mode like any other evaluator's
(cc12m_jax/evaluation/modes.py, config.eval.select_checkpoint).
"""
from __future__ import annotations

import json
import logging
from typing import Any, Iterable, Mapping, Sequence

import jax
import ml_collections
import numpy as np
from etils import epath
from jax.sharding import Mesh, NamedSharding

from cc12m_jax import sharding
from cc12m_jax.core import evaluator as evaluator_lib
from cc12m_jax.core.run_setup import RunSetup
from cc12m_jax.data import batch_spec, eval_pipeline, karpathy
from cc12m_jax.evaluation import retrieval



def _jitted(model, method_name: str):
  """jit of `model.<method_name>(x, train=False)` with the given params."""
  method = getattr(type(model), method_name)
  return jax.jit(lambda params, x: model.apply({"params": params}, x, train=False,
                                               method=method))


def encode_images(model, params: Any, batches: Iterable[Mapping[str, Any]],
                  num_examples: int, mesh: Mesh) -> np.ndarray:
  """Image vectors f32 [num_examples, P], row i = example_index i.

  `batches` are eval batches (global arrays) with `example_mask` and
  `example_index`; each example must appear exactly once.
  """
  encode = _jitted(model, "encode_image")
  out: np.ndarray | None = None
  seen = np.zeros((num_examples,), bool)
  with sharding.activation_rules(mesh):
    for batch in batches:
      image_keys = {k: batch[k] for k in batch_spec.IMAGE_KEYS}
      vectors = evaluator_lib.to_host(encode(params, image_keys))  # [B, P]
      mask = evaluator_lib.to_host(batch["example_mask"]).astype(bool)  # [B]
      index = evaluator_lib.to_host(batch["example_index"])[mask]  # [b]
      if out is None:
        out = np.zeros((num_examples, vectors.shape[1]), np.float32)
      if index.size and (index.max() >= num_examples or seen[index].any()):
        raise ValueError(f"eval batch has example_index {index.tolist()[:8]}... out of range "
                         f"or repeated (eval set has {num_examples} examples)")
      out[index] = vectors[mask]
      seen[index] = True
  if out is None or not seen.all():
    missing = np.flatnonzero(~seen)
    raise ValueError(f"{missing.size} eval example(s) never arrived (first {missing[:5].tolist()})")
  return out


def encode_texts(model, params: Any, tokens: np.ndarray, mesh: Mesh,
                 batch_size: int) -> np.ndarray:
  """Text vectors f32 [M, P] of token rows i32 [M, L] (y1 .. yn EOS, 0-padded)."""
  encode = _jitted(model, "encode_text")
  shards = sharding.batch_size_per_shard(mesh)
  batch_size = -(-max(batch_size, 1) // shards) * shards
  batch_sharding: NamedSharding = sharding.batch_sharding(mesh)
  outputs = []
  with sharding.activation_rules(mesh):
    for start in range(0, tokens.shape[0], batch_size):
      block = tokens[start:start + batch_size]  # [<=b, L]
      real = block.shape[0]
      block = np.pad(block, ((0, batch_size - real), (0, 0)))  # one compiled shape
      block = jax.make_array_from_callback(block.shape, batch_sharding, lambda idx, b=block: b[idx])
      outputs.append((encode(params, block), real))
  return np.concatenate([evaluator_lib.to_host(v)[:n]
                         for v, n in outputs]).astype(np.float32)


def queries_from_references(references: str, split: str, record_ids: Sequence[str]
                            ) -> tuple[list[str], np.ndarray]:
  """(captions, caption -> record position) from a Karpathy JSON split."""
  images = karpathy.load_karpathy_json(references, split)
  joined = karpathy.join_by_image_id(images, record_ids, strict=True)
  captions, owner = [], []
  for image, position in zip(joined.images, joined.record_positions):
    captions.extend(image.captions)
    owner.extend([position] * len(image.captions))
  return captions, np.asarray(owner, np.int64)


def queries_from_records(record_captions: Sequence[Sequence[str]]) -> tuple[list[str], np.ndarray]:
  """(captions, caption -> record position) from each record's own captions."""
  captions, owner = [], []
  for position, caps in enumerate(record_captions):
    if not caps:
      raise ValueError(f"eval example {position} has no caption to use as a query")
    captions.extend(caps)
    owner.extend([position] * len(caps))
  return captions, np.asarray(owner, np.int64)


def metric_names(config: ml_collections.ConfigDict) -> set[str]:  # pylint: disable=unused-argument
  """Every metric name a RetrievalEvaluator's result can hold."""
  names = {f"{d}/R@{k}" for d in ("image_retrieval", "text_retrieval")
           for k in retrieval.DEFAULT_KS}
  return names | {"image_retrieval/num_queries", "text_retrieval/num_queries", "num_images"}


def first_hit_ranks(top_index: np.ndarray, owner: np.ndarray) -> np.ndarray:
  """i64 [Q]: the 0-based position of each query's own image in its ranking
  `top_index` [Q, k] (gallery indices, best first), -1 when it is not there."""
  hits = np.asarray(top_index) == np.asarray(owner)[:, None]  # [Q, k]
  return np.where(hits.any(axis=1), hits.argmax(axis=1), -1).astype(np.int64)


class RetrievalResult(evaluator_lib.EvalResult):
  """Recall@K of one eval source (percent), with skip counts, and each image-
  retrieval query's image id and first-hit rank (`per_query`)."""

  def __init__(self, source: str, metrics: dict[str, float],
               per_query: dict[str, list] | None = None):
    self.source, self.metrics = source, metrics
    self.per_query = per_query or {}

  def write(self, directory: str) -> dict[str, str]:
    path = epath.Path(directory) / "retrieval.json"
    tmp = epath.Path(directory) / "retrieval.json.tmp"
    tmp.write_text(json.dumps({"source": self.source, "metrics": self.metrics,
                               "per_query": {"image_retrieval": self.per_query}},
                              indent=2, sort_keys=True))
    tmp.rename(path)
    return {"retrieval": str(path)}

  def summary(self, num_examples: int) -> str:  # pylint: disable=unused-argument
    return "\n".join(f"  {k}: {v:.2f}" for k, v in sorted(self.metrics.items()))


class RetrievalEvaluator:
  """Image and text retrieval over one eval source; `run(params)` at each evaluation.

  The gallery is every image of the source; the queries are the captions of
  config.eval.references (a Karpathy JSON, split from the source's name) or,
  when that is '', each record's own captions. Queries are tokenized once.
  """

  def __init__(self, config: ml_collections.ConfigDict, setup: RunSetup, source: str):
    self.source = source
    self.model, self.mesh = setup.model, setup.mesh
    self.eval_iterator = eval_pipeline.make_eval_iterator(config.data, source,
                                                          setup.batch_sharding)
    examples = self.eval_iterator.examples
    record_ids = [ex.image_id for ex in examples]
    if len(set(record_ids)) != len(record_ids):
      raise ValueError(f"eval source {source!r} repeats image ids: each image must be one "
                       "gallery item")
    if config.eval.references:
      captions, self.owner = queries_from_references(config.eval.references,
                                                     karpathy.split_of_source(source),
                                                     record_ids)
    else:
      captions, self.owner = queries_from_records([ex.captions for ex in examples])
    _, targets = self.eval_iterator.tokenizer.encode_captions(
        captions, config.data.max_caption_length)  # [M, L]
    self.query_tokens = np.asarray(targets, np.int32)
    self.text_batch_size = config.data.eval_global_batch_size

  def run(self, params: Any) -> RetrievalResult:
    examples = self.eval_iterator.examples
    images = encode_images(self.model, params, self.eval_iterator, len(examples),
                           self.mesh)  # [N, P]
    texts = encode_texts(self.model, params, self.query_tokens, self.mesh,
                         self.text_batch_size)  # [M, P]
    metrics = retrieval.retrieval_metrics(images, texts, self.owner, mesh=self.mesh)
    # The caption -> image ranking once more, kept per query: the same call
    # as inside retrieval_metrics (same ties), a small cost next to encoding.
    _, top = retrieval.top_k_chunked(texts, images, min(max(retrieval.DEFAULT_KS), len(examples)),
                                     mesh=self.mesh)
    per_query = {"image_id": [examples[i].image_id for i in self.owner],
                 "rank": first_hit_ranks(top, self.owner).tolist()}
    metrics["num_images"] = float(len(examples))
    for reason, count in self.eval_iterator.skip_counts().items():
      metrics[f"skipped/{reason}"] = float(count)
    logging.info("%s: %s", self.source,
                 ", ".join(f"{k} {v:.2f}" for k, v in sorted(metrics.items())))
    return RetrievalResult(self.source, metrics, per_query)
