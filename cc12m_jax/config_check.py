"""Checks `--config.a.b=v` overrides against the loaded config before flags are parsed.

ml_collections looks an override's path up while absl parses flags and an
unknown key escapes as a bare `AttributeError: "'foo'"` traceback. This check
runs first, on the same config file, and reports the full key and the closest
known one:

  unknown config key config.model.emb_dims (from --config.model.emb_dims=64);
  did you mean config.model.emb_dim?

Values of the wrong type are left to absl, which already reports them cleanly.
"""
from __future__ import annotations

import difflib
import re
import sys
from typing import Any, Sequence

import ml_collections
from absl import app, flags


class UnknownOverrideError(flags.Error):
  """An override names a key that the config does not have."""


def _config_arg(argv: Sequence[str], name: str) -> str | None:
  """The value of `--name=path` / `--name path` in argv (the last one wins), else None."""
  path = None
  for i, arg in enumerate(argv):
    match = re.match(rf"^--?{re.escape(name)}(=(.*))?$", arg)
    if match and match.group(1):
      path = match.group(2)
    elif match and i + 1 < len(argv):
      path = argv[i + 1]
  return path


def _overrides(argv: Sequence[str], name: str) -> list[tuple[str, str]]:
  """(dotted path after `name.`, the argument as written) for each override in argv."""
  pattern = re.compile(rf"^--?(?:no)?{re.escape(name)}\.([^=]+)")
  return [(m.group(1), arg) for arg in argv if (m := pattern.match(arg))]


def _suggestion(node: ml_collections.ConfigDict, wrong: str, is_last: bool) -> str | None:
  """The key of `node` closest to `wrong`; only sections when the path goes deeper."""
  keys = [k for k in node.keys() if is_last or isinstance(node[k], ml_collections.ConfigDict)]
  matches = difflib.get_close_matches(wrong, keys, n=1)
  return matches[0] if matches else None


def unknown_key_message(config: ml_collections.ConfigDict, path: str, name: str = "config",
                        arg: str | None = None) -> str | None:
  """A one-line error if `path` (e.g. 'model.foo') is not a key of `config`, else None.

  Paths into values that are not ConfigDicts (lists, dataclasses) or that use
  `[i]` indexing are left to ml_collections.
  """
  node: Any = config
  parts = path.split(".")
  source = f" (from {arg})" if arg else ""
  for depth, part in enumerate(parts):
    if "[" in part or not isinstance(node, ml_collections.ConfigDict):
      return None
    is_last = depth + 1 == len(parts)
    parent = ".".join([name, *parts[:depth]])
    if part not in node:
      message = f"unknown config key {name}.{path}{source}"
      close = _suggestion(node, part, is_last)
      if close is not None:
        return message + f"; did you mean {'.'.join([parent, close, *parts[depth + 1:]])}?"
      return message + f"; {parent} has no key {part!r} (its keys: {', '.join(sorted(node))})"
    node = node[part]
    if not is_last and (node is None or isinstance(node, (bool, int, float, str))):
      return (f"unknown config key {name}.{path}{source}; {parent}.{part} is a value "
              f"({type(node).__name__}), not a section")
  return None


def check_overrides(argv: Sequence[str], name: str = "config") -> None:
  """Raises UnknownOverrideError for the first `--name.x.y` override that names no key.

  Loads the config file named by `--name` with the parser of the `name` flag
  (DEFINE_config_file), as absl will; if there is none, or it cannot be loaded,
  absl reports that when it parses the flags.
  """
  argv = flags.FLAGS.read_flags_from_files(list(argv), force_gnu=False)  # expand --flagfile
  overrides = _overrides(argv, name)
  path = _config_arg(argv, name)
  if not overrides or path is None:
    return
  try:
    config = flags.FLAGS[name].parser.parse(path)
  except (TypeError, ValueError):
    return  # a broken config file: absl reports it, with its traceback, while parsing
  if not isinstance(config, ml_collections.ConfigDict):
    return
  for key, arg in overrides:
    message = unknown_key_message(config, key, name, arg)
    if message is not None:
      raise UnknownOverrideError(message)


def parse_flags(argv: Sequence[str], *, known_only: bool = False) -> list[str]:
  """An absl `flags_parser`: absl's own parsing, with unknown override keys explained.

  The config file is executed once, by absl. Only when parsing fails is it
  loaded again, to name an unknown key and the closest known one: one line in
  absl's format for flag errors, exit 1, before any compute. `known_only=True`
  leaves unknown flags in the returned argv (for programs that pass them on,
  e.g. to Apache Beam).
  """
  try:
    if known_only:
      return flags.FLAGS(list(argv), known_only=True)
    return app.parse_flags_with_usage(list(argv))
  except (AttributeError, KeyError, flags.Error):
    # ml_collections reports an unknown override key as a bare AttributeError
    # (or KeyError); find which key it was.
    try:
      check_overrides(argv)
    except UnknownOverrideError as e:
      sys.stderr.write(f"FATAL Flags parsing error: {e}\n")
      sys.exit(1)
    raise
