"""Optimizer and learning-rate schedule (paper Appendix E).

Schedule: linear warm-up from 0 to `learning_rate` over `warmup_steps`, then
staircase exponential decay: lr * decay_rate ** floor((step - warmup) / decay_steps).
Gradients are clipped by global norm before the update.
"""
from __future__ import annotations

import ml_collections
import optax

OPTIMIZERS = ("adam", "adamw", "sgd")


def learning_rate_schedule(cfg: ml_collections.ConfigDict) -> optax.Schedule:
  decay = optax.exponential_decay(
      init_value=cfg.learning_rate, transition_steps=cfg.decay_steps,
      decay_rate=cfg.decay_rate, staircase=True)
  if cfg.warmup_steps <= 0:
    return decay
  warmup = optax.linear_schedule(0.0, cfg.learning_rate, cfg.warmup_steps)
  return optax.join_schedules([warmup, decay], boundaries=[cfg.warmup_steps])


def make_optimizer(cfg: ml_collections.ConfigDict) -> tuple[optax.GradientTransformation, optax.Schedule]:
  """(optimizer, schedule) from config.optim."""
  schedule = learning_rate_schedule(cfg)
  if cfg.optimizer == "adam":
    opt = optax.adam(schedule, b1=cfg.b1, b2=cfg.b2)
  elif cfg.optimizer == "adamw":
    opt = optax.adamw(schedule, b1=cfg.b1, b2=cfg.b2, weight_decay=cfg.weight_decay)
  elif cfg.optimizer == "sgd":
    opt = optax.sgd(schedule, momentum=cfg.b1)
  else:
    raise ValueError(f"config.optim.optimizer={cfg.optimizer!r}: choose one of {OPTIMIZERS}.")
  chain = [opt]
  if cfg.grad_clip_norm and cfg.grad_clip_norm > 0:
    chain.insert(0, optax.clip_by_global_norm(cfg.grad_clip_norm))
  return optax.chain(*chain), schedule
