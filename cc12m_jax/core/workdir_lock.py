"""One trainer per workdir: a lock held by the running trainer.

Two trainers writing one workdir both fail (orbax times out waiting for the
other's step directories after 5 minutes) and leave no complete checkpoint,
so the second one must fail at once, naming the first.

Local disks (and NFS, where Linux maps flock to byte-range locks):
`<workdir>/LOCK`, held with flock(2). The kernel drops the lock when its
holder dies, however it dies (SIGKILL, OOM, a lost VM), so a stale lock never
blocks a new run: the next trainer takes it over and logs whose it was. The
file's text names the holder (host, pid, start time, command) for the error a
second trainer gets; it is emptied when the lock is released.

Remote storage (gs://... has no locks): the lock is a lease. The holder
rewrites `<workdir>/LOCK` every `lease_s / 4` seconds; a file not rewritten
for `lease_s` belongs to a dead holder and is taken over. Taking it is a
read, a write and a read back, not an atomic operation: two trainers started
within the same second or two can both believe they hold it, and hosts'
clocks must agree to within the lease (docs/training.md).

In a multi-host run only process 0 takes the lock: all processes of one run
share the workdir, so each taking it would stop the others.
"""
from __future__ import annotations

import datetime
import json
import logging
import os
import socket
import sys
import threading
import time
import uuid
from typing import Any

import tensorflow as tf

try:
  import fcntl
except ImportError:  # not POSIX: local workdirs then use the lease as well
  fcntl = None

LOCK_FILE = "LOCK"
LEASE_S = 120.0


class WorkdirLockedError(RuntimeError):
  """Another trainer holds the workdir's lock."""


def _holder_info(token: str) -> dict[str, Any]:
  return {"host": socket.gethostname(), "pid": os.getpid(), "token": token,
          "started": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
          "command": " ".join(sys.argv)[:300], "heartbeat": time.time()}


def _parse(text: str) -> dict[str, Any] | None:
  try:
    info = json.loads(text)
  except ValueError:
    return None
  return info if isinstance(info, dict) else None


def describe(info: dict[str, Any] | None) -> str:
  """'host H, pid P, since T' of a lock's holder, for messages."""
  if not info:
    return "holder unknown (its lock file is empty or being written)"
  return (f"host {info.get('host', '?')}, pid {info.get('pid', '?')}, since "
          f"{info.get('started', '?')}: {info.get('command', '')}").rstrip(": ")


class WorkdirLock:
  """The lock of `workdir` (a context manager): acquire() or a WorkdirLockedError.

  `lease=None` chooses flock for local paths and the lease for URLs; tests
  pass lease=True to try the lease on a local directory.
  """

  def __init__(self, workdir: str, *, lease: bool | None = None, lease_s: float = LEASE_S):
    self.workdir = str(workdir)
    self.path = os.path.join(self.workdir, LOCK_FILE)
    self.lease = ("://" in self.workdir or fcntl is None) if lease is None else lease
    self.lease_s = lease_s
    self._token = uuid.uuid4().hex
    self._fd: int | None = None
    self._stop = threading.Event()
    self._heartbeat: threading.Thread | None = None

  def __enter__(self) -> "WorkdirLock":
    return self.acquire()

  def __exit__(self, *exc) -> None:
    self.release()

  def _refused(self, holder: dict[str, Any] | None) -> WorkdirLockedError:
    return WorkdirLockedError(
        f"{self.workdir} is in use by another run ({describe(holder)}). Two runs on "
        f"one workdir destroy each other's checkpoints and reports: wait for it to finish, "
        f"stop it, or "
        f"use another --workdir. (A lock whose holder has died is taken over by itself: "
        f"{self.path}.)")

  def acquire(self) -> "WorkdirLock":
    tf.io.gfile.makedirs(self.workdir)
    if self.lease:
      self._acquire_lease()
    else:
      self._acquire_flock()
    logging.info("Holding the workdir lock %s.", self.path)
    return self

  # ------------------------------------------------------------- flock --

  def _acquire_flock(self) -> None:
    fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)  # not inherited by children
    try:
      fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:  # BlockingIOError: held by a live process
      holder = _parse(_read_fd(fd))
      os.close(fd)
      raise self._refused(holder) from None
    previous = _parse(_read_fd(fd))
    if previous:  # its holder died without releasing: the kernel dropped the lock
      logging.warning("Taking over the workdir lock of a trainer that is no longer running "
                      "(%s).", describe(previous))
    os.ftruncate(fd, 0)
    os.pwrite(fd, json.dumps(_holder_info(self._token)).encode(), 0)
    os.fsync(fd)
    self._fd = fd

  # ------------------------------------------------------------- lease --

  def _read_remote(self) -> dict[str, Any] | None:
    try:
      with tf.io.gfile.GFile(self.path) as f:
        return _parse(f.read())
    except tf.errors.NotFoundError:
      return None

  def _write_remote(self) -> None:
    info = _holder_info(self._token)
    info["started"] = self._started
    with tf.io.gfile.GFile(self.path, "w") as f:
      f.write(json.dumps(info))

  def _acquire_lease(self) -> None:
    current = self._read_remote()
    if current and time.time() - float(current.get("heartbeat", 0)) < self.lease_s:
      raise self._refused(current)
    if current:
      logging.warning("Taking over the workdir lock of a trainer that stopped renewing it "
                      "%.0f s ago (%s).", time.time() - float(current.get("heartbeat", 0)),
                      describe(current))
    self._started = _holder_info(self._token)["started"]
    self._write_remote()
    # Another trainer that read the same stale file may have written after us.
    time.sleep(min(1.0, self.lease_s / 10))
    now = self._read_remote()
    if not now or now.get("token") != self._token:
      raise self._refused(now)
    self._stop.clear()
    self._heartbeat = threading.Thread(target=self._renew, name="workdir-lock-lease",
                                       daemon=True)
    self._heartbeat.start()

  def _renew(self) -> None:
    while not self._stop.wait(self.lease_s / 4):
      try:
        self._write_remote()
      except Exception as e:  # pylint: disable=broad-except  (a later renewal may work)
        logging.warning("Could not renew the workdir lock %s: %s", self.path, e)

  # ----------------------------------------------------------- release --

  def release(self) -> None:
    """Gives the lock up (idempotent)."""
    if self._fd is not None:
      os.ftruncate(self._fd, 0)  # the file no longer names a holder
      fcntl.flock(self._fd, fcntl.LOCK_UN)
      os.close(self._fd)
      self._fd = None
    if self._heartbeat is not None:
      self._stop.set()
      self._heartbeat.join()
      self._heartbeat = None
      current = self._read_remote()
      if current and current.get("token") == self._token:
        tf.io.gfile.remove(self.path)


def _read_fd(fd: int) -> str:
  return os.pread(fd, 1 << 16, 0).decode(errors="replace")
