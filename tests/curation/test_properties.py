"""Property tests: hostile raw records never crash the pipeline, and each one ends
kept or rejected with a reason: many examples through the DoFns directly, a few
through the real Beam pipeline (bounded example counts: fast)."""
import base64
import glob
import json
import os
import tempfile

from hypothesis import HealthCheck
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
import pyarrow.parquet as pq

from cc12m_jax.curation import candidates
from cc12m_jax.curation import report
from tests.curation import helpers

CONFIGS = {p: helpers.test_config(p) for p in ("cc3m", "cc12m")}
_JPEG = helpers.jpeg_bytes(640, 480)
_PNG = helpers.jpeg_bytes(640, 480, fmt="PNG")

texts = st.one_of(
    st.text(max_size=200),
    st.just(""),
    st.just("a dog " * 17_000),  # ~100 KB
    st.builds(lambda s: f"a dog &amp; a {s} on the &quot;beach&quot; &#x1F600; &nbsp;",
              st.text(max_size=20)),
    st.builds(lambda s: f"a 🐶 with the 🎾 on a beach {s} 🏖️", st.text(max_size=10)),
    st.sampled_from(["a dog on the beach with a ball", "John Smith with a dog in Paris on "
                     "12 May 2019", "#dog #beach the best dog ideas", "<b>a dog</b> in "
                     "the park", "\x00\x01 a dog \u200b on the \ufeff beach"]),
)
sizes = st.one_of(st.integers(-5, 5000), st.text(max_size=3), st.none(), st.booleans(),
                  st.floats(allow_nan=True), st.sampled_from([10**30, 2**31, 2**31 - 1, 800.0]))
ids = st.one_of(st.text(max_size=8), st.sampled_from(["dup", "dup", "\ud800", "\u3000"]),
                st.integers(), st.none(), st.floats(), st.lists(st.integers(), max_size=2),
                st.dictionaries(st.text(max_size=2), st.integers(), max_size=2))
image_fields = st.one_of(
    st.fixed_dictionaries({"image_bytes": st.sampled_from([_JPEG, _PNG, _JPEG[:100], b"",
                                                           b"GIF89a garbage"])}),
    st.fixed_dictionaries({"image_base64": st.sampled_from(
        [base64.b64encode(_JPEG).decode(), "not base64 !!", ""])}),
    st.fixed_dictionaries({
        "format": st.one_of(st.sampled_from(["JPEG", "jpg", "PNG", ""]), st.integers(), st.none()),
        "width": sizes, "height": sizes}),
    st.just({}),
)
tags = st.one_of(
    st.none(), st.just([]), st.text(max_size=20),
    st.lists(st.one_of(
        st.fixed_dictionaries({"name": st.sampled_from(["dog", "beach", "", "Dog"]),
                               "score": st.one_of(st.floats(allow_nan=True), st.integers(),
                                                  st.text(max_size=3))}),
        st.tuples(st.text(max_size=5), st.floats()),
        st.integers()), max_size=4))


@st.composite
def raw_records(draw):
  record = {}
  for key, strategy in (("id", ids),
                        ("url", st.one_of(st.just("https://x.test/a.jpg"), st.none(),
                                          st.integers())),
                        ("alt_text", st.one_of(texts, st.none(), st.integers())),
                        ("tags", tags),
                        ("safety_score", st.one_of(st.none(), st.floats(), st.text(max_size=3),
                                                   st.booleans()))):
    if draw(st.booleans()) or key in ("id", "alt_text"):
      record[key] = draw(strategy)
  record.update(draw(image_fields))
  form = draw(st.sampled_from(["dict", "json", "bytes", "garbage", "tsv", "nested"]))
  if form == "dict":
    return record
  if form == "tsv":
    columns = draw(st.lists(st.one_of(st.text(max_size=20), st.just("https://x.test/a.jpg"),
                                      texts), max_size=3))
    return ("tsv", "\t".join(columns).encode("utf-8", "surrogatepass"))
  if form == "nested":
    depth = draw(st.sampled_from([10, 900, 5000, 100_000]))
    return b'{"id": "n", "alt_text": ' + b"[" * depth + b"]" * depth + b"}"
  if "image_bytes" in record:
    record.pop("image_bytes")
  encoded = json.dumps(record, default=str, ensure_ascii=draw(st.booleans()))
  # surrogatepass: a lone surrogate written raw, as broken producers do.
  if form == "json":
    return encoded.encode("utf-8", "surrogatepass")
  if form == "bytes":
    return encoded.encode("utf-8", "surrogatepass")[: draw(st.integers(0, 40))] + b"\xff\xfe"
  return draw(st.binary(max_size=30))


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(raw_records(), min_size=1, max_size=12), st.sampled_from(["cc3m", "cc12m"]))
def test_every_hostile_record_is_accounted_for(raws, preset):
  results = helpers.outcomes(raws, CONFIGS[preset], rare=frozenset({"kettle"}))
  assert sorted(results) == list(range(len(raws)))
  for fate, value in results.values():
    if fate == "rejected":
      assert isinstance(value, str) and "/" in value
    else:
      assert value["caption"] and value["id"]


