"""host_memory.retain_freed_memory: freed input buffers are reused, not page-faulted afresh.

Each check runs in a fresh interpreter, so glibc starts from its defaults
whatever the test process did before.
"""
import platform
import subprocess
import sys

import pytest

# Allocates and frees four 8 MiB buffers 20 times on the main thread and on
# a worker thread (the tf.data pattern: batch-sized blocks freed by many
# threads), and prints the fraction of those bytes that were fresh pages.
_PROBE = """
import resource, sys, threading
import numpy as np
from cc12m_jax.data import host_memory
if sys.argv[1] == "retain":
  assert host_memory.retain_freed_memory()
  assert host_memory.retain_freed_memory()  # idempotent
def work():
  for _ in range(20):
    buffers = [np.ones(8 << 20, np.uint8) for _ in range(4)]
    del buffers
work()  # warm-up: the first allocations always fault
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
work()
worker = threading.Thread(target=work)
worker.start()
worker.join()
faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
print(faults * resource.getpagesize() / (40 * 4 * (8 << 20)))
"""


def fresh_page_fraction(mode: str) -> float:
  out = subprocess.run([sys.executable, "-c", _PROBE, mode], check=True,
                       capture_output=True, text=True)
  return float(out.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc mallopt only")
def test_freed_buffers_are_reused_instead_of_faulted_again():
  default = fresh_page_fraction("default")
  retained = fresh_page_fraction("retain")
  # glibc's default trims the freed 32 MiB and faults it in again (~20% of
  # the bytes here); retained, the same blocks come back from the heap.
  assert retained < 0.05, retained
  assert default > 4 * retained, (default, retained)
