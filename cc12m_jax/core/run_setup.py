"""RunSetup: the model, mesh and shardings of one run, and its parameter restore.

Built once per run from a validated config (cc12m_jax/config_rules.py), then
handed to the trainer and to the evaluators, so both see the same model on
the same mesh. Nothing here compiles or allocates parameters: shapes come from
`jax.eval_shape`. Nothing here imports TensorFlow either (the dimensions come
from the vocabulary file and metadata.json, read through etils.epath), so the
train step builds and runs where only JAX is installed.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import flax.linen as nn
import jax
import ml_collections
from jax.sharding import Mesh

from cc12m_jax import sharding
from cc12m_jax.core import checkpointing
from cc12m_jax.data import batch_spec, sources as sources_lib
from cc12m_jax.data.text import vocab_file
from cc12m_jax.objectives import registry


def resolve_data_dims(config: ml_collections.ConfigDict) -> tuple[int, int]:
  """(vocab_size, feature_dim) from config, or from the vocabulary / metadata when 0."""
  vocab_size, feature_dim = int(config.model.vocab_size), int(config.model.feature_dim)
  if vocab_size == 0:
    vocab_size = len(vocab_file.load_vocab(sources_lib.vocab_path(config.data)))
  if feature_dim == 0:
    sources = [s.name for s in sources_lib.train_sources(config.data)]
    feature_dim = int(sources_lib.feature_dim(config.data, sources))
  return vocab_size, feature_dim


def abstract_params_and_shardings(model: nn.Module, dummy_batch: Mapping[str, Any],
                                  mesh: Mesh) -> tuple[Any, Any]:
  """(abstract unboxed params, NamedShardings) without running the init."""
  boxed = jax.eval_shape(
      lambda: model.init({"params": jax.random.PRNGKey(0)}, dummy_batch, train=False)["params"])
  return nn.meta.unbox(boxed), sharding.param_shardings(boxed, mesh)


class RunSetup:
  """Model, mesh, shardings and the abstract parameters of one run."""

  def __init__(self, config: ml_collections.ConfigDict,
               devices: Sequence[jax.Device] | None = None):
    self.config = config
    self.mesh = sharding.make_mesh(config.mesh, devices)
    self.batch_sharding = sharding.batch_sharding(self.mesh)
    self.vocab_size, self.feature_dim = resolve_data_dims(config)
    self.objective = registry.get(config.train.objective)
    self.model = self.objective.build_model(config, self.vocab_size)
    self.dims = batch_spec.Dims(batch=1, feature_dim=self.feature_dim,
                                tag_tokens=config.data.max_tag_tokens,
                                caption_length=config.data.max_caption_length)
    self.dummy_batch = registry.dummy_batch(self.objective, self.dims)
    self.abstract_params, self.param_shardings = abstract_params_and_shardings(
        self.model, self.dummy_batch, self.mesh)

  def restore_params(self, directory: str, step: int = -1, *,
                     key: str = "config.eval.checkpoint_dir",
                     step_key: str = "config.eval.checkpoint_step") -> tuple[Any, int]:
    """(params, step) of `directory`'s checkpoint `step` (-1: latest), onto this mesh.

    Every parameter is checked against the model first; `key` / `step_key`
    name the config fields that chose the directory and step, for errors.
    """
    return checkpointing.load_pretrained_params(directory, step, self.abstract_params,
                                                self.param_shardings, key=key,
                                                step_key=step_key)
