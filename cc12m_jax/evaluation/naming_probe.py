"""The naming probe: does the captioner *know* a concept's name, whatever it decodes?

A caption that fails to name a concept may fail for two reasons: the model
never learned the name, or it learned it and the search picked another
caption (a generic alt-text, a hypernym, the fine-tuning data's style). The
captioning evaluator sees only the decoded caption; this evaluator scores
every concept's name at the place a caption names it, by teacher forcing:

  s(image, c) = max_p  log P(name(c) | [BOS] prefix p, image)      p in config.eval.naming_prefixes

summed over the name's word pieces. For each (image, shown concept) pair,
the concept's rank is 1 + the number of concepts the image does not show that
score higher; the pair is named at k when its rank is <= k. The competitors
are every concept of the inventory (config.eval.naming_concepts), so the
probe asks the captioner the closed-vocabulary question a classifier would
answer, on the same parameters the captioning evaluator decodes.

Which concepts an image shows: `<data_dir>/<source>/concepts.json` (the
synthetic world writes it). Metrics per nocaps domain and overall:
naming_R@1, naming_R@5, naming_MRR. Writes ranks.json ({image_id: {concept:
rank}}, which `python -m cc12m_jax.evaluation.long_tail --ranks=...` buckets
by concept frequency), report.json and report.md.

Cost: one decoder pass of length 1 + |prefix| + |name| per image, concept and
prefix (the encoder runs once per image), with the vocabulary projection only
at the name's pieces; concepts go in chunks so that `_ROWS_PER_CHUNK` decoder
rows are live at a time.
"""
from __future__ import annotations

import json
import os
import time
from typing import Any, Mapping, Sequence

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
from absl import logging
from etils import epath

from cc12m_jax.core import evaluator as evaluator_lib
from cc12m_jax.core.run_setup import RunSetup
from cc12m_jax.data import eval_pipeline
from cc12m_jax.data.text import special_tokens
from cc12m_jax.evaluation import long_tail, nocaps

CONCEPTS_FILE = "concepts.json"
# Its key in evaluation/registry.py (config.eval.evaluator).
NAME = "naming"
RANKS_FILE = "ranks.json"
KS = (1, 5)
# Decoder rows (image x candidate) per jitted call: logits are [rows, K, V]
# float32 (K: the longest name's pieces), ~130 MB at rows 2,048, K 4, V 4k.
_ROWS_PER_CHUNK = 2048


def metric_names(config: ml_collections.ConfigDict) -> set[str]:
  """Every metric name a NamingProbeEvaluator's result can hold."""
  del config
  names = [f"naming_R@{k}" for k in KS] + ["naming_MRR"]
  return {f"{group}/{name}" for group in nocaps.DOMAINS + (nocaps.OVERALL,) for name in names}


def parse_prefixes(text: str) -> tuple[str, ...]:
  """config.eval.naming_prefixes: comma-separated; an empty entry is the caption's start."""
  prefixes = tuple(p.strip() for p in text.split(","))
  if len(set(prefixes)) != len(prefixes):
    raise ValueError(f"config.eval.naming_prefixes={text!r}: a prefix is repeated")
  return prefixes


def concepts_spec(config: ml_collections.ConfigDict) -> str:
  """config.eval.naming_concepts, '' meaning the synthetic world of config.synthetic."""
  return (config.eval.naming_concepts or
          f"synthetic:{config.synthetic.num_concepts}:{config.synthetic.seed}")


