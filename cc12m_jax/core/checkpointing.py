"""orbax checkpoints of the train state plus the input iterator's position.

Layout under the workdir (local disk or gs://):
  checkpoints/<step>/state/...      params, opt_state, step, rng (orbax, async)
  input_state/<step>/...            TrainIterator.save(): one file per host

The input position is written (synchronously) *before* the orbax save of the
same step starts, and a step counts as restorable only when both exist, so a
crash between the two falls back to the previous complete step. Restoring
onto a different mesh shape only needs the target shardings.
"""
from __future__ import annotations

import logging
import os
from typing import Any, Mapping

import jax
import orbax.checkpoint as ocp
from etils import epath

STATE_ITEM = "state"


def _abstract(tree: Any, shardings: Any) -> Any:
  return jax.tree_util.tree_map(
      lambda x, s: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=s), tree, shardings)


def resolve_path(path: str) -> epath.Path:
  """`path` as orbax needs it: local paths made absolute, URLs (gs://...) as given.

  orbax's tensorstore writer rejects relative directories ("Checkpoint path
  should be absolute"), and a relative --workdir is the natural thing to type.
  """
  path = str(path)
  return epath.Path(path if "://" in path else os.path.abspath(path))


class Checkpointer:
  """Keeps the last `keep` steps of `checkpoints/` and `input_state/` in `workdir`."""

  def __init__(self, workdir: str, *, keep: int, use_async: bool = True):
    workdir = resolve_path(workdir)
    self.directory = workdir / "checkpoints"
    self.input_directory = workdir / "input_state"
    self.manager = ocp.CheckpointManager(
        self.directory,
        item_names=(STATE_ITEM,),
        options=ocp.CheckpointManagerOptions(
            max_to_keep=keep, create=True, enable_async_checkpointing=use_async))

  def _input_dir(self, step: int) -> epath.Path:
    return self.input_directory / str(step)

  def restorable_steps(self) -> list[int]:
    steps = self.manager.all_steps()
    return sorted(s for s in steps if self._input_dir(s).exists())

  def latest_step(self) -> int | None:
    steps = self.restorable_steps()
    return steps[-1] if steps else None

  def save(self, step: int, state: Mapping[str, Any], train_iter: Any | None) -> None:
    """Writes the iterator position, then starts the (async) state save.

    Without `train_iter` only the state is written (e.g. the best parameters
    kept by core/selection.py): such a step can initialise a run
    (config.train.init_from) but is not a step to resume from.
    """
    if train_iter is not None:
      input_dir = self._input_dir(step)
      input_dir.mkdir(parents=True, exist_ok=True)
      train_iter.save(str(input_dir))
    self.manager.save(step, args=ocp.args.Composite(**{STATE_ITEM: ocp.args.PyTreeSave(dict(state))}))
    self._prune_input_states(keep_also=step)

  def _prune_input_states(self, keep_also: int) -> None:
    if jax.process_index() != 0 or not self.input_directory.exists():
      return
    kept = set(self.manager.all_steps()) | {keep_also}
    for child in self.input_directory.iterdir():
      if child.name.isdigit() and int(child.name) not in kept:
        child.rmtree()

  def restore(self, step: int, target: Mapping[str, Any], shardings: Mapping[str, Any],
              train_iter: Any | None) -> dict:
    """Restores `step` onto `shardings` (any mesh) and repositions `train_iter`."""
    abstract = _abstract(dict(target), dict(shardings))
    restore_args = ocp.checkpoint_utils.construct_restore_args(abstract)
    restored = self.manager.restore(step, args=ocp.args.Composite(**{
        STATE_ITEM: ocp.args.PyTreeRestore(item=abstract, restore_args=restore_args)}))
    if train_iter is not None:
      train_iter.restore(str(self._input_dir(step)))
    return dict(restored[STATE_ITEM])

  def wait(self) -> None:
    self.manager.wait_until_finished()

  def close(self) -> None:
    self.manager.wait_until_finished()
    self.manager.close()


class InitFromError(ValueError):
  """A pre-trained checkpoint does not fit the model being fine-tuned."""


def checkpoint_directory(path: str, key: str = "config.train.init_from") -> epath.Path:
  """`<path>/checkpoints` for a workdir, else `path` itself; errors name the config `key`."""
  directory = resolve_path(path)
  if (directory / "checkpoints").exists():
    directory = directory / "checkpoints"
  if not directory.exists():
    raise InitFromError(f"{key}={path!r}: no such checkpoint directory.")
  return directory


def _state_manager(directory: epath.Path) -> ocp.CheckpointManager:
  return ocp.CheckpointManager(
      directory, item_handlers={STATE_ITEM: ocp.PyTreeCheckpointHandler()})


def saved_steps(path: str, key: str = "config.train.init_from") -> list[int]:
  """Sorted checkpoint steps under `path` (a workdir or a checkpoints directory)."""
  directory = checkpoint_directory(path, key)
  manager = _state_manager(directory)
  steps = sorted(manager.all_steps())
  manager.close()
  if not steps:
    raise InitFromError(f"{key}={path!r}: no checkpoint steps in {directory}.")
  return steps


