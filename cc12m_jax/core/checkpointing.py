"""orbax checkpoints of the train state plus the input iterator's position.

Layout under the workdir (local disk or gs://):
  checkpoints/<step>/state/...      params, opt_state, step, rng (orbax, async)
  input_state/<step>/...            TrainIterator.save(): one file per host,
                                    for the newest INPUT_POSITIONS_KEPT steps

The input position is written (synchronously) *before* the orbax save of the
same step starts, and a step counts as restorable only when both exist, so a
crash between the two falls back to the previous complete step. Restoring
onto a different mesh shape only needs the target shardings.

`Checkpointer.restore_latest` restores the newest step that restores: a
damaged step (files missing, truncated or zeroed, in its state or its input
position) is reported with what is wrong and where, and the step before it is
tried; once one restores, the damaged newer steps are moved to
`checkpoints_damaged/`. When checkpoints exist but none restores, the run
fails (CheckpointError) rather than start again from step 0.

Only the newest steps keep their input position: tf.data's iterator state
holds the whole shuffle buffer of feature records (region features make
that hundreds of MB per step, more at paper size), and a run keeping many
steps for checkpoint selection needs all their parameters but only the
newest step to resume (the one before it is the fallback when the newest is
damaged). Older steps keep their state: they can be evaluated or initialise
a run, not resume one.

A save that fails (a full disk) is one CheckpointSaveError naming the
directory and the OS error.
"""
from __future__ import annotations

import errno as errno_lib
import logging
import os
import re
import sys
from typing import Any, Mapping

import jax
import orbax.checkpoint as ocp
from etils import epath
from jax.experimental import multihost_utils

STATE_ITEM = "state"
DAMAGED_DIR = "checkpoints_damaged"
# The newest step to resume from, and the step to fall back to if it is damaged.
INPUT_POSITIONS_KEPT = 2


class CheckpointError(RuntimeError):
  """Checkpoints exist in the workdir but none can be restored."""


