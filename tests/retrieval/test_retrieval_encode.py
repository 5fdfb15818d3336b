"""Gallery/query encoding in batches over 8 devices equals direct encoding."""
import flax.linen as nn
import jax
import numpy as np
import pytest

from cc12m_jax import sharding
from cc12m_jax.data import karpathy
from cc12m_jax.evaluation import retrieval_eval
from cc12m_jax.models import dual_encoder
from cc12m_jax.objectives import contrastive
from tests.retrieval import tiny


def test_encoding_in_shuffled_padded_batches_equals_direct_encoding():
  config = tiny.model_config(num_encoder_layers=1, text_encoder_layers=1)
  with config.unlocked():
    config.mesh.data, config.mesh.fsdp = 4, 2
  mesh = sharding.make_mesh(config.mesh, jax.devices())
  model = contrastive.build_model(config, tiny.VOCAB_SIZE)
  data = tiny.random_batch(np.random.default_rng(0), 21, config)
  params = nn.meta.unbox(model.init(jax.random.PRNGKey(0), data, train=False)["params"])
  direct_images = model.apply({"params": params}, data, train=False,
                              method=dual_encoder.DualEncoder.encode_image)
  direct_texts = model.apply({"params": params}, data["decoder_targets"], train=False,
                             method=dual_encoder.DualEncoder.encode_text)

  # An eval iterator's view: examples in a shuffled order, batches of 8, the
  # last one padded with masked rows.
  order = np.random.default_rng(1).permutation(21)
  batches = []
  for start in range(0, 24, 8):
    idx = order[start:start + 8]
    real = idx.size
    idx = np.pad(idx, (0, 8 - real))
    batch = {k: v[idx] for k, v in data.items()}
    batch["example_index"] = idx.astype(np.int32)
    batch["example_mask"] = np.arange(8) < real
    batches.append(jax.device_put(batch, sharding.batch_sharding(mesh)))
  images = retrieval_eval.encode_images(model, params, batches, 21, mesh)
  np.testing.assert_allclose(images, direct_images, rtol=1e-4, atol=1e-5)

  texts = retrieval_eval.encode_texts(model, params, data["decoder_targets"], mesh, batch_size=5)
  np.testing.assert_allclose(texts, direct_texts, rtol=1e-4, atol=1e-5)

  # A missing example is an error, not a silently zero gallery row.
  with pytest.raises(ValueError, match="never arrived"):
    retrieval_eval.encode_images(model, params, batches[:2], 21, mesh)


def test_queries_from_records_and_split_names():
  captions, owner = retrieval_eval.queries_from_records([["a", "b"], ["c"]])
  assert captions == ["a", "b", "c"] and owner.tolist() == [0, 0, 1]
  assert karpathy.split_of_source("flickr_test") == "test"
  assert karpathy.split_of_source("flickr_val") == "val"
  with pytest.raises(ValueError, match="'nocaps'"):
    karpathy.split_of_source("nocaps")
