"""Every rule a config must satisfy, checked once, before any compute.

`validate(config)` runs in cc12m_jax.main right after the flags are parsed
and before the workdir is touched; it raises ConfigError naming the first
bad key (`config.<section>.<key>`) and what to change. Rules that span
sections live here too: the batch against the mesh, the evaluator against
the objective, the selection metric against the evaluator's metrics.
Per-field checks of a component (e.g. decode settings) are that component's
function, called from here. One rule reads files: a non-zero model.vocab_size
or model.feature_dim is checked against the vocabulary file and the sources'
metadata.json (a wrong one otherwise fails mid-run, as a NaN loss or a Flax
shape error).
"""
from __future__ import annotations

import jax
import ml_collections
import tensorflow as tf

from cc12m_jax import sharding
from cc12m_jax.core import selection
from cc12m_jax.data import metadata as metadata_lib
from cc12m_jax.data import pipeline
from cc12m_jax.data import sources as sources_lib
from cc12m_jax.data.text import tokenizer as tokenizer_lib
from cc12m_jax.decoding import captioner_decode
from cc12m_jax.evaluation import naming_probe, registry as evaluators
from cc12m_jax.objectives import registry as objectives
from cc12m_jax.train import optim
from cc12m_jax.train import step as step_lib

MODES = ("pretrain", "finetune", "evaluate", "predict")


class ConfigError(ValueError):
  pass


def _require(cond: bool, key: str, message: str) -> None:
  if not cond:
    raise ConfigError(f"config.{key}: {message}")


def _positive(section: ml_collections.ConfigDict, name: str, keys: tuple[str, ...]) -> None:
  for key in keys:
    _require(int(section[key]) > 0, f"{name}.{key}", f"must be > 0, got {section[key]}.")


def _train(config: ml_collections.ConfigDict) -> None:
  t = config.train
  try:
    objectives.get(t.objective)  # a registered name or a weighted sum ('ic+0.1*moc')
  except ValueError as e:
    raise ConfigError(str(e)) from e
  _require(isinstance(t.init_partial, bool), "train.init_partial", "must be True or False.")
  _positive(t, "train", ("num_train_steps", "log_every_steps", "checkpoint_every_steps",
                         "keep_checkpoints"))
  _require(t.dropout_rng in step_lib.DROPOUT_RNGS, "train.dropout_rng",
           f"{t.dropout_rng!r} is not one of {step_lib.DROPOUT_RNGS}.")
  _require(t.eval_every_steps >= 0, "train.eval_every_steps", "must be >= 0 (0: never).")
  if config.mode == "finetune":
    _require(bool(t.init_from), "train.init_from",
             "fine-tuning needs the pre-trained checkpoint directory.")


def _objectives(config: ml_collections.ConfigDict) -> None:
  """The masked objectives' settings, checked whichever objective runs (they are cheap)."""
  o = config.objectives
  _require(0.0 < o.text_mask_rate <= 1.0, "objectives.text_mask_rate", "must be in (0, 1].")
  _require(0.0 < o.region_mask_rate <= 1.0, "objectives.region_mask_rate", "must be in (0, 1].")
  for key in ("mask_token_prob", "random_token_prob"):
    _require(0.0 <= o[key] <= 1.0, f"objectives.{key}", "must be in [0, 1].")
  _require(o.mask_token_prob + o.random_token_prob <= 1.0, "objectives.random_token_prob",
           f"mask_token_prob + random_token_prob = "
           f"{o.mask_token_prob + o.random_token_prob:g} exceeds 1.")


def _optim(o: ml_collections.ConfigDict) -> None:
  _require(o.optimizer in optim.OPTIMIZERS, "optim.optimizer",
           f"{o.optimizer!r} is not one of {optim.OPTIMIZERS}.")
  _require(o.learning_rate > 0, "optim.learning_rate", "must be > 0.")
  _require(o.warmup_steps >= 0, "optim.warmup_steps", "must be >= 0.")
  _require(o.decay_steps > 0, "optim.decay_steps", "must be > 0.")
  _require(0 < o.decay_rate <= 1, "optim.decay_rate", "must be in (0, 1].")
  _require(o.grad_clip_norm >= 0, "optim.grad_clip_norm", "must be >= 0 (0 disables).")


