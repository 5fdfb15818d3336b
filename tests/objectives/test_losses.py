"""The masked losses count masked positions only, and equal their hand computation."""
import jax
import numpy as np
from scipy.special import logsumexp

from cc12m_jax.data import centroids
from cc12m_jax.models.multitask import MultiTaskModel
from cc12m_jax.objectives import mass, mlm, moc
from tests.objectives import tiny

KEY = jax.random.PRNGKey(11)


def _hand_cross_entropy(logits, targets, weights) -> float:
  """Mean over weight-1 positions of -log softmax(logits)[target], in float64."""
  logits = np.asarray(logits, np.float64)
  nll = logsumexp(logits, axis=-1) - np.take_along_axis(logits, targets[..., None], -1)[..., 0]
  return float((nll * weights).sum() / weights.sum())


def test_mlm_loss_is_the_cross_entropy_of_the_chosen_words_only():
  _, model, params = tiny.model_and_params("mlm")
  batch = tiny.batch(seed=1)
  targets = batch["decoder_targets"]

  @jax.jit
  def run(params, batch):
    inputs, chosen = mlm.mask_caption(KEY, batch["decoder_targets"], model.objectives,
                                      tiny.VOCAB)
    logits = model.apply({"params": params}, batch, inputs, train=False,
                         method=MultiTaskModel.mlm_logits)
    # The objective's loss_fn draws the same masks from the same key.
    return chosen, logits, mlm.loss_fn(model, params, batch, KEY, train=False)

  chosen, logits, (full, metrics) = jax.tree_util.tree_map(np.asarray, run(params, batch))
  assert 0 < chosen.sum() < (targets > 2).sum()
  loss = float(mlm.masked_token_loss(logits, targets, chosen, batch)[0])
  np.testing.assert_allclose(float(full), loss, rtol=1e-6)
  assert float(metrics["num_targets"]) == chosen.sum()
  np.testing.assert_allclose(loss, _hand_cross_entropy(logits, targets, chosen), rtol=1e-5)
  # Another target where nothing was masked changes nothing; at a masked word it does.
  other = np.where(chosen, targets, (targets + 7) % tiny.VOCAB)
  assert float(mlm.masked_token_loss(logits, other, chosen, batch)[0]) == loss
  b, t = np.argwhere(chosen)[0]
  other = targets.copy()
  other[b, t] = (targets[b, t] + 7) % tiny.VOCAB
  assert float(mlm.masked_token_loss(logits, other, chosen, batch)[0]) != loss


def test_mass_loss_is_the_cross_entropy_of_the_span_only():
  _, model, params = tiny.model_and_params("mass")
  batch = tiny.batch(seed=2)

  @jax.jit
  def run(params, batch, padding_input):
    masked = mass.mask_span(KEY, batch["decoder_targets"], model.objectives, tiny.VOCAB)
    in_span = masked["decoder_targets"] != 0
    # Decoder slots after the span get any input: they are causal padding.
    decoder_inputs = jax.numpy.where(in_span, masked["decoder_inputs"], padding_input)
    logits = model.apply({"params": params}, batch, masked["inputs"], decoder_inputs,
                         masked["decoder_positions"], train=False,
                         method=MultiTaskModel.mass_logits)
    return masked, logits, mass.loss_fn(model, params, batch, KEY, train=False)

  masked, logits, (loss, metrics) = jax.tree_util.tree_map(np.asarray, run(params, batch, 0))
  in_span = masked["decoder_targets"] != 0
  assert in_span.sum() == masked["span"].sum() == float(metrics["num_targets"]) > 0
  np.testing.assert_allclose(float(loss), _hand_cross_entropy(
      logits, masked["decoder_targets"], in_span), rtol=1e-5)
  # What follows the span in the decoder does not reach the span's logits.
  logits9 = np.asarray(run(params, batch, 9)[1])
  np.testing.assert_allclose(logits9[in_span], logits[in_span], rtol=1e-5, atol=1e-5)
  assert not np.allclose(logits9[~in_span], logits[~in_span], atol=1e-3)


def test_moc_loss_against_a_hand_computation_on_known_clusters():
  _, model, params = tiny.model_and_params("moc")
  batch = tiny.batch(seed=3)
  real = batch["region_mask"]
  # Each region was drawn around a known centroid: the on-device assignment finds it.
  labels = np.asarray(moc.cluster_labels(batch["region_features"], tiny.centroids()))
  np.testing.assert_array_equal(labels[real], tiny.true_clusters(batch)[real])
  distances = ((batch["region_features"][..., None, :] - tiny.centroids()) ** 2).sum(-1)
  np.testing.assert_array_equal(labels, distances.argmin(-1))

  @jax.jit
  def run(params, batch):
    masked, chosen = moc.mask_regions(KEY, batch, float(model.objectives.region_mask_rate))
    logits = model.apply({"params": params}, masked, train=False,
                         method=MultiTaskModel.moc_logits)
    return masked, chosen, logits, moc.loss_fn(model, params, batch, KEY, train=False)

  masked, chosen, logits, (loss, metrics) = jax.tree_util.tree_map(np.asarray,
                                                                    run(params, batch))
  assert chosen.sum() > 0
  assert logits.shape == real.shape + (tiny.NUM_CLUSTERS,)
  hand = _hand_cross_entropy(logits, tiny.true_clusters(batch), chosen)
  np.testing.assert_allclose(float(loss), hand, rtol=1e-5)
  assert float(metrics["num_targets"]) == chosen.sum()
  np.testing.assert_allclose(float(metrics["mask_rate"]), chosen.sum() / real.sum(), rtol=1e-6)
  # The head sees zeros where a region was chosen: its features cannot leak.
  assert not masked["region_features"][chosen].any()


def test_nearest_centroid_is_the_kmeans_assignment():
  rng = np.random.default_rng(0)
  points, centers = rng.normal(size=(50, 3)), rng.normal(size=(6, 3))
  expected = ((points[:, None] - centers[None]) ** 2).sum(-1).argmin(-1)
  np.testing.assert_array_equal(np.asarray(centroids.nearest_centroid(points, centers)), expected)
