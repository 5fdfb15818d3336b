"""Each new objective can drive its loss to near zero on one batch (fresh masks every step)."""
import jax
import numpy as np
import optax
import pytest

from tests.objectives import tiny

STEPS = 250


# A sum's gradient is the sum of its terms' (test_multitask.py): its parts are enough here.
@pytest.mark.parametrize("objective, final", [("mlm", 0.15), ("mass", 0.15), ("moc", 0.1)])
def test_objective_overfits_one_batch(objective, final):
  obj, model, params = tiny.model_and_params(objective)
  batch = tiny.batch(4, seed=5)
  tx = optax.adam(3e-3)

  @jax.jit
  def train(params, batch):
    def step(i, carry):
      params, opt_state, losses = carry
      # A new key each step: new masks, as the trainer's fold_in(rng, step).
      key = jax.random.fold_in(jax.random.PRNGKey(0), i)
      (loss, _), grads = jax.value_and_grad(
          lambda p: obj.loss_fn(model, p, batch, key, train=True), has_aux=True)(params)
      updates, opt_state = tx.update(grads, opt_state, params)
      return optax.apply_updates(params, updates), opt_state, losses.at[i].set(loss)
    return jax.lax.fori_loop(0, STEPS, step,
                             (params, tx.init(params), np.zeros(STEPS, np.float32)))[2]

  losses = np.asarray(train(params, batch))
  assert np.all(np.isfinite(losses))
  # The mean of the last 10 steps: masks with few targets make single steps noisy.
  assert losses[-10:].mean() < final < losses[:3].mean(), (losses[:3], losses[-10:])
