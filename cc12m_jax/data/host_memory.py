"""Keeps freed host memory in the process, so input buffers are not page-faulted afresh.

A training batch of feature records is large (the region features of 256
records, 16 regions x 512 float32 values each, are 8.4 MB) and the input
pipeline allocates several buffers of that size per batch: the batched
serialized records, the parsed features, the rebatched arrays. glibc's
default policy hands freed memory back to the kernel once more than twice the
largest recent block sits free at the top of an arena (`M_TRIM_THRESHOLD`
follows `M_MMAP_THRESHOLD` dynamically), and tf.data's worker threads free
such blocks all the time. Every batch then
faults its pages in again, and the kernel time that costs grows with the
bytes read (docs/benchmarks.md, input pipeline).

`retain_freed_memory` fixes both thresholds: blocks up to 32 MiB (glibc's
largest mmap threshold on 64-bit) come from the heap, and up to 1 GiB of free
heap is kept for reuse. That is what a caching allocator (tcmalloc, the
allocator TensorFlow recommends for input-bound jobs) does, without an
LD_PRELOAD. Controlled by `config.data.retain_host_memory`; a no-op (False)
on a C library other than glibc.
"""
from __future__ import annotations

import ctypes
import logging
import platform

# mallopt(3) parameter numbers (glibc's malloc.h).
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD_BYTES = 32 << 20  # glibc's maximum: HEAP_MAX_SIZE / 2 on 64-bit
TRIM_THRESHOLD_BYTES = 1 << 30

_applied: bool | None = None


def retain_freed_memory() -> bool:
  """Sets glibc's mmap and trim thresholds once per process; True if in effect."""
  global _applied
  if _applied is not None:
    return _applied
  if platform.libc_ver()[0] != "glibc":
    logging.info("Host allocator left as is: C library is not glibc.")
    _applied = False
    return _applied
  libc = ctypes.CDLL("libc.so.6")
  ok = (libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES) == 1 and
        libc.mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES) == 1)
  if not ok:
    raise RuntimeError(
        "glibc mallopt refused the thresholds of config.data.retain_host_memory "
        f"(mmap {MMAP_THRESHOLD_BYTES}, trim {TRIM_THRESHOLD_BYTES} bytes); set "
        "it to False.")
  logging.info("Host allocator: blocks up to %d MiB from the heap, up to %d MiB of "
               "freed memory kept for reuse (config.data.retain_host_memory).",
               MMAP_THRESHOLD_BYTES >> 20, TRIM_THRESHOLD_BYTES >> 20)
  _applied = True
  return _applied
