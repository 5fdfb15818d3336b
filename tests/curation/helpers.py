"""Shared helpers for the curation tests (real spaCy, real Beam, real Pillow)."""
import io
import json
import os
from typing import Any

from apache_beam import pvalue
import ml_collections
from PIL import Image

from cc12m_jax.curation import config as config_lib
from cc12m_jax.curation import dofns
from cc12m_jax.curation import run as run_lib


def test_config(preset: str, **overrides: Any) -> ml_collections.ConfigDict:
  """A preset with single-process Beam settings (fast in tests)."""
  config = config_lib.preset_config(preset)
  config.beam.direct_running_mode = "in_memory"
  config.beam.direct_num_workers = 1
  config.num_output_shards = 2
  for dotted, value in overrides.items():
    section, _, key = dotted.rpartition("__")
    (config[section] if section else config)[key] = value
  return config


def jpeg_bytes(width: int, height: int, fmt: str = "JPEG") -> bytes:
  buf = io.BytesIO()
  Image.new("RGB", (width, height), (120, 30, 200)).save(buf, format=fmt)
  return buf.getvalue()


def record(record_id: str, alt_text: str, tags=("dog",), width=800, height=600,
           fmt="JPEG", **extra: Any) -> dict[str, Any]:
  r = {"id": record_id, "url": f"https://x.test/{record_id}.jpg", "alt_text": alt_text,
       "format": fmt, "width": width, "height": height,
       "tags": [{"name": t, "score": 0.9} for t in tags]}
  r.update(extra)
  return r


def write_jsonl(path: str, records: list[dict[str, Any]]) -> str:
  with open(path, "w", encoding="utf-8") as f:
    for r in records:
      f.write(json.dumps(r) + "\n")
  return path


def read_jsonl_shards(directory: str, prefix: str) -> list[dict[str, Any]]:
  out = []
  for name in sorted(os.listdir(directory)):
    if name.startswith(prefix) and name.endswith(".jsonl"):
      with open(os.path.join(directory, name), encoding="utf-8") as f:
        out += [json.loads(line) for line in f if line.strip()]
  return out


def run(config: ml_collections.ConfigDict, input_pattern: str, output_dir: str,
        **fields: Any) -> dict[str, int]:
  config.input = input_pattern
  config.output_dir = output_dir
  for key, value in fields.items():
    config[key] = value
  return run_lib.run_curation(config)


def outcomes(raws: list[Any], config: ml_collections.ConfigDict,
             excluded=frozenset(), rare=frozenset()) -> dict[int, tuple[str, Any]]:
  """Runs the pipeline's DoFns directly on `raws`; index -> ('kept', record) or ('rejected', reason).

  Each raw is a record dict or JSON line, or a (kind, payload) pair (e.g.
  ('tsv', b'url\tcaption')). Ids are checked for duplicates in input order,
  as the pipeline does by (file, line). Asserts that each DoFn emits exactly
  one output per input element (notes aside).
  """
  parse_fn, first_fn = dofns.ParseFn(), dofns.FirstOfIdFn()
  filter_fn, nlp_fn, rare_fn = dofns.FilterFn(config), dofns.NlpFn(config), dofns.RareWordFn()
  nlp_fn.setup()
  result, parsed, by_id = {}, [], {}
  for i, raw in enumerate(raws):
    kind, payload = raw if isinstance(raw, tuple) else (None, raw)
    if kind is None:
      kind = "jsonl" if isinstance(payload, (bytes, str)) else "parquet"
    out = list(parse_fn.process((("mem", i + 1), kind, payload)))
    assert len(out) == 1, (i, out)
    if isinstance(out[0], pvalue.TaggedOutput):
      result[i] = ("rejected", out[0].value[0])
    else:
      by_id.setdefault(out[0]["id"], []).append((i, out[0]))
  for group in by_id.values():
    out = list(first_fn.process((group[0][1]["id"], [c for _, c in group])))
    assert len(out) == len(group)
    first = out[0]
    parsed.append(next((i, c) for i, c in group if c is first))
    for (i, _), rejected in zip((g for g in group if g[1] is not first), out[1:]):
      result[i] = ("rejected", rejected.value[0])
  passed = []
  for i, candidate in sorted(parsed, key=lambda ic: ic[0]):
    out = [o for o in filter_fn.process(candidate, excluded)
           if not (isinstance(o, pvalue.TaggedOutput) and o.tag == dofns.NOTED)]
    assert len(out) == 1, (i, out)
    if isinstance(out[0], pvalue.TaggedOutput):
      result[i] = ("rejected", out[0].value[0])
    else:
      passed.append((i, out[0]))
  if passed:
    analysed = list(nlp_fn.process([c for _, c in passed]))
    assert len(analysed) == len(passed)
    for (i, _), out in zip(passed, analysed):
      if isinstance(out, pvalue.TaggedOutput):
        result[i] = ("rejected", out.value[0])
        continue
      final = list(rare_fn.process(out, rare))
      assert len(final) == 1
      result[i] = (("rejected", final[0].value[0]) if isinstance(final[0], pvalue.TaggedOutput)
                   else ("kept", final[0]))
  return result
