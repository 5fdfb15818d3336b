"""layers.Dropout: nn.Dropout's contract, with three-fry RngBitGenerator bits for rbg keys."""
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from cc12m_jax.models import layers

SHAPE = (64, 33, 512)  # [B, L, E]: ~1.1M draws


def apply(module, x, key):
  return module.apply({}, x, rngs={"dropout": key})


@pytest.mark.parametrize("rate", [0.1, 0.3])
def test_rbg_masks_keep_the_expected_fraction_and_rescale(rate):
  x = jnp.ones(SHAPE, jnp.float32)
  y = np.asarray(apply(layers.Dropout(rate, deterministic=False), x,
                       jax.random.key(1, impl="rbg")))
  kept = y != 0
  # Kept entries are rescaled by 1 / (1 - rate); dropped ones are exactly 0.
  np.testing.assert_allclose(y[kept], 1.0 / (1.0 - rate), rtol=1e-6)
  # Binomial standard deviation of the kept fraction is ~4e-4 here.
  assert abs(kept.mean() - (1.0 - rate)) < 3e-3, kept.mean()
  # No structure along any axis: per-position keep rates stay near 1 - rate.
  assert np.abs(kept.mean(axis=(0, 2)) - (1.0 - rate)).max() < 0.02


def test_rbg_masks_are_a_function_of_the_key():
  module = layers.Dropout(0.3, deterministic=False)
  x = jnp.ones(SHAPE[:2] + (64,), jnp.float32)
  a = apply(module, x, jax.random.key(7, impl="rbg"))
  b = apply(module, x, jax.random.key(7, impl="rbg"))
  c = apply(module, x, jax.random.key(8, impl="rbg"))
  np.testing.assert_array_equal(a, b)
  assert (np.asarray(a) != np.asarray(c)).mean() > 0.3


def test_threefry_keys_give_exactly_flax_dropout():
  x = jax.random.normal(jax.random.key(0), SHAPE[:2] + (64,))
  key = jax.random.key(3)
  ours = apply(layers.Dropout(0.3, deterministic=False), x, key)
  flax_ = apply(nn.Dropout(0.3, deterministic=False), x, key)
  np.testing.assert_array_equal(ours, flax_)


def test_deterministic_and_edge_rates():
  x = jax.random.normal(jax.random.key(0), (4, 8))
  key = jax.random.key(0, impl="rbg")
  np.testing.assert_array_equal(apply(layers.Dropout(0.5, deterministic=True), x, key), x)
  np.testing.assert_array_equal(apply(layers.Dropout(0.0, deterministic=False), x, key), x)
  np.testing.assert_array_equal(apply(layers.Dropout(1.0, deterministic=False), x, key),
                                np.zeros_like(x))


def test_gradient_flows_only_through_kept_entries():
  module = layers.Dropout(0.5, deterministic=False)
  key = jax.random.key(5, impl="rbg")
  x = jnp.ones((256,), jnp.float32)
  grad = jax.grad(lambda v: apply(module, v, key).sum())(x)
  kept = np.asarray(apply(module, x, key)) != 0
  np.testing.assert_allclose(np.asarray(grad)[kept], 2.0)
  np.testing.assert_array_equal(np.asarray(grad)[~kept], 0.0)