def test_known_hostile_inputs_get_the_expected_reasons():
  raws = [
      {"id": "big", "alt_text": "a dog " * 17_000, "format": "JPEG", "width": 800,
       "height": 600, "url": "u", "tags": [["dog", 0.9]]},
      {"id": "corrupt", "alt_text": "a dog on the beach", "image_bytes": _JPEG[:100]},
      {"id": "png", "alt_text": "a dog on the beach", "image_bytes": _PNG},
      b"\xff\xfe not json",
      {"id": "ok", "alt_text": "a dog &amp; a ball on the beach", "image_bytes": _JPEG,
       "tags": [{"name": "dog", "score": 0.9}]},
  ]
  raws.append({"id": "blank", "alt_text": "\u3000\u00a0 \u3000", "image_bytes": _JPEG,
               "tags": ["dog"]})
  raws.append({"id": "\u3000", "alt_text": "a dog on the beach", "image_bytes": _JPEG})
  results = helpers.outcomes(raws, CONFIGS["cc12m"])
  assert results[5] == ("rejected", "text/empty")  # only ideographic / no-break spaces
  assert results[6] == ("rejected", "input/missing_id")
  assert results[0] == ("rejected", "text/too_many_chars")
  assert results[1] == ("rejected", "image/undecodable")
  assert results[2] == ("rejected", "image/format")
  assert results[3] == ("rejected", "input/bad_utf8")
  assert results[4][0] == "kept"
  assert results[4][1]["caption"] == "a dog & a ball on the beach"


# Arbitrary JSON values, and records whose fields are arbitrary JSON values.
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(
        st.text(max_size=4), children, max_size=3),
    max_leaves=6)
record_fields = st.fixed_dictionaries({}, optional={
    "id": st.one_of(ids, json_values), "key": ids, "url": st.one_of(st.just("https://x.test/a"),
                                                                     json_values),
    "alt_text": st.one_of(st.sampled_from(["a dog on the beach with a ball",
                                           "a dog \ud800 on the beach"]), json_values),
    "format": st.one_of(st.just("JPEG"), json_values), "width": st.one_of(sizes, json_values),
    "height": sizes, "tags": st.one_of(tags, json_values),
    "safety_score": st.one_of(st.floats(), json_values), "status": st.sampled_from(
        ["success", "failed_to_download"]), "image_base64": st.one_of(
            st.just(base64.b64encode(_JPEG).decode()), json_values)})
json_lines = st.one_of(
    record_fields.map(lambda r: json.dumps(r).encode()),
    record_fields.map(lambda r: json.dumps(r, ensure_ascii=False).encode("utf-8", "surrogatepass")),
    json_values.map(lambda v: json.dumps(v).encode()),
    st.binary(max_size=30).map(lambda b: b.replace(b"\n", b" ")),
    st.sampled_from([b"", b"{", b'{"id": "deep", "x": ' + b"[" * 50_000 + b"]" * 50_000 + b"}"]))


def _string_id(line: bytes):
  """The id a rejects line must carry: the record's first id alias, if a usable string."""
  try:
    value = json.loads(line)
  except (ValueError, RecursionError):
    return None
  return candidates.record_id_of(value)


@settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(json_lines, min_size=1, max_size=14), st.sampled_from(["jsonl", "parquet"]))
def test_arbitrary_json_lines_through_the_real_pipeline(lines, output_format):
  """in = kept + rejected, no crash, and every reject keeps its record's string id."""
  with tempfile.TemporaryDirectory() as tmp:
    path = os.path.join(tmp, "in.jsonl")
    with open(path, "wb") as f:
      f.write(b"\n".join(lines) + b"\n")
    out = os.path.join(tmp, "out")
    counts = helpers.run(helpers.test_config("cc12m", text__min_token_count=0,
                                             output_format=output_format), path, out)
    report.check(counts)  # run_curation checked it too, and the Beam counters
    assert counts["input"] == len(lines)
    rejects = helpers.read_jsonl_shards(out, "rejects")
    if output_format == "parquet":
      kept = [r for p in glob.glob(f"{out}/kept-*.parquet") for r in pq.read_table(p).to_pylist()]
    else:
      kept = helpers.read_jsonl_shards(out, "kept")
    assert len(kept) == counts["kept"] and len(kept) + len(rejects) == len(lines)
    lines_seen = sorted(int(r["source"].rsplit(":", 1)[1]) for r in rejects)
    assert len(set(lines_seen)) == len(lines_seen) and set(lines_seen) <= set(
        range(1, len(lines) + 1))
    for r in rejects:
      expected = _string_id(lines[int(r["source"].rsplit(":", 1)[1]) - 1])
      if expected is not None:
        assert r["id"] == expected, r
