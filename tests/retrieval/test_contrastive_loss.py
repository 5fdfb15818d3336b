"""The vlm contrastive loss against a direct numpy computation."""
import numpy as np
import pytest

from cc12m_jax.objectives import contrastive


def _numpy_loss(img, txt, tau, mask=None):
  """Paper Section 3 formula, written out with float64 numpy."""
  img = img.astype(np.float64)
  txt = txt.astype(np.float64)
  if mask is not None:
    img, txt = img[mask], txt[mask]
  s = img @ txt.T / tau  # [B, B]

  def direction(s):
    out = []
    for i in range(s.shape[0]):
      out.append(-(s[i, i] - np.log(np.sum(np.exp(s[i] - s[i].max()))) - s[i].max()))
    acc = np.mean([np.argmax(s[i]) == i for i in range(s.shape[0])])
    return np.mean(out), acc

  return direction(s), direction(s.T)


@pytest.mark.parametrize("tau", [0.05, 1.0])
def test_image_to_text_loss_matches_numpy(tau):
  rng = np.random.default_rng(0)
  img = rng.normal(size=(12, 16)).astype(np.float32) * 0.3
  txt = rng.normal(size=(12, 16)).astype(np.float32) * 0.3
  loss, metrics = contrastive.contrastive_loss(img, txt, tau)
  (i2t, i2t_acc), _ = _numpy_loss(img, txt, tau)
  np.testing.assert_allclose(loss, i2t, rtol=1e-5)
  np.testing.assert_allclose(metrics["loss"], i2t, rtol=1e-5)
  np.testing.assert_allclose(metrics["i2t_accuracy"], i2t_acc)
  assert "t2i_loss" not in metrics
  np.testing.assert_allclose(metrics["temperature"], tau)


def test_symmetric_loss_is_mean_of_both_directions():
  rng = np.random.default_rng(1)
  img = rng.normal(size=(9, 8)).astype(np.float32)
  txt = (img + 0.5 * rng.normal(size=(9, 8))).astype(np.float32)
  loss, metrics = contrastive.contrastive_loss(img, txt, 0.1, symmetric=True)
  (i2t, i2t_acc), (t2i, t2i_acc) = _numpy_loss(img, txt, 0.1)
  assert abs(i2t - t2i) > 1e-3  # the two directions really differ here
  np.testing.assert_allclose(metrics["i2t_loss"], i2t, rtol=1e-5)
  np.testing.assert_allclose(metrics["t2i_loss"], t2i, rtol=1e-5)
  np.testing.assert_allclose(loss, 0.5 * (i2t + t2i), rtol=1e-5)
  np.testing.assert_allclose(metrics["t2i_accuracy"], t2i_acc)
  np.testing.assert_allclose(metrics["i2t_accuracy"], i2t_acc)


def test_masked_examples_are_neither_scored_nor_negatives():
  rng = np.random.default_rng(2)
  img = rng.normal(size=(10, 8)).astype(np.float32)
  txt = rng.normal(size=(10, 8)).astype(np.float32)
  mask = np.array([1, 1, 0, 1, 1, 1, 0, 1, 1, 0], bool)
  loss, metrics = contrastive.contrastive_loss(img, txt, 0.2, symmetric=True,
                                               example_mask=mask)
  (i2t, i2t_acc), (t2i, _) = _numpy_loss(img, txt, 0.2, mask)
  np.testing.assert_allclose(metrics["i2t_loss"], i2t, rtol=1e-5)
  np.testing.assert_allclose(metrics["t2i_loss"], t2i, rtol=1e-5)
  np.testing.assert_allclose(metrics["i2t_accuracy"], i2t_acc)
  assert np.isfinite(loss)


def test_perfect_alignment_gives_full_accuracy_and_low_loss():
  img = np.eye(6, dtype=np.float32)
  loss, metrics = contrastive.contrastive_loss(img, img, 0.01)
  assert metrics["i2t_accuracy"] == 1.0
  assert loss < 1e-30 + 6 * np.exp(-100) + 1e-6


def test_shape_mismatch_is_an_error():
  with pytest.raises(ValueError, match="must both be"):
    contrastive.contrastive_loss(np.zeros((4, 3)), np.zeros((5, 3)), 0.1)
