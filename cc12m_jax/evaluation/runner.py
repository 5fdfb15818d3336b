"""Modes `evaluate` and `predict` of cc12m_jax.main.

  evaluate  (objective 'vlm': retrieval Recall@K, see retrieval_eval.)
            decode every config.data.eval_sources set with the checkpoint in
            config.eval.checkpoint_dir ('' = workdir), score it (nocaps
            protocol), write <workdir>/eval/<source>/step_<n>/
            {predictions.json, report.json, report.md}, log the scores to
            the workdir's metric writer and print the table with examples.
  predict   decode only and write predictions.json (no references needed).
"""
from __future__ import annotations

import os
from typing import Any

import jax
import ml_collections
from absl import logging
from clu import metric_writers

from cc12m_jax.evaluation import captioner_eval, nocaps, report as report_lib


def metrics_from_config(eval_cfg: ml_collections.ConfigDict) -> tuple[str, ...]:
  from cc12m_jax.evaluation.caption_metrics import ALL_METRICS  # pylint: disable=g-import-not-at-top
  names = tuple(m.strip() for m in eval_cfg.metrics.split(",") if m.strip())
  bad = [m for m in names if m not in ALL_METRICS]
  if bad or not names:
    raise ValueError(f"config.eval.metrics={eval_cfg.metrics!r}: unknown "
                     f"{bad}; known {ALL_METRICS}")
  return names


def eval_sources(config: ml_collections.ConfigDict) -> list[str]:
  sources = [s.strip() for s in config.data.eval_sources.split(",")
             if s.strip()]
  if not sources:
    raise ValueError("config.data.eval_sources is empty")
  if config.eval.references and len(sources) > 1:
    raise ValueError(f"config.eval.references={config.eval.references!r} "
                     f"names one file but config.data.eval_sources has "
                     f"{len(sources)} sources {sources}")
  return sources


def load_checkpoint_params(config: ml_collections.ConfigDict, workdir: str,
                           setup: Any) -> tuple[Any, int]:
  from cc12m_jax.train import checkpointing  # pylint: disable=g-import-not-at-top
  directory = config.eval.checkpoint_dir or workdir
  params, step = checkpointing.load_pretrained_params(
      directory, config.eval.checkpoint_step, setup.abstract_params,
      setup.param_shardings, key="config.eval.checkpoint_dir",
      step_key="config.eval.checkpoint_step")
  logging.info("Decoding with parameters of %s, step %d.", directory, step)
  return params, step


def _setup(config):
  from cc12m_jax.train.trainer import Setup  # pylint: disable=g-import-not-at-top
  return Setup(config)


def make_evaluators(config: ml_collections.ConfigDict, setup: Any
                    ) -> dict[str, captioner_eval.CaptionEvaluator]:
  """One evaluator per eval source (for modes evaluate and periodic eval)."""
  from cc12m_jax.data.eval_pipeline import make_eval_iterator  # pylint: disable=g-import-not-at-top
  metrics = metrics_from_config(config.eval)
  evaluators = {}
  for source in eval_sources(config):
    iterator = make_eval_iterator(config.data, source, setup.batch_sharding)
    references = (nocaps.load_references(config.eval.references)
                  if config.eval.references else None)
    evaluators[source] = captioner_eval.CaptionEvaluator(
        setup.model, config.decode, iterator, iterator.tokenizer, references,
        metrics=metrics)
  return evaluators


def write_and_log(result: captioner_eval.CaptionEvalResult, source: str,
                  step: int, workdir: str, writer=None,
                  num_examples: int = 5) -> dict[str, str]:
  """Writes the three files, logs flat scores, prints table + examples."""
  out_dir = os.path.join(workdir, "eval", source, f"step_{step}")
  paths = {}
  if jax.process_index() == 0:
    paths = report_lib.write_all(out_dir, result.predictions,
                                 result.references, result.report)
  if writer is not None:
    writer.write_scalars(step, {f"eval/{source}/{k}": v for k, v in
                                nocaps.flatten_scores(result.report).items()})
  print(f"\n{source} at step {step} (scores x 100):\n"
        + report_lib.markdown_table(result.report))
  if num_examples:
    print(report_lib.format_examples(result.predictions, result.references,
                                     num_examples) + "\n", flush=True)
  return paths


def evaluate(config: ml_collections.ConfigDict, workdir: str) -> dict:
  """Mode `evaluate`: {source: report}.

  A dual encoder (train.objective 'vlm') is scored by retrieval Recall@K
  (cc12m_jax.evaluation.retrieval_eval); a captioner by caption metrics.
  """
  if config.train.objective == "vlm":
    from cc12m_jax.evaluation import retrieval_eval  # pylint: disable=g-import-not-at-top
    return retrieval_eval.evaluate(config, workdir)
  setup = _setup(config)
  params, step = load_checkpoint_params(config, workdir, setup)
  writer = metric_writers.create_default_writer(
      workdir, just_logging=jax.process_index() != 0)
  reports = {}
  for source, evaluator in make_evaluators(config, setup).items():
    result = evaluator(params)
    write_and_log(result, source, step, workdir, writer,
                  config.eval.num_examples_to_show)
    reports[source] = result.report
  writer.flush()
  return reports


def predict(config: ml_collections.ConfigDict, workdir: str) -> dict:
  """Mode `predict`: {source: predictions.json path}."""
  from cc12m_jax.data.eval_pipeline import make_eval_iterator  # pylint: disable=g-import-not-at-top
  from cc12m_jax.decoding import captioner_decode  # pylint: disable=g-import-not-at-top
  setup = _setup(config)
  params, step = load_checkpoint_params(config, workdir, setup)
  decode_fn = captioner_decode.make_decode_fn(setup.model, config.decode)
  paths = {}
  for source in eval_sources(config):
    iterator = make_eval_iterator(config.data, source, setup.batch_sharding)
    predictions = captioner_eval.decode_eval_set(
        decode_fn, params, iterator, iterator.examples, iterator.tokenizer)
    references = (nocaps.load_references(config.eval.references)
                  if config.eval.references else
                  nocaps.references_from_examples(iterator.examples, source))
    path = os.path.join(workdir, "predict", source, f"step_{step}",
                        "predictions.json")
    if jax.process_index() == 0:
      report_lib.write_predictions(path, predictions, references)
    logging.info("Wrote %d captions of %s to %s.", len(predictions), source,
                 path)
    paths[source] = path
  return paths