def _model(m: ml_collections.ConfigDict) -> None:
  _positive(m, "model", ("emb_dim", "num_heads", "mlp_dim", "num_encoder_layers",
                         "num_decoder_layers"))
  _require(m.emb_dim % m.num_heads == 0, "model.num_heads",
           f"emb_dim={m.emb_dim} is not divisible by num_heads={m.num_heads}.")
  _require(m.emb_dim % 2 == 0, "model.emb_dim", "must be even (sinusoidal positions).")
  _require(m.compute_dtype in ("float32", "bfloat16"), "model.compute_dtype",
           f"{m.compute_dtype!r} is not 'float32' or 'bfloat16'.")
  for key in ("input_dropout", "dropout", "attention_dropout"):
    _require(0.0 <= m[key] < 1.0, f"model.{key}", "must be in [0, 1).")
  _require(m.vocab_size >= 0, "model.vocab_size", "must be >= 0 (0: read from the vocabulary).")
  _require(m.feature_dim >= 0, "model.feature_dim", "must be >= 0 (0: read from metadata.json).")


def _data(d: ml_collections.ConfigDict) -> None:
  _positive(d, "data", ("global_batch_size", "eval_global_batch_size", "max_tag_tokens",
                        "num_parallel_reads", "parse_batch_size"))
  _require(d.shuffle_buffer >= 1, "data.shuffle_buffer", "must be >= 1 (1: no shuffling).")
  _require(d.read_parallelism in pipeline.READ_PARALLELISM, "data.read_parallelism",
           f"is {d.read_parallelism!r}; choose one of {pipeline.READ_PARALLELISM}.")
  _require(d.max_caption_length > 1, "data.max_caption_length", "must be > 1.")
  try:
    sources_lib.train_sources(d)
  except ValueError as e:
    raise ConfigError(str(e)) from e


def _mesh(config: ml_collections.ConfigDict, num_devices: int) -> None:
  for a in sharding.MESH_AXES:
    _require(config.mesh[a] == -1 or config.mesh[a] > 0, f"mesh.{a}", "must be > 0 or -1.")
  try:
    shape = dict(zip(sharding.MESH_AXES, sharding.mesh_shape(config.mesh, num_devices)))
  except ValueError as e:
    raise ConfigError(str(e)) from e
  shards = shape["data"] * shape["fsdp"]
  for key in ("global_batch_size", "eval_global_batch_size"):
    _require(config.data[key] % shards == 0, f"data.{key}",
             f"{config.data[key]} is not divisible by the mesh's batch shards "
             f"(data x fsdp = {shards}); use a multiple of {shards}.")


def _eval(config: ml_collections.ConfigDict) -> None:
  e = config.eval
  kind_name = evaluators.evaluator_name(config)
  _require(kind_name in evaluators.EVALUATORS, "eval.evaluator",
           f"{kind_name!r} is not one of {sorted(evaluators.EVALUATORS)} ('' = the objective's).")
  kind = evaluators.EVALUATORS[kind_name]
  _require(evaluators.can_score(kind, config.train.objective), "eval.evaluator",
           f"the {kind_name!r} evaluator cannot score a {config.train.objective!r} model "
           f"(it scores models trained on one of {kind.model_objectives}).")
  try:
    metric_names = kind.metric_names(config)
  except ValueError as ex:
    raise ConfigError(str(ex)) from ex
  try:
    captioner_decode.validate_decode_config(config.decode)
  except ValueError as ex:
    raise ConfigError(str(ex)) from ex
  sources = evaluators.eval_sources(config)
  needs_eval = config.mode in ("evaluate", "predict") or config.train.eval_every_steps > 0
  _require(kind_name != "none" or not needs_eval, "eval.evaluator",
           f"a {config.train.objective!r} model has no evaluator before fine-tuning "
           f"('none'), but mode {config.mode!r} / train.eval_every_steps="
           f"{config.train.eval_every_steps} evaluates; set train.eval_every_steps=0 and "
           "fine-tune with ic (docs/objectives.md).")
  _require(bool(sources) or not needs_eval, "data.eval_sources",
           f"names no source, but mode {config.mode!r} / train.eval_every_steps="
           f"{config.train.eval_every_steps} evaluates.")
  _require(not (kind_name == "captioning" and e.references and len(sources) > 1),
           "eval.references",
           f"{e.references!r} names one file but data.eval_sources has {len(sources)} "
           f"sources {sources}; evaluate one source at a time.")
  _require(e.selection_mode in selection.MODES, "eval.selection_mode",
           f"{e.selection_mode!r} is not one of {selection.MODES}.")
  _require(e.checkpoint_step >= -1, "eval.checkpoint_step", "must be >= 0, or -1 (latest).")
  if kind_name == naming_probe.NAME:
    try:
      naming_probe.parse_prefixes(e.naming_prefixes)
    except ValueError as ex:
      raise ConfigError(str(ex)) from ex
  if config.mode == "predict":
    _require(kind_name == "captioning", "mode", "predict writes captions: it needs the "
             f"'captioning' evaluator, not {kind_name!r}.")
  if e.select_checkpoint:
    _require(bool(e.selection_metric), "eval.select_checkpoint",
             "needs config.eval.selection_metric to choose by.")
  _require(e.selection_max_step >= 0, "eval.selection_max_step", "must be >= 0 (0: no cap).")
  _require(not e.selection_max_step or (e.select_checkpoint and e.checkpoint_step == -1),
           "eval.selection_max_step",
           f"={e.selection_max_step} caps the steps a selection chooses among; it needs "
           "eval.select_checkpoint=True and eval.checkpoint_step=-1.")
  # The metric is used by an evaluation that selects a checkpoint, or by a
  # trainer that evaluates (its best/ tracker); a plain evaluation ignores it,
  # so a fine-tuning config can be evaluated on any one of its sources.
  selects = e.select_checkpoint or (config.mode in ("pretrain", "finetune")
                                    and config.train.eval_every_steps > 0)
  if e.selection_metric and sources and selects:
    head, _, rest = e.selection_metric.partition("/")
    source, metric = (head, rest) if head in sources and rest else (None, e.selection_metric)
    _require(source is not None or len(sources) == 1, "eval.selection_metric",
             f"{e.selection_metric!r} does not say which of the eval sources {sources} to "
             f"select on: write '<source>/{e.selection_metric}'.")
    _require(metric in metric_names, "eval.selection_metric",
             f"{e.selection_metric!r}: the {kind_name!r} evaluator reports no metric "
             f"{metric!r} (it reports {sorted(metric_names)}).")


