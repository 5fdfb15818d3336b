"""Property tests: hostile raw records never crash the pipeline's DoFns, and each
one ends kept or rejected with a reason (bounded example counts: fast)."""
import base64
import json

from hypothesis import HealthCheck
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

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
image_fields = st.one_of(
    st.fixed_dictionaries({"image_bytes": st.sampled_from([_JPEG, _PNG, _JPEG[:100], b"",
                                                           b"GIF89a garbage"])}),
    st.fixed_dictionaries({"image_base64": st.sampled_from(
        [base64.b64encode(_JPEG).decode(), "not base64 !!", ""])}),
    st.fixed_dictionaries({
        "format": st.one_of(st.sampled_from(["JPEG", "jpg", "PNG", ""]), st.integers(), st.none()),
        "width": st.one_of(st.integers(-5, 5000), st.text(max_size=3), st.none()),
        "height": st.one_of(st.integers(-5, 5000), st.floats(allow_nan=True), st.none())}),
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
  for key, strategy in (("id", st.one_of(st.text(max_size=8), st.integers(), st.none())),
                        ("url", st.one_of(st.just("https://x.test/a.jpg"), st.none(),
                                          st.integers())),
                        ("alt_text", st.one_of(texts, st.none(), st.integers())),
                        ("tags", tags),
                        ("safety_score", st.one_of(st.none(), st.floats(), st.text(max_size=3),
                                                   st.booleans()))):
    if draw(st.booleans()) or key in ("id", "alt_text"):
      record[key] = draw(strategy)
  record.update(draw(image_fields))
  form = draw(st.sampled_from(["dict", "json", "bytes", "garbage"]))
  if form == "dict":
    return record
  if "image_bytes" in record:
    record.pop("image_bytes")
  encoded = json.dumps(record, default=str)
  if form == "json":
    return encoded.encode("utf-8")
  if form == "bytes":
    return encoded.encode("utf-8")[: draw(st.integers(0, 40))] + b"\xff\xfe"
  return draw(st.binary(max_size=30))


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
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
  results = helpers.outcomes(raws, CONFIGS["cc12m"])
  assert results[0] == ("rejected", "text/too_many_chars")
  assert results[1] == ("rejected", "image/undecodable")
  assert results[2] == ("rejected", "image/format")
  assert results[3] == ("rejected", "input/bad_json")
  assert results[4][0] == "kept"
  assert results[4][1]["caption"] == "a dog & a ball on the beach"
