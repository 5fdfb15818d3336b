"""Retrieval speed and memory: dual-encoder encoding and 100k-image ranking.

1. Encoding throughput (examples/sec) of the paper-size dual encoder (E=512,
   8 heads, MLP 2048, 6 + 6 layers, P=512; random parameters), image tower
   (1 global + 16 regions + 16 tags) and text tower (36 tokens) separately.
2. Image-retrieval ranking (the paper's task) over a gallery of
   `--num_images` (100,000) image vectors with `--captions_per_image` (5)
   caption queries each (500,000 queries): chunked running top-10 of
   retrieval.top_k_chunked, then Recall@1/5/10. The embeddings are random,
   each caption = its image vector + noise, so recall is a sanity check.
3. Peak host memory (ru_maxrss) after each phase. The full [500k, 100k]
   f32 score matrix would be 200 GB; ranking needs only the embeddings plus
   one [query_block, gallery_chunk] tile per device.

  python benchmarks/retrieval.py [--num_images=100000] [--captions_per_image=5]
      [--dim=512] [--gallery_chunk=8192] [--query_block=4096] [--skip_encoding]
      [--query_subset=N]   # rank N queries only; the headline is then extrapolated

Last line: `retrieval_100k_rank_seconds: <value> s` (ranking wall time,
compilation included, for the gallery size given).
"""
from __future__ import annotations

import argparse
import pathlib
import resource
import sys
import time

import flax.linen as nn
import jax
import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from configs import base  # noqa: E402  (the repo root holds configs/)
from cc12m_jax.data import records  # noqa: E402
from cc12m_jax.evaluation import retrieval  # noqa: E402
from cc12m_jax.models import dual_encoder  # noqa: E402


def peak_rss_mib() -> float:
  return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # KiB -> MiB on Linux


def random_batch(rng: np.random.Generator, model_cfg, batch_size: int, feature_dim: int,
                 tag_tokens: int, caption_length: int, vocab: int) -> dict:
  r, t = records.MAX_REGIONS, records.MAX_TAGS
  boxes = np.sort(rng.uniform(size=(batch_size, r, 2, 2)), axis=2).reshape(batch_size, r, 4)
  area = (boxes[..., 2] - boxes[..., 0]) * (boxes[..., 3] - boxes[..., 1])
  return {
      "global_feature": rng.normal(size=(batch_size, feature_dim)).astype(np.float32),
      "region_features": rng.normal(size=(batch_size, r, feature_dim)).astype(np.float32),
      "region_boxes": np.concatenate([boxes, area[..., None]], -1).astype(np.float32),
      "region_mask": np.ones((batch_size, r), bool),
      "tag_tokens": rng.integers(6, vocab, size=(batch_size, t, tag_tokens)).astype(np.int32),
      "tag_mask": np.ones((batch_size, t), bool),
      "tag_scores": rng.uniform(size=(batch_size, t)).astype(np.float32),
      "decoder_targets": rng.integers(6, vocab, size=(batch_size, caption_length)
                                      ).astype(np.int32),
  }


def time_calls(fn, args, repeats: int) -> float:
  jax.block_until_ready(fn(*args))  # compile
  start = time.perf_counter()
  for _ in range(repeats):
    out = fn(*args)
  jax.block_until_ready(out)
  return (time.perf_counter() - start) / repeats


