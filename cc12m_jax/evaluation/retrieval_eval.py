"""Zero-shot and fine-tuned image retrieval with a trained dual encoder.

  eval source (feature records) --encode_image, in batches--> gallery [N, P]
  captions (Karpathy JSON or the records' own) --tokenize--> [M, L]
        --encode_text, in batches--> queries [M, P]
  retrieval.retrieval_metrics(gallery, queries, caption -> image)
        --> image_retrieval/R@{1,5,10} (the paper's Table 8), text_retrieval/R@{1,5,10}

Every image of the eval source is encoded exactly once (the eval iterator
pads the last batch; padding rows are dropped by `example_mask`). Captions
come from `config.eval.references` (a Karpathy-split JSON such as
`<data_dir>/flickr/dataset_flickr30k.json`) joined to the records by image
id; with no references, each record's own captions are the queries.

`evaluate(config, workdir)` is the 'evaluate' mode for objective 'vlm':
  * zero-shot: `eval.checkpoint_dir` = a pre-training workdir ('' = workdir),
    its latest checkpoint (or `eval.checkpoint_step`) evaluated as is on
    `data.eval_sources` (e.g. flickr_test);
  * fine-tuned: `eval.checkpoint_dir` = the Flickr fine-tuning workdir and
    `eval.selection_metric` = 'image_retrieval/R@1': with
    `eval.checkpoint_step` = -1 every kept checkpoint is scored on the FIRST
    eval source (flickr_val), the best step (`eval.selection_mode` max) is
    kept, and all eval sources (flickr_val, flickr_test) are reported for it.
The result is written to `<workdir>/retrieval_<step>.json` and returned.
"""
from __future__ import annotations

import json
import logging
from typing import Any, Iterable, Mapping, Sequence

import jax
import ml_collections
import numpy as np
from etils import epath
from jax.experimental import multihost_utils
from jax.sharding import Mesh, NamedSharding

from cc12m_jax import sharding
from cc12m_jax.evaluation import flickr, retrieval

# Eval source name suffix -> Karpathy split.
_SPLIT_OF_SOURCE = {"train": "train", "val": "val", "test": "test"}


def _to_host(x: jax.Array) -> np.ndarray:
  """A global (possibly multi-host) array as one host numpy array."""
  if jax.process_count() > 1:
    return np.asarray(multihost_utils.process_allgather(x, tiled=True))
  return np.asarray(x)


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
      image_keys = {k: v for k, v in batch.items()
                    if k not in ("decoder_inputs", "decoder_targets")}
      vectors = _to_host(encode(params, image_keys))  # [B, P]
      mask = _to_host(batch["example_mask"]).astype(bool)  # [B]
      index = _to_host(batch["example_index"])[mask]  # [b]
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
  return np.concatenate([_to_host(v)[:n] for v, n in outputs]).astype(np.float32)


def queries_from_references(references: str, split: str, record_ids: Sequence[str]
                            ) -> tuple[list[str], np.ndarray]:
  """(captions, caption -> record position) from a Karpathy JSON split."""
  images = flickr.load_karpathy_json(references, split)
  joined = flickr.join_by_image_id(images, record_ids, strict=True)
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


def split_of_source(source: str) -> str:
  """'flickr_test' -> 'test' (the Karpathy split that a source holds)."""
  suffix = source.rsplit("_", 1)[-1]
  if suffix not in _SPLIT_OF_SOURCE:
    raise ValueError(f"eval source {source!r}: cannot tell its Karpathy split (expected a "
                     f"name ending in one of {sorted(_SPLIT_OF_SOURCE)})")
  return _SPLIT_OF_SOURCE[suffix]


def evaluate_source(config: ml_collections.ConfigDict, model, params: Any, mesh: Mesh,
                    source: str, tokenizer) -> dict[str, float]:
  """Retrieval metrics of one eval source (see module docstring)."""
  from cc12m_jax.data.eval_pipeline import make_eval_iterator  # pylint: disable=g-import-not-at-top
  eval_iter = make_eval_iterator(config.data, source, sharding.batch_sharding(mesh))
  examples = eval_iter.examples
  images = encode_images(model, params, eval_iter, len(examples), mesh)  # [N, P]
  record_ids = [ex.image_id for ex in examples]
  if len(set(record_ids)) != len(record_ids):
    raise ValueError(f"eval source {source!r} repeats image ids: each image must be one "
                     "gallery item")
  if config.eval.references:
    captions, owner = queries_from_references(config.eval.references, split_of_source(source),
                                              record_ids)
  else:
    captions, owner = queries_from_records([ex.captions for ex in examples])
  _, targets = tokenizer.encode_captions(captions, config.data.max_caption_length)  # [M, L]
  texts = encode_texts(model, params, np.asarray(targets, np.int32), mesh,
                       config.data.eval_global_batch_size)  # [M, P]
  metrics = retrieval.retrieval_metrics(images, texts, owner, mesh=mesh)
  metrics["num_images"] = float(len(examples))
  skipped = getattr(eval_iter, "skip_counts", lambda: {})()
  for reason, count in skipped.items():
    metrics[f"skipped/{reason}"] = float(count)
  return metrics


