"""Beam-search decoding speed of the paper-size Captioner.

Random parameters, batch 16, vocabulary 16k, beam 5, alpha 0.6. EOS logits
are forbidden so every hypothesis runs the full length (no early stop): the
figure is the worst case per caption. Measures max_decode_len 36 and 180.

  python benchmarks/decode.py [--batch_size=16] [--vocab_size=16000] [--repeats=2]
      [--devices=1]

`--devices=N` (0: every local device) shards a batch of N x --batch_size over
a data-parallel mesh of N devices, as the evaluation does, and also reports
captions/sec per device.

Prints captions/sec for each length and, last,
`decode_time_ratio_180_vs_36: <value> x`.
"""
from __future__ import annotations

import argparse
import pathlib
import sys
import time

import jax
import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from configs import base  # noqa: E402  (the repo root holds configs/)
from cc12m_jax import sharding  # noqa: E402
from cc12m_jax.data import record_schema  # noqa: E402
from cc12m_jax.decoding import captioner_decode  # noqa: E402
from cc12m_jax.models import captioner as captioner_lib  # noqa: E402

EOS_ID = 2


def forbid_eos(logits: jax.Array) -> jax.Array:
  return logits.at[:, EOS_ID].set(-1e9)


def random_batch(rng: np.random.RandomState, model_cfg, batch_size: int,
                 feature_dim: int, tag_tokens: int, vocab: int) -> dict:
  r, t = record_schema.MAX_REGIONS, record_schema.MAX_TAGS
  boxes = np.sort(rng.rand(batch_size, r, 4), axis=-1).astype(np.float32)
  area = ((boxes[..., 2] - boxes[..., 0]) * (boxes[..., 3] - boxes[..., 1]))
  return {
      "global_feature": rng.normal(size=(batch_size, feature_dim)
                                   ).astype(np.float32),
      "region_features": rng.normal(size=(batch_size, r, feature_dim)
                                    ).astype(np.float32),
      "region_boxes": np.concatenate([boxes, area[..., None]], -1),
      "region_mask": np.ones((batch_size, r), bool),
      "tag_tokens": rng.randint(6, vocab, size=(batch_size, t, tag_tokens)
                                ).astype(np.int32),
      "tag_mask": np.ones((batch_size, t), bool),
      "tag_scores": rng.rand(batch_size, t).astype(np.float32),
  }


def time_decode(model, params, batch, max_len: int, beam: int,
                repeats: int) -> tuple[float, np.ndarray]:
  cfg = base.decode_config()
  cfg.method, cfg.beam_size, cfg.max_decode_len = "beam", beam, max_len
  fn = captioner_decode.make_decode_fn(model, cfg, logits_hook=forbid_eos)
  rng = jax.random.key(0)
  fn = fn.lower(params, batch, rng).compile()  # compile outside the timing
  times = []
  for _ in range(repeats):
    start = time.perf_counter()
    out = jax.block_until_ready(fn(params, batch, rng))
    times.append(time.perf_counter() - start)
  return float(np.median(times)), np.asarray(out["tokens"])


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--batch_size", type=int, default=16)
  parser.add_argument("--vocab_size", type=int, default=16_000)
  parser.add_argument("--feature_dim", type=int, default=2048)
  parser.add_argument("--beam_size", type=int, default=5)
  parser.add_argument("--repeats", type=int, default=2)
  parser.add_argument("--lengths", default="36,180")
  parser.add_argument("--devices", type=int, default=1,
                      help="shard the batch over the first N local devices (0: all)")
  args = parser.parse_args()

  devices = sharding.first_local_devices(args.devices)
  mesh_cfg = base.get_config().mesh
  mesh_cfg.data, mesh_cfg.fsdp, mesh_cfg.model = len(devices), 1, 1
  mesh = sharding.make_mesh(mesh_cfg, devices)
  global_batch = args.batch_size * len(devices)

  model_cfg = base.model_config()  # paper size: 6+6 layers, width 512
  model = captioner_lib.Captioner(model_cfg, args.vocab_size)
  batch = random_batch(np.random.RandomState(0), model_cfg, global_batch,
                       args.feature_dim, 4, args.vocab_size)
  init_batch = dict(batch, decoder_inputs=np.zeros((global_batch, 36), np.int32))
  params = jax.jit(lambda r: model.init(r, init_batch, train=False),
                   out_shardings=sharding.replicated(mesh))(jax.random.key(0))["params"]
  batch = jax.device_put(batch, sharding.batch_sharding(mesh))
  print(f"devices: {len(devices)} x {devices[0].device_kind} ({devices[0].platform}); "
        f"batch {args.batch_size} per device ({global_batch} global), beam "
        f"{args.beam_size}, vocab {args.vocab_size}, EOS forbidden")

  seconds = {}
  for max_len in (int(x) for x in args.lengths.split(",")):
    secs, tokens = time_decode(model, params, batch, max_len, args.beam_size,
                               args.repeats)
    assert np.all(tokens[:, 0] > 2), "a hypothesis stopped before max length"
    seconds[max_len] = secs
    per_device = (f" ({args.batch_size / secs:.2f} per device)"
                  if len(devices) > 1 else "")
    print(f"max_decode_len {max_len}: {secs:.3f} s/batch, "
          f"{global_batch / secs:.2f} captions/sec{per_device}")
  if 36 in seconds and 180 in seconds:
    print(f"decode_time_ratio_180_vs_36: {seconds[180] / seconds[36]:.2f} x")


if __name__ == "__main__":
  main()
