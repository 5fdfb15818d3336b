"""Device mesh, logical axis rules and shardings.

Every parameter and every large activation carries *logical* axis names
('embed', 'mlp', 'heads', 'vocab', 'batch', ...). `LOGICAL_AXIS_RULES` maps them
onto the three mesh axes:

  data   pure data parallelism (batch split, parameters replicated)
  fsdp   batch split *and* parameters sharded along their 'embed' dimension
  model  tensor parallelism (heads, MLP hidden units, vocabulary)

The same code therefore runs on 1 CPU device (mesh 1x1x1), on 8 simulated CPU
devices, on one GPU or on a multi-host TPU slice; only `config.mesh` changes.
"""
from __future__ import annotations

import contextlib
from typing import Any, Sequence

import flax.linen as nn
import jax
import ml_collections
import numpy as np
from jax.experimental import mesh_utils
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

MESH_AXES = ("data", "fsdp", "model")
BATCH_AXES = ("data", "fsdp")

# Logical name -> mesh axis (or axes). Parameter names and activation names
# are kept apart ('embed' vs 'act_embed') because FSDP shards the embedding
# dimension of *parameters* while activations are split along the batch.
LOGICAL_AXIS_RULES: tuple[tuple[str, Any], ...] = (
    # Parameters.
    ("embed", "fsdp"),
    ("mlp", "model"),
    ("heads", "model"),
    ("kv", None),
    ("vocab", "model"),
    ("feature", None),      # input feature dimension D
    ("geometry", None),     # the 5 box values
    # Activations.
    ("batch", BATCH_AXES),
    ("act_length", None),
    ("act_embed", None),
    ("act_mlp", "model"),
    ("act_heads", "model"),
    ("act_kv", None),
    ("act_vocab", "model"),
)


def mesh_shape(mesh_cfg: ml_collections.ConfigDict, num_devices: int) -> tuple[int, int, int]:
  """Resolves -1 entries of config.mesh and checks the product."""
  sizes = {a: int(mesh_cfg[a]) for a in MESH_AXES}
  unknown = [a for a, s in sizes.items() if s == -1]
  for a, s in sizes.items():
    if s == 0 or s < -1:
      raise ValueError(f"config.mesh.{a}={s}: must be a positive size or -1.")
  if len(unknown) > 1:
    raise ValueError(f"config.mesh: only one axis may be -1, got {unknown}.")
  known = int(np.prod([s for s in sizes.values() if s != -1]))
  if unknown:
    if num_devices % known:
      raise ValueError(
          f"config.mesh: {num_devices} devices are not divisible by the fixed axes "
          f"(product {known}) so config.mesh.{unknown[0]}=-1 cannot be resolved.")
    sizes[unknown[0]] = num_devices // known
  if int(np.prod(list(sizes.values()))) != num_devices:
    raise ValueError(
        f"config.mesh {sizes} uses {int(np.prod(list(sizes.values())))} devices "
        f"but {num_devices} are available.")
  return tuple(sizes[a] for a in MESH_AXES)  # type: ignore[return-value]


def first_local_devices(count: int, key: str = "--devices") -> list[jax.Device]:
  """The first `count` devices of this host (0: all of them); `key` names the setting."""
  devices = jax.local_devices()
  if not 0 <= count <= len(devices):
    raise ValueError(f"{key}={count}: this host has {len(devices)} local devices")
  return devices[:count or len(devices)]


def make_mesh(mesh_cfg: ml_collections.ConfigDict,
              devices: Sequence[jax.Device] | None = None) -> Mesh:
  """A ('data', 'fsdp', 'model') mesh over `devices` (default: all)."""
  devices = list(jax.devices() if devices is None else devices)
  shape = mesh_shape(mesh_cfg, len(devices))
  try:
    grid = mesh_utils.create_device_mesh(shape, devices=devices)
  except (ValueError, AssertionError, NotImplementedError):
    # Simulated or unusual topologies: a plain row-major layout is fine.
    grid = np.asarray(devices, dtype=object).reshape(shape)
  return Mesh(grid, MESH_AXES)


def batch_sharding(mesh: Mesh) -> NamedSharding:
  """Leading (batch) dimension split over ('data', 'fsdp'), the rest replicated."""
  return NamedSharding(mesh, P(BATCH_AXES))


def replicated(mesh: Mesh) -> NamedSharding:
  return NamedSharding(mesh, P())


def batch_size_per_shard(mesh: Mesh) -> int:
  return int(mesh.shape["data"] * mesh.shape["fsdp"])


def _fit_spec(spec: P, shape: tuple[int, ...], mesh: Mesh, name: str) -> P:
  """Drops mesh axes that do not divide a dimension (that dim is replicated)."""
  entries = list(spec) + [None] * (len(shape) - len(spec))
  fitted = []
  for dim, axes in zip(shape, entries):
    if axes is None:
      fitted.append(None)
      continue
    axes_t = axes if isinstance(axes, tuple) else (axes,)
    size = int(np.prod([mesh.shape[a] for a in axes_t]))
    fitted.append(axes if dim % size == 0 else None)
  return P(*fitted)


def param_shardings(abstract_boxed_params: Any, mesh: Mesh,
                    rules: Sequence[tuple[str, Any]] = LOGICAL_AXIS_RULES) -> Any:
  """NamedShardings for a (boxed, possibly abstract) parameter tree.

  A parameter without logical names is replicated. A dimension that the
  mapped mesh axes do not divide (e.g. an odd vocabulary on model=2) is
  replicated instead of failing, so any vocabulary size works on any mesh.
  """
  specs = nn.get_partition_spec(abstract_boxed_params)
  mesh_specs = nn.logical_to_mesh(specs, rules)
  unboxed = nn.meta.unbox(abstract_boxed_params)

  def one(path, spec, leaf):
    name = jax.tree_util.keystr(path)
    spec = spec if isinstance(spec, P) else P()
    return NamedSharding(mesh, _fit_spec(spec, tuple(leaf.shape), mesh, name))

  return jax.tree_util.tree_map_with_path(
      one, mesh_specs, unboxed, is_leaf=lambda x: isinstance(x, P))


@contextlib.contextmanager
def activation_rules(mesh: Mesh, rules: Sequence[tuple[str, Any]] = LOGICAL_AXIS_RULES):
  """Context in which models' logical activation constraints bind to `mesh`.

  Needed while a jitted step is traced (its first call or `.lower`); the
  resulting constraints are baked into the compiled program.
  """
  with jax.sharding.set_mesh(mesh), nn.logical_axis_rules(rules):
    yield
