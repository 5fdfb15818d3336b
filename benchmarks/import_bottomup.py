r"""Import throughput of a bottom-up-attention TSV, and the job's peak memory.

python benchmarks/import_bottomup.py [--num_images=10000] [--num_regions=36] \
    [--feature_dim=2048] [--workdir=/tmp/import_bench] [Beam flags, e.g.
    --direct_running_mode=in_memory --direct_num_workers=1]

1. Writes (once; reused while the sizes match) a bottom-up TSV of
   `num_images` images with `num_regions` regions of `feature_dim` float32
   (the standard six columns: ids, sizes, pixel boxes, features in base64;
   10,000 x 36 x 2048 is ~3.9 GB) and COCO captions JSON for the same ids.
2. Runs the import (`cc12m_jax.data.importers coco`, float16 storage, 16
   regions kept, global feature = the regions' mean) on Beam's local runner
   with the importer's defaults (in process, one worker; run.py says why)
   unless Beam flags say otherwise, vocabulary off.
3. Reports wall-clock time of the whole job (pipeline construction, worker
   start-up, reading, parsing, the join, writing the shards, metadata) and
   images per second, and the CPU time it took (images per CPU-second does
   not depend on what else runs on a shared machine); peak memory is the
   largest sum of the resident set sizes of this process and all its
   children (the runner and its workers), sampled every 0.1 s.
The last line is the headline: `import_throughput: <images/s> images/s`.
"""
import argparse
import base64
import json
import os
import shutil
import sys
import threading
import time

import numpy as np
import psutil

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from cc12m_jax.data.importers import pipeline as pipeline_lib  # pylint: disable=g-import-not-at-top
from cc12m_jax.data.importers import run as run_lib


def write_inputs(directory: str, num_images: int, num_regions: int, d: int) -> tuple[str, str]:
  tsv, captions = os.path.join(directory, "features.tsv"), os.path.join(directory, "captions.json")
  stamp = os.path.join(directory, "sizes.json")
  sizes = {"num_images": num_images, "num_regions": num_regions, "feature_dim": d}
  if os.path.exists(stamp) and json.load(open(stamp)) == sizes:
    return tsv, captions
  shutil.rmtree(directory, ignore_errors=True)
  os.makedirs(directory)
  rng = np.random.default_rng(0)
  images, annotations = [], []
  with open(tsv, "wb") as f:
    for i in range(num_images):
      w, h = 640, 480
      xy = rng.uniform(0, 300, size=(num_regions, 2))
      boxes = np.concatenate([xy, xy + rng.uniform(10, 170, size=(num_regions, 2))], 1)
      features = rng.standard_normal((num_regions, d), dtype=np.float32)
      f.write(b"\t".join([str(i).encode(), str(w).encode(), str(h).encode(),
                          str(num_regions).encode(),
                          base64.b64encode(boxes.astype("<f4").tobytes()),
                          base64.b64encode(features.tobytes())]) + b"\n")
      images.append({"id": i, "width": w, "height": h, "file_name": f"{i}.jpg"})
      annotations.append({"id": i, "image_id": i, "caption": f"a picture number {i} ."})
  with open(captions, "w") as f:
    json.dump({"images": images, "annotations": annotations}, f)
  with open(stamp, "w") as f:
    json.dump(sizes, f)
  return tsv, captions


def _cpu_seconds() -> float:
  """CPU time of this process and its finished children (Beam workers)."""
  mine, children = psutil.Process().cpu_times(), os.times()
  return mine.user + mine.system + children.children_user + children.children_system


class PeakMemory:
  """Largest RSS sum of this process and its descendants, sampled."""

  def __init__(self, period_s: float = 0.1):
    self.period_s, self.peak, self._stop = period_s, 0, threading.Event()
    self._thread = threading.Thread(target=self._run, daemon=True)

  def _run(self):
    me = psutil.Process()
    while not self._stop.is_set():
      total = 0
      for p in [me] + me.children(recursive=True):
        try:
          total += p.memory_info().rss
        except psutil.Error:
          pass
      self.peak = max(self.peak, total)
      time.sleep(self.period_s)

  def __enter__(self):
    self._thread.start()
    return self

  def __exit__(self, *_):
    self._stop.set()
    self._thread.join()


def main() -> None:
  parser = argparse.ArgumentParser()
  parser.add_argument("--num_images", type=int, default=10_000)
  parser.add_argument("--num_regions", type=int, default=36)
  parser.add_argument("--feature_dim", type=int, default=2048)
  parser.add_argument("--workdir", default="/tmp/import_bench")
  args, beam_args = parser.parse_known_args()

  inputs = os.path.join(args.workdir, "inputs")
  t = time.time()
  tsv, captions = write_inputs(inputs, args.num_images, args.num_regions, args.feature_dim)
  print(f"inputs: {os.path.getsize(tsv) / 1e9:.2f} GB TSV ({time.time() - t:.0f} s to "
        f"write or find), {args.num_images} images x {args.num_regions} regions x "
        f"{args.feature_dim}")
  spec = pipeline_lib.ImportSpec(
      format="coco", source="bench", output_dir=os.path.join(args.workdir, "out"),
      captions=[captions], features=[tsv], feature_dim=args.feature_dim,
      feature_dtype="float16")
  baseline = psutil.Process().memory_info().rss
  with PeakMemory() as memory:
    start, cpu_start = time.time(), _cpu_seconds()
    report = run_lib.run_import(spec, beam_args, overwrite=True, vocab_sources=[],
                                log=lambda _: None)
    seconds, cpu_seconds = time.time() - start, _cpu_seconds() - cpu_start
  joined = report["counts"].get("joined", 0)
  assert joined == args.num_images, report["counts"]
  print(f"beam flags: {' '.join(beam_args) or '(the importer defaults: FnApiRunner, in_memory, one worker)'}")
  print(f"cpu cores: {os.cpu_count()}")
  out_dir = os.path.join(args.workdir, "out", "bench")
  written = sum(os.path.getsize(os.path.join(out_dir, f)) for f in os.listdir(out_dir)
                if f.startswith("records."))
  print(f"records written: {written / 1e6:.0f} MB in {report['counts'].get('joined')} "
        f"records (float16, 16 regions)")
  print(f"wall time: {seconds:.1f} s for {joined} images; CPU time (this process and "
        f"its children): {cpu_seconds:.1f} s = {joined / cpu_seconds:.0f} images per "
        f"CPU-second")
  print(f"load average (1 min) at the end: {os.getloadavg()[0]:.2f}")
  print(f"peak memory (this process + runner workers, RSS): {memory.peak / 2**30:.2f} GiB "
        f"(this process before the job: {baseline / 2**30:.2f} GiB)")
  print(f"input read: {os.path.getsize(tsv) / 1e6 / seconds:.0f} MB/s")
  print(f"import_throughput: {joined / seconds:.0f} images/s")


if __name__ == "__main__":
  main()