def evaluate(config: ml_collections.ConfigDict, workdir: str) -> dict[str, Any]:
  """'evaluate' mode for objective 'vlm' (see module docstring)."""
  # pylint: disable=g-import-not-at-top
  from cc12m_jax.data import pipeline
  from cc12m_jax.data.text.tokenizer import SubwordTokenizer
  from cc12m_jax.evaluation import selection
  from cc12m_jax.train import checkpointing, trainer

  if config.train.objective != "vlm":
    raise ValueError(f"config.train.objective={config.train.objective!r}: retrieval evaluation "
                     "needs a 'vlm' dual encoder")
  sources = [s.strip() for s in config.data.eval_sources.split(",") if s.strip()]
  if not sources:
    raise ValueError("config.data.eval_sources names no source to evaluate")
  metric, mode = config.eval.selection_metric, config.eval.selection_mode
  if mode not in selection.MODES:
    raise ValueError(f"config.eval.selection_mode={mode!r}: use one of {selection.MODES}")
  checkpoint_dir = config.eval.checkpoint_dir or workdir
  steps = checkpointing.saved_steps(checkpoint_dir, key="config.eval.checkpoint_dir")
  setup = trainer.Setup(config)
  tokenizer = SubwordTokenizer(pipeline.vocab_path(config.data))

  def load(step: int):
    # Checks every parameter's shape against the dual encoder first.
    params, _ = checkpointing.load_pretrained_params(
        checkpoint_dir, step, setup.abstract_params, setup.param_shardings,
        key="config.eval.checkpoint_dir", step_key="config.eval.checkpoint_step")
    return params

  if config.eval.checkpoint_step >= 0:
    if config.eval.checkpoint_step not in steps:
      raise ValueError(f"config.eval.checkpoint_step={config.eval.checkpoint_step} not in "
                       f"{checkpoint_dir!r} (has {steps})")
    candidates = [int(config.eval.checkpoint_step)]
  elif metric.startswith(("image_retrieval/", "text_retrieval/")):
    candidates = steps  # fine-tuned: choose the checkpoint on the first source
  else:
    candidates = [steps[-1]]  # zero-shot: the final checkpoint, as is

  selection: dict[int, float] = {}
  if len(candidates) > 1:
    for step in candidates:
      scores = evaluate_source(config, setup.model, load(step), setup.mesh, sources[0], tokenizer)
      if metric not in scores:
        raise ValueError(f"config.eval.selection_metric={metric!r} is not a retrieval metric "
                         f"(have {sorted(scores)})")
      selection[step] = scores[metric]
      logging.info("checkpoint %d: %s %s = %.2f", step, sources[0], metric, selection[step])
    sign = 1.0 if mode == "max" else -1.0
    # Best score; ties go to the earlier step (less fine-tuning).
    best = max(candidates, key=lambda s: (sign * selection[s], -s))
  else:
    best = candidates[0]

  params = load(best)
  result: dict[str, Any] = {"checkpoint_dir": str(checkpoint_dir), "step": best,
                            "selection_source": sources[0] if selection else None,
                            "selection": {str(k): v for k, v in selection.items()},
                            "sources": {}}
  for source in sources:
    metrics = evaluate_source(config, setup.model, params, setup.mesh, source, tokenizer)
    result["sources"][source] = metrics
    logging.info("%s step %d: %s", source, best,
                 ", ".join(f"{k} {v:.2f}" for k, v in sorted(metrics.items())))
  if jax.process_index() == 0:
    out = epath.Path(workdir)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"retrieval_{best}.json").write_text(json.dumps(result, indent=2, sort_keys=True))
  return result


def main(argv: Sequence[str]) -> None:
  """`python -m cc12m_jax.evaluation.retrieval_eval --config=... --workdir=...`."""
  from absl import app  # pylint: disable=g-import-not-at-top
  from cc12m_jax.train import validation  # pylint: disable=g-import-not-at-top
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  config = _FLAGS["config"].value
  validation.validate(config)
  result = evaluate(config, _FLAGS["workdir"].value)
  print(json.dumps(result, indent=2, sort_keys=True))


_FLAGS: dict[str, Any] = {}

if __name__ == "__main__":
  from absl import app, flags  # pylint: disable=g-import-not-at-top
  from ml_collections import config_flags  # pylint: disable=g-import-not-at-top
  _FLAGS["config"] = config_flags.DEFINE_config_file("config", None, "configs/*.py file.",
                                                     lock_config=True)
  _FLAGS["workdir"] = flags.DEFINE_string("workdir", None, "Output (and default checkpoint) dir.")
  flags.mark_flags_as_required(["config", "workdir"])
  from cc12m_jax import config_check  # pylint: disable=g-import-not-at-top
  app.run(main, flags_parser=config_check.parse_flags)
