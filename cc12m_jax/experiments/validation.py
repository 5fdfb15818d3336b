"""Checks every stage of a suite before any stage runs.

A mistake in the last stage of a chain (a misspelt metric, a missing split)
would otherwise surface hours into the first one. For every stage this
builds the config its command builds and runs the entry point's own
`config_rules.validate` on it, then checks that the data it reads exists:
its training sources (read even by evaluate stages, for the feature
dimension), the eval sources it scores, its reference file and, for moc,
its cluster centroids; and that
an evaluate stage's fixed checkpoint step is one its training stage keeps.

The device count is the least the stage's mesh needs (an explicit axis
size, or 1): the runner must not start JAX on the accelerators that its
stages will use, and the stage checks its mesh against the real devices
when it starts.
"""
from __future__ import annotations

import math

import ml_collections
from etils import epath

from cc12m_jax import config_rules
from cc12m_jax.data import metadata
from cc12m_jax.data import sources as sources_lib
from cc12m_jax.evaluation import naming_probe
from cc12m_jax.experiments import commands
from cc12m_jax.experiments.suite import Suite, SuiteError
from cc12m_jax.objectives import moc
from cc12m_jax.objectives import registry


def _sources(text: str) -> list[str]:
  return [s.strip() for s in text.split(",") if s.strip()]


def min_devices(config: ml_collections.ConfigDict) -> int:
  return math.prod(max(int(config.mesh[a]), 1) for a in ("data", "fsdp", "model"))


def _evaluates(config: ml_collections.ConfigDict) -> bool:
  """Whether the stage scores anything (and so reads its eval sources and references)."""
  return config.mode == "evaluate" or config.train.eval_every_steps > 0


def _read_sources(config: ml_collections.ConfigDict) -> list[str]:
  """Sources the stage reads: its training sources (even an evaluate stage, for
  the feature dimension) and the eval sources it scores."""
  reads = _sources(config.data.train_sources)
  if _evaluates(config):
    reads += [s for s in _sources(config.data.eval_sources) if s not in reads]
  return reads


def _reads_centroids(config: ml_collections.ConfigDict) -> bool:
  """Whether the stage trains moc, whose labels come from the cluster centroids."""
  return config.mode in ("pretrain", "finetune") and "moc" in registry.tasks(config.train.objective)


def data_inputs(config: ml_collections.ConfigDict) -> dict[str, str]:
  """{source name or file: path} of everything the stage reads from the data:
  the runner fingerprints these, so a finished stage is not re-used after
  its data changed. The vocabulary is one: the same words in another order
  give every word another id, so another initial embedding, with every
  record's bytes unchanged."""
  inputs = {source: metadata.source_dir(config.data.data_dir, source)
            for source in _read_sources(config)}
  inputs["vocab"] = sources_lib.vocab_path(config.data)
  if _reads_centroids(config):
    inputs["centroids"] = moc.centroids_file(config)
  if config.eval.references and _evaluates(config):
    inputs["references"] = config.eval.references
  return inputs


def data_problems(stage_key: str, config: ml_collections.ConfigDict) -> list[str]:
  """What the stage would read but the data directory lacks."""
  data_dir = config.data.data_dir
  reads = _read_sources(config)
  problems = []
  for source in reads:
    if not (epath.Path(data_dir) / source / metadata.METADATA_FILE).exists():
      problems.append(f"stage {stage_key} reads source {source!r}, which {data_dir} does not "
                      f"have (no {source}/{metadata.METADATA_FILE}); generate or import it, "
                      "or change the suite (docs/experiments.md lists each suite's sources)")
  if _reads_centroids(config):
    centroids = moc.centroids_file(config)
    if not epath.Path(centroids).exists():
      problems.append(f"stage {stage_key} trains {config.train.objective!r}, whose cluster "
                      f"centroids {centroids} do not exist; make them first with "
                      f"python -m cc12m_jax.data.clusters --data_dir={data_dir} "
                      f"--source={epath.Path(centroids).parent.name} "
                      "(docs/objectives.md)")
  if config.mode == "evaluate" and config.eval.evaluator == naming_probe.NAME:
    for source in _sources(config.data.eval_sources):
      if not (epath.Path(data_dir) / source / naming_probe.CONCEPTS_FILE).exists():
        problems.append(f"stage {stage_key} runs the naming probe on {source!r}, but "
                        f"{data_dir}/{source} has no {naming_probe.CONCEPTS_FILE} (which "
                        "concepts each image shows; the synthetic world writes it)")
  if config.eval.references and _evaluates(config) and not epath.Path(
      config.eval.references).exists():
    problems.append(f"stage {stage_key}: config.eval.references={config.eval.references} "
                    "does not exist")
  return problems


def kept_steps(config: ml_collections.ConfigDict) -> list[int]:
  """The checkpoint steps a training config leaves behind (saved every
  checkpoint_every_steps and at the end; the last keep_checkpoints kept)."""
  t = config.train
  saved = sorted(set(range(t.checkpoint_every_steps, t.num_train_steps + 1,
                           t.checkpoint_every_steps)) | {int(t.num_train_steps)})
  return saved[-int(t.keep_checkpoints):]


def checkpoint_problems(suite: Suite, configs: dict[str, ml_collections.ConfigDict]) -> list[str]:
  """An evaluate stage's fixed step must be a checkpoint its training stage keeps."""
  problems = []
  for stage in suite.stages:
    if stage.mode == "evaluate" and stage.checkpoint_step >= 0 and stage.checkpoint_dir in configs:
      kept = kept_steps(configs[stage.checkpoint_dir])
      if stage.checkpoint_step not in kept:
        problems.append(f"stage {stage.key} evaluates step {stage.checkpoint_step} of "
                        f"{stage.checkpoint_dir}, which keeps steps {kept}")
  return problems


def probe_problems(suite: Suite, configs: dict[str, ml_collections.ConfigDict]) -> list[str]:
  """A long-tail probe must be a naming-probe evaluation: only it writes ranks."""
  problems = []
  for probe in (p for report in suite.long_tails for p in report.probes):
    key = f"{probe.condition}/{probe.stage}"
    if key in configs and configs[key].eval.evaluator != naming_probe.NAME:
      problems.append(f"suite.long_tail.probes: {probe.key!r} reads stage {key}, whose "
                      f"config.eval.evaluator is {configs[key].eval.evaluator!r}, not "
                      f"{naming_probe.NAME!r}")
  return problems


def check(suite: Suite, workdir: str, *, check_data: bool = True
          ) -> dict[str, ml_collections.ConfigDict]:
  """{stage key: config (seed 0)}; SuiteError listing every problem found."""
  configs, problems = {}, []
  for stage in suite.stages:
    try:
      config = commands.stage_config(suite, stage, workdir, seed=0)
      config_rules.validate(config, num_devices=min_devices(config))
    except (SuiteError, config_rules.ConfigError) as e:
      problems.append(f"stage {stage.key}: {e}")
      continue
    configs[stage.key] = config
    if check_data:
      problems += data_problems(stage.key, config)
  problems += checkpoint_problems(suite, configs)
  problems += probe_problems(suite, configs)
  if problems:
    raise SuiteError(f"suite {suite.name} ({suite.size}) cannot run:\n  " + "\n  ".join(problems))
  return configs