class CheckpointSaveError(RuntimeError):
  """A checkpoint could not be written; names the directory and the OS error."""


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
  """Keeps the last `keep` steps of `checkpoints/` in `workdir`, and the input
  positions (`input_state/`) of the newest INPUT_POSITIONS_KEPT of them."""

  def __init__(self, workdir: str, *, keep: int, use_async: bool = True):
    workdir = resolve_path(workdir)
    self.directory = workdir / "checkpoints"
    self.input_directory = workdir / "input_state"
    self.manager = ocp.CheckpointManager(
        self.directory,
        item_names=(STATE_ITEM,),
        options=ocp.CheckpointManagerOptions(
            max_to_keep=keep, create=True, enable_async_checkpointing=use_async))
    self._pending: int | None = None  # the step of the async save in flight
    self._failed = False              # a save error was reported: do not report it again
    # A failed save reports itself once (CheckpointSaveError), not with the
    # ~2,000 lines orbax and tensorstore print about it.
    for logger in ("absl", "asyncio"):  # orbax logs through absl; idempotent
      logging.getLogger(logger).addFilter(_ORBAX_FILTER)
    if sys.unraisablehook is not _unraisable_hook:
      _previous_unraisable_hook[0] = sys.unraisablehook
      sys.unraisablehook = _unraisable_hook

  def _input_dir(self, step: int) -> epath.Path:
    return self.input_directory / str(step)

  def restorable_steps(self) -> list[int]:
    """Steps with a state and an input position (a quick look: restore_latest
    finds out whether they restore)."""
    steps = self.manager.all_steps()
    return sorted(s for s in steps if self._input_dir(s).exists())

  def latest_step(self) -> int | None:
    steps = self.restorable_steps()
    return steps[-1] if steps else None

  def save(self, step: int, state: Mapping[str, Any], train_iter: Any | None) -> None:
    """Writes the iterator position, then starts the (async) state save.

    Without `train_iter` only the state is written (e.g. the best parameters
    kept by core/selection.py): such a step can initialise a run
    (config.train.init_from) but is not a step to resume from. A failure,
    this save's or the previous async one's, is a CheckpointSaveError.
    """
    self.wait()  # the previous save's error belongs to its own step
    try:
      if train_iter is not None:
        input_dir = self._input_dir(step)
        input_dir.mkdir(parents=True, exist_ok=True)
        train_iter.save(str(input_dir))
      self.manager.save(step, args=ocp.args.Composite(**{
          STATE_ITEM: ocp.args.PyTreeSave(dict(state))}))
    except Exception as e:  # orbax, tensorstore and tf.io raise many kinds
      raise self._save_failed(step, e) from None
    self._pending = step
    self._prune_input_states(keep_also=step)

  def _save_failed(self, step: int, error: BaseException) -> CheckpointSaveError:
    """The one error to report for a failed save of `step`; later waits stay quiet."""
    self._failed = True
    _ORBAX_FILTER.save_failed = True
    os_error = _os_error(error)
    cause = str(os_error) if os_error else _first_line(error)
    where = _written_path(error)
    complete = [s for s in self.restorable_steps() if s != step]
    kept = (f"the last complete checkpoint, step {complete[-1]}, is kept" if complete
            else "no checkpoint was completed")
    message = (f"Could not write the checkpoint of step {step} to "
               f"{self.directory.parent}: {cause}"
               + (f" (writing {where})" if where else "")
               + f"; {kept}. Free space or fix the directory, then run the same command "
               "to resume.")
    return CheckpointSaveError(message)

  def restore_latest(self, target: Mapping[str, Any], shardings: Mapping[str, Any],
                     train_iter: Any | None) -> tuple[int, dict] | None:
    """(step, state) of the newest step that restores; None when there is no checkpoint.

    A step that does not restore is logged (what is wrong, where) and the
    step before it is tried. Once one restores, the newer damaged steps are
    moved to <workdir>/checkpoints_damaged/ (orbax would skip every save up
    to their step otherwise). When none restores: CheckpointError listing
    every step's problem (starting from step 0 would throw the run away).
    """
    steps = sorted(self.manager.all_steps(), reverse=True)
    state_only: list[int] = []
    resumable = self.restorable_steps()  # ascending
    if train_iter is not None and resumable:
      # Steps older than every step with an input position had it pruned on
      # purpose (_prune_input_states): not damaged, and not a step to resume.
      state_only = sorted(s for s in steps if s < resumable[0])
      steps = [s for s in steps if s >= resumable[0]]
    problems: dict[int, str] = {}
    for step in steps:
      try:
        state = self.restore(step, target, shardings, train_iter)
      except Exception as e:  # orbax / tensorstore / tf: ValueError, KeyError, plain Exception...
        problems[step] = self._describe_damage(step, e)
        logging.error("Checkpoint step %d cannot be restored: %s", step, problems[step])
        continue
      if problems:
        self._set_aside(sorted(problems))
        logging.warning("Resumed from step %d, the newest checkpoint that restores; the damaged "
                        "newer step(s) %s were moved to %s.", step, sorted(problems),
                        self.directory.parent / DAMAGED_DIR)
      return step, state
    if steps:
      listing = "\n  ".join(f"step {s}: {p}" for s, p in problems.items())
      if state_only:
        listing += (f"\n  steps {state_only}: parameters only (input positions are kept for "
                    f"the newest {INPUT_POSITIONS_KEPT} steps); they can be evaluated or "
                    "initialise a run (config.train.init_from), not resume one")
      raise CheckpointError(
          f"No checkpoint in {self.directory} can be restored, so the run cannot resume "
          f"(and starting from step 0 would discard it):\n  {listing}\n"
          f"Restore the files, or move {self.directory} and {self.input_directory} aside to "
          "start afresh.")
    return None

  def _describe_damage(self, step: int, error: BaseException) -> str:
    """What is wrong with `step` (missing or empty files, where) and the restore error."""
    step_dir = self.directory / str(step)
    state_dir = step_dir / STATE_ITEM
    found = []
    if not state_dir.exists():
      found.append(f"{state_dir} is missing")
    else:
      for name in ("manifest.ocdbt", "_METADATA"):
        if not (state_dir / name).exists():
          found.append(f"{state_dir / name} is missing")
      if not (state_dir / "d").exists():
        found.append(f"{state_dir / 'd'} is missing")
      # A walk of one step's few dozen files, only once its restore failed.
      for root, _, names in state_dir.walk():
        found += [f"{root / n} is empty" for n in names if (root / n).stat().length == 0]
    if not self._input_dir(step).exists():
      found.append(f"{self._input_dir(step)} (the input position) is missing")
    return "; ".join(found + [f"restore failed: {_first_line(error)}"])

  def _set_aside(self, steps: list[int]) -> None:
    """Moves damaged `steps` (state and input position) to checkpoints_damaged/<step>."""
    _sync("cc12m_jax_checkpoint_set_aside_start")
    if jax.process_index() == 0:
      damaged = self.directory.parent / DAMAGED_DIR
      damaged.mkdir(parents=True, exist_ok=True)
      for step in steps:
        target = damaged / str(step)
        suffix = 0
        while target.exists():  # the same step damaged again in an earlier attempt
          suffix += 1
          target = damaged / f"{step}.{suffix}"
        (self.directory / str(step)).rename(target)
        if self._input_dir(step).exists():
          self._input_dir(step).rename(target / "input_state")
    _sync("cc12m_jax_checkpoint_set_aside_done")
    self.manager.reload()

  def _prune_input_states(self, keep_also: int) -> None:
    if jax.process_index() != 0 or not self.input_directory.exists():
      return
    # keep_also: the step just saved, which an async save may not list yet.
    kept = set(sorted(set(self.manager.all_steps()) | {keep_also})[-INPUT_POSITIONS_KEPT:])
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
    """Waits for the async save in flight; its failure is a CheckpointSaveError."""
    if self._failed:
      return
    try:
      self.manager.wait_until_finished()
    except Exception as e:  # orbax re-raises its writer threads' errors here
      raise self._save_failed(self._pending, e) from None

  def close(self) -> None:
    """Finishes the save in flight (an error unless one was already reported) and closes."""
    try:
      self.wait()
    finally:
      try:
        self.manager.close()
      except Exception:  # pylint: disable=broad-except
        if not self._failed:
          raise


