"""Config checks that run before any compute (errors name the offending key)."""
from __future__ import annotations

import ml_collections

from cc12m_jax.objectives import registry
from cc12m_jax.train import optim
from cc12m_jax.train import step as step_lib

MODES = ("pretrain", "finetune", "evaluate", "predict")


class ConfigError(ValueError):
  pass


def _require(cond: bool, key: str, message: str) -> None:
  if not cond:
    raise ConfigError(f"config.{key}: {message}")


def validate(config: ml_collections.ConfigDict) -> None:
  """Raises ConfigError naming the first bad key."""
  _require(config.mode in MODES, "mode", f"{config.mode!r} is not one of {MODES}.")
  t, o, m, d = config.train, config.optim, config.model, config.data
  _require(t.objective in registry.names(), "train.objective",
           f"{t.objective!r} is not one of {registry.names()}.")
  for key in ("num_train_steps", "log_every_steps", "checkpoint_every_steps", "keep_checkpoints"):
    _require(int(t[key]) > 0, f"train.{key}", f"must be > 0, got {t[key]}.")
  _require(t.dropout_rng in step_lib.DROPOUT_RNGS, "train.dropout_rng",
           f"{t.dropout_rng!r} is not one of {step_lib.DROPOUT_RNGS}.")
  _require(t.eval_every_steps >= 0, "train.eval_every_steps", "must be >= 0.")
  if config.mode == "finetune":
    _require(bool(t.init_from), "train.init_from",
             "fine-tuning needs the pre-trained checkpoint directory.")
  _require(o.optimizer in optim.OPTIMIZERS, "optim.optimizer",
           f"{o.optimizer!r} is not one of {optim.OPTIMIZERS}.")
  _require(o.learning_rate > 0, "optim.learning_rate", "must be > 0.")
  _require(o.warmup_steps >= 0, "optim.warmup_steps", "must be >= 0.")
  _require(o.decay_steps > 0, "optim.decay_steps", "must be > 0.")
  _require(0 < o.decay_rate <= 1, "optim.decay_rate", "must be in (0, 1].")
  _require(o.grad_clip_norm >= 0, "optim.grad_clip_norm", "must be >= 0 (0 disables).")
  for key in ("emb_dim", "num_heads", "mlp_dim", "num_encoder_layers", "num_decoder_layers"):
    _require(int(m[key]) > 0, f"model.{key}", f"must be > 0, got {m[key]}.")
  _require(m.emb_dim % m.num_heads == 0, "model.num_heads",
           f"emb_dim={m.emb_dim} is not divisible by num_heads={m.num_heads}.")
  _require(m.emb_dim % 2 == 0, "model.emb_dim", "must be even (sinusoidal positions).")
  _require(m.compute_dtype in ("float32", "bfloat16"), "model.compute_dtype",
           f"{m.compute_dtype!r} is not 'float32' or 'bfloat16'.")
  for key in ("input_dropout", "dropout", "attention_dropout"):
    _require(0.0 <= m[key] < 1.0, f"model.{key}", "must be in [0, 1).")
  _require(m.vocab_size >= 0 and m.feature_dim >= 0, "model.vocab_size",
           "vocab_size and feature_dim must be >= 0 (0: read from data).")
  _require(d.global_batch_size > 0, "data.global_batch_size", "must be > 0.")
  from cc12m_jax.data import pipeline  # pylint: disable=g-import-not-at-top  (tensorflow)
  _require(d.read_parallelism in pipeline.READ_PARALLELISM, "data.read_parallelism",
           f"is {d.read_parallelism!r}; choose one of {pipeline.READ_PARALLELISM}.")
  _require(d.max_caption_length > 1, "data.max_caption_length", "must be > 1.")
  sources = [s for s in d.train_sources.split(",") if s]
  _require(bool(sources), "data.train_sources", "names no source.")
  for key in ("train_weights", "train_fractions"):
    n = len([w for w in str(d[key]).split(",") if w])
    _require(n == len(sources), f"data.{key}",
             f"has {n} entries but data.train_sources has {len(sources)}.")
  for a in ("data", "fsdp", "model"):
    _require(config.mesh[a] == -1 or config.mesh[a] > 0, f"mesh.{a}", "must be > 0 or -1.")