def load_pretrained_params(init_from: str, step: int, target_params: Any,
                           param_shardings: Any, *, key: str = "config.train.init_from",
                           step_key: str = "config.train.init_step",
                           fresh_params: Any | None = None) -> tuple[Any, int]:
  """Parameters of `init_from/checkpoints/<step>` (step -1: latest), checked against the model.

  Every model parameter must exist in the checkpoint with the same shape; a
  difference in the vocabulary dimension is reported as a vocabulary
  mismatch. Optimizer state and step are not loaded. `key` / `step_key` are
  the config fields that named the directory and step, for error messages.

  With `fresh_params` (the model's own initial parameters, a tree like
  `target_params`: config.train.init_partial) the load is partial: a
  parameter the checkpoint lacks keeps its fresh value, e.g. the decoder
  when an mlm encoder is fine-tuned for captioning. Both lists are logged.
  Shapes must still match (a different vocabulary is a mistake, not a part
  to start afresh), and at least one parameter must load.
  """
  manager, step, saved = _open_step(init_from, step, key, step_key)
  if fresh_params is not None:
    return _load_partial(manager, step, saved, init_from, target_params, param_shardings,
                         fresh_params, key=key)
  _check_param_shapes(saved, target_params, init_from)
  abstract = _abstract({"params": target_params}, {"params": param_shardings})
  restore_args = ocp.checkpoint_utils.construct_restore_args(abstract)
  restored = manager.restore(step, args=ocp.args.Composite(**{
      STATE_ITEM: ocp.args.PyTreeRestore(item=abstract, restore_args=restore_args,
                                         partial_restore=True)}))
  manager.close()
  params = restored[STATE_ITEM]["params"]
  names = [jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_leaves_with_path(params)]
  logging.info("Loaded %d parameter arrays from %s step %d:\n  %s", len(names), init_from, step,
               "\n  ".join(names))
  return params, step


def _open_step(init_from: str, step: int, key: str, step_key: str
               ) -> tuple[ocp.CheckpointManager, int, Any]:
  """(manager, the step, the saved parameters' metadata) of `init_from`; step -1: latest."""
  directory = checkpoint_directory(init_from, key)
  manager = _state_manager(directory)
  steps = manager.all_steps()
  if not steps:
    raise InitFromError(f"{key}={init_from!r}: no checkpoint steps in {directory}.")
  if step < 0:
    step = max(steps)
  elif step not in steps:
    raise InitFromError(f"{step_key}={step} not in {init_from!r} (has {sorted(steps)}).")
  return manager, step, manager.item_metadata(step)[STATE_ITEM]["params"]


def _load_partial(manager: ocp.CheckpointManager, step: int, saved: Any, init_from: str,
                  target_params: Any, param_shardings: Any, fresh_params: Any, *,
                  key: str) -> tuple[Any, int]:
  """load_pretrained_params with fresh values for the parameters the checkpoint lacks."""
  _check_param_shapes(saved, target_params, init_from, allow_missing=True)
  saved_names = {jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_leaves_with_path(saved)}
  flat_target = jax.tree_util.tree_leaves_with_path(target_params)
  flat_shardings = jax.tree_util.tree_leaves(param_shardings)
  present: dict = {}  # the nested sub-tree of the parameters the checkpoint has
  for (path, leaf), leaf_sharding in zip(flat_target, flat_shardings):
    if jax.tree_util.keystr(path) in saved_names:
      node = present
      for part in path[:-1]:
        node = node.setdefault(part.key, {})
      node[path[-1].key] = jax.ShapeDtypeStruct(leaf.shape, leaf.dtype, sharding=leaf_sharding)
  if not present:
    raise InitFromError(f"{key}={init_from!r}: the checkpoint has none of the model's "
                        "parameters.")
  abstract = {"params": present}
  restore_args = ocp.checkpoint_utils.construct_restore_args(abstract)
  restored = manager.restore(step, args=ocp.args.Composite(**{
      STATE_ITEM: ocp.args.PyTreeRestore(item=abstract, restore_args=restore_args,
                                         partial_restore=True)}))
  manager.close()
  loaded = {jax.tree_util.keystr(p): v for p, v in
            jax.tree_util.tree_leaves_with_path(restored[STATE_ITEM]["params"])}
  fresh = [jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_leaves_with_path(fresh_params)
           if jax.tree_util.keystr(p) not in loaded]
  params = jax.tree_util.tree_map_with_path(
      lambda p, v: loaded.get(jax.tree_util.keystr(p), v), fresh_params)
  logging.info("Loaded %d parameter arrays from %s step %d:\n  %s", len(loaded), init_from,
               step, "\n  ".join(sorted(loaded)))
  logging.warning("%d parameter arrays are not in %s and start fresh "
                  "(config.train.init_partial):\n  %s", len(fresh), init_from,
                  "\n  ".join(fresh) or "(none)")
  return params, step


def _check_param_shapes(saved: Any, target: Any, source: str, *,
                        allow_missing: bool = False) -> None:
  saved_flat = {jax.tree_util.keystr(p): tuple(v.shape)
                for p, v in jax.tree_util.tree_leaves_with_path(saved)}
  errors = []
  for path, leaf in jax.tree_util.tree_leaves_with_path(target):
    name = jax.tree_util.keystr(path)
    if name not in saved_flat:
      if not allow_missing:
        errors.append(f"{name}: missing in checkpoint")
    elif saved_flat[name] != tuple(leaf.shape):
      kind = ("vocabulary mismatch" if ("text_embedding" in name and "lookup" in name)
              or "logits_projection" in name else "shape mismatch")
      errors.append(f"{name}: {kind}: checkpoint {saved_flat[name]} vs model {tuple(leaf.shape)}")
  if errors:
    hint = ("\n(config.train.init_partial=True starts the missing parameters fresh, e.g. the "
            "decoder of an mlm encoder)" if any(e.endswith("missing in checkpoint")
                                                for e in errors) else "")
    raise InitFromError(f"Cannot initialise from {source!r}:\n  " + "\n  ".join(errors) + hint)