def benchmark_encoding(args) -> None:
  cfg = base.get_config().model
  with cfg.unlocked():
    cfg.projection_dim = args.dim
  model = dual_encoder.DualEncoder(cfg, args.vocab_size)
  rng = np.random.default_rng(0)
  batch = random_batch(rng, cfg, args.encode_batch, args.feature_dim, 4, 36, args.vocab_size)
  params = nn.meta.unbox(jax.jit(lambda b: model.init(jax.random.PRNGKey(0), b, train=False))(
      batch)["params"])
  encode_image = jax.jit(lambda p, b: model.apply(
      {"params": p}, b, train=False, method=dual_encoder.DualEncoder.encode_image))
  encode_text = jax.jit(lambda p, t: model.apply(
      {"params": p}, t, train=False, method=dual_encoder.DualEncoder.encode_text))
  image_keys = {k: v for k, v in batch.items() if k != "decoder_targets"}
  t_img = time_calls(encode_image, (params, image_keys), args.repeats)
  t_txt = time_calls(encode_text, (params, batch["decoder_targets"]), args.repeats)
  print(f"encode_images_per_sec: {args.encode_batch / t_img:.1f} examples/s "
        f"(batch {args.encode_batch}, {jax.devices()[0].platform})")
  print(f"encode_captions_per_sec: {args.encode_batch / t_txt:.1f} examples/s")
  num_queries = args.num_images * args.captions_per_image
  print(f"encode_gallery_estimate: {args.num_images * t_img / args.encode_batch:.1f} s for "
        f"{args.num_images} images, {num_queries * t_txt / args.encode_batch:.1f} s for "
        f"{num_queries} captions")
  print(f"peak_rss_after_encoding: {peak_rss_mib():.0f} MiB")


def benchmark_ranking(args) -> float:
  rng = np.random.default_rng(1)
  num_queries = args.num_images * args.captions_per_image
  images = rng.standard_normal((args.num_images, args.dim), dtype=np.float32)  # [G, P]
  owner = np.repeat(np.arange(args.num_images), args.captions_per_image)  # [Q]
  captions = images[owner]  # [Q, P]
  captions += args.noise * rng.standard_normal(captions.shape, dtype=np.float32)
  print(f"gallery {args.num_images} x {args.dim}, queries {num_queries}; full score matrix "
        f"would be {num_queries * args.num_images * 4 / 2**30:.0f} GiB")
  print(f"peak_rss_before_ranking: {peak_rss_mib():.0f} MiB")
  ranked = min(num_queries, args.query_subset or num_queries)
  start = time.perf_counter()
  _, top = retrieval.top_k_chunked(captions[:ranked], images, 10,
                                   gallery_chunk=args.gallery_chunk,
                                   query_block=args.query_block)
  seconds = time.perf_counter() - start
  recall = retrieval.recall_at_k(top, owner[:ranked], np.arange(args.num_images))
  print(f"rank_queries_per_sec: {ranked / seconds:.0f} queries/s "
        f"({2 * ranked * args.num_images * args.dim / seconds / 1e9:.1f} GFLOP/s)")
  if ranked < num_queries:
    # Ranking cost is linear in the number of queries (fixed gallery).
    print(f"ranked {ranked} of {num_queries} queries in {seconds:.2f} s; "
          f"EXTRAPOLATED to all {num_queries}: {seconds * num_queries / ranked:.2f} s")
    seconds *= num_queries / ranked
  print("recall (random data, sanity): " +
        ", ".join(f"R@{k} {100 * v:.2f}" for k, v in recall.items()))
  print(f"peak_rss_after_ranking: {peak_rss_mib():.0f} MiB")
  return seconds


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--num_images", type=int, default=100_000)
  parser.add_argument("--captions_per_image", type=int, default=5)
  parser.add_argument("--dim", type=int, default=512)
  parser.add_argument("--noise", type=float, default=5.0)
  parser.add_argument("--gallery_chunk", type=int, default=8192)
  parser.add_argument("--query_block", type=int, default=4096)
  parser.add_argument("--encode_batch", type=int, default=128)
  parser.add_argument("--feature_dim", type=int, default=512)
  parser.add_argument("--vocab_size", type=int, default=16_000)
  parser.add_argument("--repeats", type=int, default=3)
  parser.add_argument("--skip_encoding", action="store_true")
  parser.add_argument("--query_subset", type=int, default=0,
                      help="rank only this many queries and extrapolate linearly (slow CPUs)")
  args = parser.parse_args()
  print(f"devices: {jax.devices()}")
  if not args.skip_encoding:
    benchmark_encoding(args)
  seconds = benchmark_ranking(args)
  print(f"retrieval_100k_rank_seconds: {seconds:.2f} s")


if __name__ == "__main__":
  main()
