"""`python -m tests.train.harness`: cc12m_jax.main's training with test-only faults.

The same flags as cc12m_jax.main, plus
  --digests=PATH      append {"step", "digest"} per step: a checksum of the
                      step's batch targets, so two runs can be shown to have
                      seen the same examples in the same order;
  --kill_at_step=N    SIGKILL this process right after step N, once its
                      checkpoint (if any) is durable: a preempted VM, no clean-up.
  --pause_at_step=N --resume_file=PATH
                      right after step N (its checkpoint durable) create
                      PATH.waiting, then wait until PATH exists: a run held
                      mid-way while a test does something beside it.
"""
import hashlib
import json
import os
import signal
import time

import numpy as np
from absl import app, flags

from cc12m_jax import config_check, main as cc12m_main

_DIGESTS = flags.DEFINE_string("digests", "", "Per-step batch digests (JSON lines) go here.")
_KILL_AT_STEP = flags.DEFINE_integer("kill_at_step", -1, "SIGKILL after this step (-1: never).")
_PAUSE_AT_STEP = flags.DEFINE_integer("pause_at_step", -1, "Wait for --resume_file after this "
                                      "step (-1: never).")
_RESUME_FILE = flags.DEFINE_string("resume_file", "", "See --pause_at_step.")


def batch_digest(targets: np.ndarray) -> str:
  return hashlib.sha256(np.ascontiguousarray(targets).tobytes()).hexdigest()


def on_step(event) -> None:
  if _DIGESTS.value:
    with open(_DIGESTS.value, "a") as f:
      f.write(json.dumps({"step": event.step,
                          "digest": batch_digest(np.asarray(event.batch["decoder_targets"]))})
              + "\n")
  if event.step == _KILL_AT_STEP.value:
    event.checkpointer.wait()
    os.kill(os.getpid(), signal.SIGKILL)
  if event.step == _PAUSE_AT_STEP.value:
    event.checkpointer.wait()
    with open(_RESUME_FILE.value + ".waiting", "w"):
      pass
    while not os.path.exists(_RESUME_FILE.value):
      time.sleep(0.1)


def main(argv):
  del argv
  config = cc12m_main.CONFIG.value
  cc12m_main.prepare(config)
  cc12m_main.run(config, cc12m_main.WORKDIR.value, on_step=on_step)


if __name__ == "__main__":
  app.run(main, flags_parser=config_check.parse_flags)