def candidate_arrays(tokenizer: Any, names: Sequence[str], prefixes: Sequence[str]
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
  """Teacher-forcing arrays of every (prefix, name), prefix-major: row p * N + n.

  Returns decoder inputs i32 [P*N, L] = [BOS] prefix name[:-1], targets
  i32 [P*N, L] = prefix name, and weights f32 [P*N, L], 1 on the name's pieces.
  """
  rows = []
  for prefix in prefixes:
    head = tokenizer.encode(prefix) if prefix else []
    for name in names:
      pieces = tokenizer.encode(name)
      if not pieces:
        raise ValueError(f"concept {name!r}: no word pieces")
      rows.append((head, pieces))
  length = 1 + max(len(h) + len(p) for h, p in rows)
  inputs = np.zeros((len(rows), length), np.int32)
  targets = np.zeros((len(rows), length), np.int32)
  weights = np.zeros((len(rows), length), np.float32)
  for r, (head, pieces) in enumerate(rows):
    y = head + pieces
    inputs[r, :len(y)] = [special_tokens.BOS_ID] + y[:-1]
    targets[r, :len(y)] = y
    weights[r, len(head):len(y)] = 1.0
  return inputs, targets, weights


def ranks_of_pairs(scores: np.ndarray, names: Sequence[str],
                   shown: Sequence[str]) -> dict[str, int]:
  """{concept: rank} of one image's shown concepts given its scores f32 [N].

  Rank 1 + the number of concepts the image does not show that score
  strictly higher: the other shown concepts are not competitors.
  """
  index = {n: i for i, n in enumerate(names)}
  shown_rows = np.array([index[c] for c in shown], np.int64)
  others = np.ones(len(names), bool)
  others[shown_rows] = False
  competitors = np.sort(scores[others])  # [N - |shown|]
  return {c: int(1 + len(competitors) - np.searchsorted(competitors, scores[index[c]],
                                                        side="right"))
          for c in shown}


def summarize(ranks: Mapping[str, Mapping[str, int]], domains: Mapping[str, str]
              ) -> dict[str, dict[str, float]]:
  """{group: {naming_R@k, naming_MRR, pairs}} over (image, concept) pairs, per domain and overall."""
  groups: dict[str, list[int]] = {}
  for image_id, per_concept in ranks.items():
    for group in {domains.get(image_id, ""), nocaps.OVERALL} - {""}:
      groups.setdefault(group, []).extend(per_concept.values())
  out = {}
  for group in [d for d in nocaps.DOMAINS if d in groups] + [nocaps.OVERALL]:
    r = np.asarray(groups.get(group, []), np.float64)
    row = {f"naming_R@{k}": float(np.mean(r <= k)) if r.size else float("nan") for k in KS}
    row["naming_MRR"] = float(np.mean(1.0 / r)) if r.size else float("nan")
    row["pairs"] = int(r.size)
    out[group] = row
  return out


class NamingProbeResult(evaluator_lib.EvalResult):

  def __init__(self, source: str, ranks: dict[str, dict[str, int]],
               scores: dict[str, dict[str, float]], info: dict[str, Any]):
    self.source = source
    self.ranks = ranks
    self.scores = scores
    self.info = info
    self.metrics = {f"{group}/{name}": value for group, row in scores.items()
                    for name, value in row.items() if name != "pairs"}
    # Records of the eval source the probe never saw, by reason.
    self.metrics.update({f"skipped/{reason}": float(count)
                         for reason, count in info["num_skipped"].items()})

  def write(self, directory: str) -> dict[str, str]:
    paths = {"ranks": os.path.join(directory, RANKS_FILE),
             "report": os.path.join(directory, "report.json"),
             "markdown": os.path.join(directory, "report.md")}
    with open(paths["ranks"], "w") as f:
      json.dump(self.ranks, f, indent=1, sort_keys=True)
    with open(paths["report"], "w") as f:
      json.dump({"scores": self.scores, **self.info}, f, indent=1, sort_keys=True)
    with open(paths["markdown"], "w") as f:
      f.write(self.summary(0))
    return paths

  def summary(self, num_examples: int) -> str:
    del num_examples
    lines = [f"Naming probe: rank of each shown concept's name among "
             f"{self.info['num_concepts']} concepts, prefixes {self.info['prefixes']} (x 100)",
             "", "| split | pairs | R@1 | R@5 | MRR |", "|---|---|---|---|---|"]
    for group, row in self.scores.items():
      lines.append(f"| {group} | {row['pairs']} | {100 * row['naming_R@1']:.1f} | "
                   f"{100 * row['naming_R@5']:.1f} | {100 * row['naming_MRR']:.1f} |")
    return "\n".join(lines) + "\n"


def name_positions(targets: np.ndarray, weights: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
  """The name's positions of each candidate row, left-aligned: (at i32 [C, K],
  targets i32 [C, K], weights f32 [C, K]) with K the longest name in pieces;
  padding points at position 0 with weight 0."""
  k = int(weights.sum(1).max())
  at = np.zeros((len(weights), k), np.int32)
  picked = np.zeros((len(weights), k), np.int32)
  mask = np.zeros((len(weights), k), np.float32)
  for r in range(len(weights)):
    where = np.flatnonzero(weights[r])
    at[r, :len(where)] = where
    picked[r, :len(where)] = targets[r, where]
    mask[r, :len(where)] = 1.0
  return at, picked, mask


def _score_fn(model):
  """jit: (params, encoded [B,S,E], mask [B,S], inputs [C,L], at/targets/weights [C,K]) -> [B, C]."""

  def score(params, encoded, encoder_mask, inputs, at, targets, weights):
    b, c = encoded.shape[0], inputs.shape[0]
    encoded = jnp.repeat(encoded, c, axis=0)            # [B*C, S, E]
    encoder_mask = jnp.repeat(encoder_mask, c, axis=0)  # [B*C, S]
    logits = model.apply({"params": params}, jnp.tile(inputs, (b, 1)), encoded, encoder_mask,
                         train=False, at=jnp.tile(at, (b, 1)), method="decode")  # [B*C, K, V]
    logp = jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1)  # [B*C, K, V]
    token_logp = jnp.take_along_axis(logp, jnp.tile(targets, (b, 1))[..., None],
                                     axis=-1)[..., 0]    # [B*C, K]
    return (token_logp * jnp.tile(weights, (b, 1))).sum(-1).reshape(b, c)  # [B, C]

  return jax.jit(score)


class NamingProbeEvaluator:
  """Ranks every concept's name for each eval image (see the module docstring)."""

  def __init__(self, config: ml_collections.ConfigDict, setup: RunSetup, source: str):
    self.source = source
    self.model = setup.model
    self.eval_iterator = eval_pipeline.make_eval_iterator(config.data, source,
                                                          setup.batch_sharding)
    self.prefixes = parse_prefixes(config.eval.naming_prefixes)
    self.concepts_spec = concepts_spec(config)
    self.names = sorted({c.name for c in long_tail.load_concepts(self.concepts_spec)})
    path = epath.Path(config.data.data_dir) / source / CONCEPTS_FILE
    if not path.exists():
      raise FileNotFoundError(f"the naming probe needs {path} ({{image_id: [concepts]}}, which "
                              "the synthetic world writes); real eval sources have none")
    self.image_concepts = {k: sorted(v) for k, v in long_tail.load_image_concepts(str(path)).items()}
    known = set(self.names)
    for image_id, shown in self.image_concepts.items():
      unknown = [c for c in shown if c not in known]
      if unknown:
        raise KeyError(f"{path}: image {image_id!r} shows {unknown}, not among the "
                       f"{len(known)} concepts of {self.concepts_spec!r} "
                       "(config.eval.naming_concepts)")
    self.examples = self.eval_iterator.examples
    missing = [e.image_id for e in self.examples if str(e.image_id) not in self.image_concepts]
    if missing:
      raise KeyError(f"{path} has no concepts for {len(missing)} image(s) of {source!r}, "
                     f"e.g. {missing[:3]}")
    inputs, targets, weights = candidate_arrays(self.eval_iterator.tokenizer, self.names,
                                                self.prefixes)
    global_batch = self.eval_iterator.batch_size * self.eval_iterator.process_count
    chunk = max(1, _ROWS_PER_CHUNK // global_batch)
    pad = -len(inputs) % chunk
    # Padding candidates have weight 0 everywhere and are dropped after scoring.
    self.candidates = [np.pad(a, ((0, pad), (0, 0)))
                       for a in (inputs, *name_positions(targets, weights))]
    self.chunk = chunk
    self.encode_fn = jax.jit(lambda params, batch: self.model.apply(
        {"params": params}, batch, train=False, method="encode"))
    self.score_fn = _score_fn(self.model)

  def image_scores(self, params: Any) -> dict[str, np.ndarray]:
    """{image_id: f32 [N]}: each concept's best log-probability over the prefixes."""
    num_rows = len(self.names) * len(self.prefixes)
    out: dict[str, np.ndarray] = {}
    start = time.perf_counter()
    for step, batch in enumerate(self.eval_iterator):
      if step:
        logging.info("Naming probe, %s: batch %d of %d, %.0fs.", self.source, step,
                     self.eval_iterator.num_steps, time.perf_counter() - start)
      encoded, encoder_mask = self.encode_fn(params, batch)  # [B, S, E], [B, S]
      chunks = [self.score_fn(params, encoded, encoder_mask,
                              *(a[i:i + self.chunk] for a in self.candidates))
                for i in range(0, len(self.candidates[0]), self.chunk)]
      scores = np.concatenate([evaluator_lib.to_host(c) for c in chunks], axis=1)
      scores = scores[:, :num_rows].reshape(-1, len(self.prefixes), len(self.names)).max(1)
      index = evaluator_lib.to_host(batch["example_index"])  # [B]
      mask = evaluator_lib.to_host(batch["example_mask"])    # [B]
      for row in np.flatnonzero(mask):
        image_id = str(self.examples[int(index[row])].image_id)
        if image_id in out:
          raise ValueError(f"image {image_id!r} was scored twice: the eval iterator repeated it")
        out[image_id] = scores[row]
    if len(out) != len(self.examples):
      raise ValueError(f"{len(self.examples) - len(out)} of {len(self.examples)} eval examples "
                       "were never scored: the eval iterator skipped examples")
    return out

  def run(self, params: Any) -> NamingProbeResult:
    start = time.perf_counter()
    scores = self.image_scores(params)
    ranks = {image_id: ranks_of_pairs(s, self.names, self.image_concepts[image_id])
             for image_id, s in scores.items()}
    domains = {str(e.image_id): e.domain for e in self.examples}
    seconds = time.perf_counter() - start
    logging.info("Naming probe on %d images of %s: %.1fs.", len(ranks), self.source, seconds)
    info = {"concepts": self.concepts_spec, "num_concepts": len(self.names),
            "prefixes": list(self.prefixes), "seconds": seconds,
            "num_skipped": self.eval_iterator.skip_counts()}
    return NamingProbeResult(self.source, ranks, summarize(ranks, domains), info)
