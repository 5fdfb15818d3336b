"""Small building blocks with logical axis names on every parameter.

`dense(...)` is nn.Dense with partitioned kernel/bias; `constrain` names the
axes of an activation so the sharding rules (cc12m_jax/sharding.py) apply.
Parameters stay float32; `dtype` is the compute dtype (bf16 optional).
`ConfigModule` is the base of every module configured by `config.model`.
"""
from __future__ import annotations

from typing import Any, Sequence

import flax.linen as nn
import jax
from jax import lax
import jax.numpy as jnp
import ml_collections

DEFAULT_KERNEL_INIT = nn.initializers.xavier_uniform()


class ConfigModule(nn.Module):
  """A module configured by a `ml_collections.FrozenConfigDict` (`config.model`).

  Flax hashes a module by its fields (e.g. a model passed to jit as a static
  argument), which a ConfigDict makes fail, and a config changed after the
  module was built would silently change the module: a frozen config is
  hashable and immutable. A mutable ConfigDict passed in is frozen here, so
  callers may pass either.
  """
  config: ml_collections.FrozenConfigDict

  def __post_init__(self):
    if not isinstance(self.config, ml_collections.FrozenConfigDict):
      # Dataclass fields of a module are set once, before flax's own
      # __post_init__ registers the module; this is that moment.
      object.__setattr__(self, "config", ml_collections.FrozenConfigDict(self.config))
    super().__post_init__()


def dense(features: int, names: tuple[str, str], dtype: Any, name: str | None = None,
          use_bias: bool = True, kernel_init=DEFAULT_KERNEL_INIT) -> nn.Dense:
  """nn.Dense whose kernel [in, out] carries logical axis names `names`."""
  return nn.Dense(
      features,
      use_bias=use_bias,
      dtype=dtype,
      param_dtype=jnp.float32,
      kernel_init=nn.with_logical_partitioning(kernel_init, names),
      bias_init=nn.with_logical_partitioning(nn.initializers.zeros, (names[1],)),
      name=name)


def layer_norm(dtype: Any, name: str | None = None) -> nn.LayerNorm:
  return nn.LayerNorm(
      dtype=dtype,
      param_dtype=jnp.float32,
      scale_init=nn.with_logical_partitioning(nn.initializers.ones, ("embed",)),
      bias_init=nn.with_logical_partitioning(nn.initializers.zeros, ("embed",)),
      name=name)


def constrain(x, names: Sequence[str | None]):
  """Sharding constraint by logical names (no-op outside a rules context/mesh)."""
  return nn.with_logical_constraint(x, tuple(names))


def compute_dtype(config) -> Any:
  name = str(config.compute_dtype)
  if name not in ("float32", "bfloat16"):
    raise ValueError(f"config.model.compute_dtype={name!r}: use 'float32' or 'bfloat16'.")
  return jnp.bfloat16 if name == "bfloat16" else jnp.float32


class Dropout(nn.Module):
  """Inverted dropout (as nn.Dropout), with cheaper random bits for rbg keys.

  With an rbg key (config.train.dropout_rng='rbg') the mask comes straight
  from XLA's RngBitGenerator: an entry is kept iff its uint32 draw is
  >= round(rate * 2**32), so P(keep) = 1 - rate to within 2**-32. On CPU the
  generator runs its three-fry algorithm, which is cheaper per bit there than
  the backend default (Philox) that JAX's own rbg bits use; a train step
  draws one bit pattern per activation, so the cost per bit matters. Other
  backends keep their default algorithm, which is the fast one on GPU/TPU.
  Any other key (threefry: masks identical on every mesh) goes through
  jax.random.bernoulli, exactly as nn.Dropout.
  """
  rate: float
  deterministic: bool | None = None

  @nn.compact
  def __call__(self, x: jax.Array, deterministic: bool | None = None) -> jax.Array:
    deterministic = nn.merge_param("deterministic", self.deterministic, deterministic)
    if deterministic or self.rate == 0.0:
      return x
    if self.rate == 1.0:
      return jnp.zeros_like(x)
    keep_prob = 1.0 - self.rate
    key = self.make_rng("dropout")
    if is_rbg_key(key):
      algorithm = (lax.RandomAlgorithm.RNG_THREE_FRY if jax.default_backend() == "cpu"
                   else lax.RandomAlgorithm.RNG_DEFAULT)
      _, bits = lax.rng_bit_generator(jax.random.key_data(key), x.shape, dtype=jnp.uint32,
                                      algorithm=algorithm)  # [*x.shape]
      keep = bits >= jnp.uint32(min(round(self.rate * 2.0**32), 2**32 - 1))
    else:
      keep = jax.random.bernoulli(key, keep_prob, x.shape)
    return lax.select(keep, x / jnp.asarray(keep_prob, x.dtype), jnp.zeros_like(x))


def is_rbg_key(key: jax.Array) -> bool:
  """True for a typed key of JAX's 'rbg' implementation."""
  return (jnp.issubdtype(key.dtype, jax.dtypes.prng_key)
          and str(jax.random.key_impl(key)) == "rbg")


class MlpBlock(nn.Module):
  """Linear(E) -> ReLU -> Dropout -> Linear(E): the paper's input MLPs."""
  features: int
  dropout_rate: float
  dtype: Any = jnp.float32

  @nn.compact
  def __call__(self, x, *, train: bool):
    x = dense(self.features, ("embed", "mlp"), self.dtype, name="hidden")(x)
    x = nn.relu(x)
    x = Dropout(self.dropout_rate, deterministic=not train)(x)
    return dense(self.features, ("mlp", "embed"), self.dtype, name="output")(x)