def _data_dims(config: ml_collections.ConfigDict) -> None:
  """A non-zero model.vocab_size / feature_dim against the files it must match.

  (0, the default, reads them from there.) A vocabulary smaller than the
  vocabulary file's only shows as a NaN loss (token ids past the embedding),
  a feature_dim other than the records' as a Flax shape error, both after
  the workdir has been written. A larger vocab_size is allowed (padding).
  """
  m = config.model
  if m.vocab_size:
    path = sources_lib.vocab_path(config.data)
    try:
      size = tokenizer_lib.SubwordTokenizer(path).vocab_size
    except (OSError, ValueError, tf.errors.OpError) as e:
      raise ConfigError(f"config.model.vocab_size: cannot read the vocabulary {path} to check "
                        f"{m.vocab_size} against it: {e}") from None
    _require(m.vocab_size >= size, "model.vocab_size",
             f"{m.vocab_size} is smaller than the vocabulary {path} ({size} entries); "
             f"set it to 0 (read from the vocabulary) or to at least {size}.")
  if m.feature_dim:
    sources = []
    if config.mode in ("pretrain", "finetune"):
      sources += [s.name for s in sources_lib.train_sources(config.data)]
    if config.mode in ("evaluate", "predict") or config.train.eval_every_steps > 0:
      sources += evaluators.eval_sources(config)
    for source in dict.fromkeys(sources):
      try:
        meta = metadata_lib.load_metadata(config.data.data_dir, source)
      except (OSError, ValueError) as e:
        raise ConfigError(f"config.model.feature_dim: cannot check {m.feature_dim} against "
                          f"source {source!r}: {e}") from None
      _require(m.feature_dim == meta.feature_dim, "model.feature_dim",
               f"{m.feature_dim}, but the records of source {source!r} have feature_dim "
               f"{meta.feature_dim} ({metadata_lib.source_dir(config.data.data_dir, source)}/"
               f"{metadata_lib.METADATA_FILE}); set it to 0 (read from metadata.json) or "
               f"{meta.feature_dim}.")


def validate(config: ml_collections.ConfigDict, num_devices: int | None = None) -> None:
  """Raises ConfigError naming the first bad key; `num_devices` defaults to all devices."""
  _require(config.mode in MODES, "mode", f"{config.mode!r} is not one of {MODES}.")
  _train(config)
  _objectives(config)
  _optim(config.optim)
  _model(config.model)
  _data(config.data)
  _mesh(config, jax.device_count() if num_devices is None else num_devices)
  _eval(config)
  _data_dims(config)  # last: the one rule that reads files
