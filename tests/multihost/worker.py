"""`python -m tests.multihost.worker`: cc12m_jax.main with a record of the rows each process fed.

The same flags as cc12m_jax.main (so launch/multiprocess_cpu.sh runs it with
MODULE=tests.multihost.worker), plus
  --rows_dir=DIR   after every step, append to DIR/process_<i>.jsonl the step and,
                   for each row of the global batch this process holds, its
                   position in the global batch and a fingerprint of its
                   global_feature (unique per image in the synthetic world), so
                   tests can tell which process read which example when.
"""
import hashlib
import json
import os

import jax
import numpy as np
from absl import app, flags

from cc12m_jax import config_check, main as cc12m_main

_ROWS_DIR = flags.DEFINE_string("rows_dir", "", "Per-process row fingerprints go here.")


def fingerprint(row: np.ndarray) -> str:
  return hashlib.sha1(np.ascontiguousarray(row, np.float32).tobytes()).hexdigest()[:16]


def local_rows(batch_array: jax.Array) -> list[tuple[int, str]]:
  """(global row index, fingerprint) of every row of `batch_array` this process holds."""
  rows = {}
  for shard in batch_array.addressable_shards:
    start = shard.index[0].start or 0
    for offset, row in enumerate(np.asarray(shard.data)):
      rows[start + offset] = fingerprint(row)  # replicas of a row agree
  return sorted(rows.items())


def row_recorder(path: str):
  """An on_step callback appending {"step", "rows"} lines to `path`."""
  def on_step(event) -> None:
    with open(path, "a") as f:
      f.write(json.dumps({"step": event.step,
                          "rows": local_rows(event.batch["global_feature"])}) + "\n")
  return on_step


def main(argv):
  del argv
  config = cc12m_main.CONFIG.value
  cc12m_main.prepare(config)
  on_step = None
  if _ROWS_DIR.value:
    os.makedirs(_ROWS_DIR.value, exist_ok=True)
    on_step = row_recorder(os.path.join(_ROWS_DIR.value, f"process_{jax.process_index()}.jsonl"))
  cc12m_main.run(config, cc12m_main.WORKDIR.value, on_step=on_step)


if __name__ == "__main__":
  app.run(main, flags_parser=config_check.parse_flags)