def _sync(name: str) -> None:
  """A barrier of all processes (none needed with one)."""
  if jax.process_count() > 1:
    multihost_utils.sync_global_devices(name)


def _chain(error: BaseException) -> list[BaseException]:
  """`error` and its causes / contexts, outermost first."""
  out, seen = [], set()
  while error is not None and id(error) not in seen:
    seen.add(id(error))
    out.append(error)
    error = error.__cause__ or error.__context__
  return out


def _first_line(error: BaseException, limit: int = 400) -> str:
  """Type and first line of `error`, with its innermost cause's when that says more."""
  parts = []
  for e in _chain(error):
    line = (str(e).strip().splitlines() or [""])[0]
    parts.append(f"{type(e).__name__}: {line[:limit]}")
  return parts[0] if len(parts) == 1 else f"{parts[0]} (from {parts[-1]})"


# tensorstore reports OS errors as text: "... [os_error_code='28']".
_OS_ERROR_CODE = re.compile(r"os_error_code=\W*(\d+)")
_ERRNO_TEXT = {os.strerror(n): n for n in (errno_lib.ENOSPC, errno_lib.EFBIG, errno_lib.EDQUOT,
                                            errno_lib.EROFS, errno_lib.EACCES, errno_lib.EIO)}


def _os_error(error: BaseException) -> OSError | None:
  """The OS error behind a failed write, from the exception chain or its text."""
  for e in _chain(error):
    if isinstance(e, OSError) and e.errno:
      return e
  for e in _chain(error):
    text = str(e)
    match = _OS_ERROR_CODE.search(text)
    if match:
      code = int(match.group(1))
      return OSError(code, os.strerror(code))
    for strerror, code in _ERRNO_TEXT.items():
      if strerror in text:
        return OSError(code, strerror)
  return None


# The file a failed write names, most specific first: tensorstore's
# 'Failed writing: "<path>"', tf.io's '<path>; No space left on device'.
_WRITTEN_PATHS = [re.compile(r'Failed (?:writing|to open)[^"]*"([^"]+)"'),
                  re.compile(r"(\S+); (?:" + "|".join(map(re.escape, _ERRNO_TEXT)) + ")"),
                  re.compile(r'local file "([^"]+)"')]


def _written_path(error: BaseException) -> str | None:
  for pattern in _WRITTEN_PATHS:
    for e in _chain(error):
      match = pattern.search(str(e))
      if match:
        return match.group(1)
  return None


class _OrbaxTracebacksOff(logging.Filter):
  """Keeps orbax's error lines but not their tracebacks: one failed save logs
  the same error with a traceback from each of its threads (~500 lines on a
  full disk), burying the CheckpointSaveError that says what happened. On
  the asyncio logger: drops 'Task exception was never retrieved' of the
  write tasks orbax abandons after the failure, and, once a failed save has
  been reported, 'Future exception was never retrieved' of tensorstore's
  write futures (their exceptions come from C++, with no orbax frame to tell
  them by; when the collector meets them, they may print after the error)."""

  save_failed = False

  def filter(self, record: logging.LogRecord) -> bool:
    if (self.save_failed and record.name == "asyncio"
        and "exception was never retrieved" in record.getMessage()):
      return False
    if not record.exc_info:
      return True
    if "/orbax/" in record.pathname:
      record.exc_info, record.exc_text = None, None
      return True
    traceback = record.exc_info[2]
    while traceback is not None:
      if "/orbax/" in traceback.tb_frame.f_code.co_filename:
        return False
      traceback = traceback.tb_next
    return True


_ORBAX_FILTER = _OrbaxTracebacksOff()


def _orbax_aftermath(unraisable: Any) -> bool:
  """An unraisable error that only repeats a failed orbax save: tensorstore
  callbacks finding orbax's per-save event loop closed (hundreds of them
  after one failed write), and the abandoned write coroutines collected at
  exit."""
  error, obj = unraisable.exc_value, unraisable.object
  if isinstance(error, RuntimeError) and str(error) == "Event loop is closed":
    return True
  code = getattr(obj, "cr_code", None)
  return code is not None and "/orbax/" in code.co_filename


def _unraisable_hook(unraisable: Any) -> None:
  if not _orbax_aftermath(unraisable):
    _previous_unraisable_hook[0](unraisable)


# The hook _unraisable_hook passes everything else to (set when installed).
_previous_unraisable_hook = [sys.__unraisablehook__]


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
