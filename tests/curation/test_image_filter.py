"""Image filter and image-header probing (paper Section 2.2, step 1)."""
import pytest

from cc12m_jax.curation import candidates
from cc12m_jax.curation import config as config_lib
from cc12m_jax.curation import image_filter
from tests.curation import helpers

CC3M = config_lib.preset_config("cc3m").image
CC12M = config_lib.preset_config("cc12m").image


def _candidate(width, height, fmt="JPEG", safety=None):
  return {"format": fmt, "width": width, "height": height, "safety_score": safety}


@pytest.mark.parametrize("width,cc3m,cc12m", [
    (1000, None, None),                                  # ratio 2.0: both keep
    (1002, "image/aspect_ratio", None),                  # 2.004: cc3m drops
    (1250, "image/aspect_ratio", None),                  # 2.5: cc12m keeps
    (1252, "image/aspect_ratio", "image/aspect_ratio"),  # 2.504: both drop
])
def test_aspect_ratio_boundaries(width, cc3m, cc12m):
  assert image_filter.image_rejection(_candidate(width, 500), CC3M) == cc3m
  assert image_filter.image_rejection(_candidate(width, 500), CC12M) == cc12m
  # Portrait is the same as landscape.
  assert image_filter.image_rejection(_candidate(500, width), CC12M) == cc12m


def test_shorter_side_must_exceed_400():
  assert image_filter.image_rejection(_candidate(600, 400), CC12M) == "image/too_small"
  assert image_filter.image_rejection(_candidate(600, 401), CC12M) is None
  assert image_filter.image_rejection(_candidate(0, 600), CC12M) == "image/too_small"


def test_jpeg_only_and_safety_threshold():
  assert image_filter.image_rejection(_candidate(800, 600, "PNG"), CC12M) == "image/format"
  assert image_filter.image_rejection(_candidate(800, 600, "GIF"), CC3M) == "image/format"
  assert image_filter.image_rejection(_candidate(800, 600, "JPG"), CC12M) is None
  assert image_filter.image_rejection(_candidate(800, 600, safety=0.5), CC12M) == "image/unsafe"
  assert image_filter.image_rejection(_candidate(800, 600, safety=0.49), CC12M) is None


def test_header_overrules_claimed_metadata():
  png = helpers.jpeg_bytes(500, 450, fmt="PNG")
  raw = helpers.record("a", "a dog on the beach", image_bytes=png)  # claims JPEG 800x600
  parsed = candidates.parse_candidate(raw)
  assert (parsed["format"], parsed["width"], parsed["height"]) == ("PNG", 500, 450)
  assert len(parsed["image_sha256"]) == 64
  assert image_filter.image_rejection(parsed, CC12M) == "image/format"


def test_corrupt_and_missing_images_have_reasons():
  raw = helpers.record("a", "a dog", image_bytes=b"\xff\xd8\xff\xe0 not really a jpeg")
  assert candidates.parse_candidate(raw) == ("image/undecodable", "a", "", None)
  raw = {"id": "b", "url": "u", "alt_text": "a dog"}
  parsed = candidates.parse_candidate(raw)
  assert (parsed["format"], parsed["width"], parsed["height"]) == (None, None, None)
  assert image_filter.image_rejection(parsed, CC12M) == "image/missing_metadata"
  assert candidates.parse_candidate(
      {"id": "c", "alt_text": "x", "image_base64": "%%%"}).reason == "image/bad_base64"
  assert candidates.parse_candidate(b"{not json").reason == "input/bad_json"
  assert candidates.parse_candidate({"url": "u", "alt_text": "x"}).reason == "input/missing_id"


@pytest.mark.parametrize("width,accepted", [
    (800, True), (800.0, True), (1, True), (2**31 - 1, True),
    ("800", False), (800.7, False), (0, False), (-800, False), (True, False),
    (2**31, False), (10**30, False), (float("nan"), False), (float("inf"), False),
    ([800], False), ({"w": 800}, False)])
def test_sizes_are_positive_integers(width, accepted):
  parsed = candidates.parse_candidate(helpers.record("s", "a dog", width=width))
  if accepted:
    assert parsed["width"] == int(width) and isinstance(parsed["width"], int)
  else:
    assert parsed == ("image/bad_size", "s", f"width={width!r:.40} height=600", None)


def test_missing_metadata_and_safety_are_policies():
  no_size = {"format": "JPEG", "width": None, "height": None, "safety_score": None}
  skip = CC12M.copy_and_resolve_references()
  skip.missing_metadata = "skip_filter"
  assert image_filter.image_rejection(no_size, CC12M) == "image/missing_metadata"
  assert image_filter.image_rejection(no_size, skip) is None
  assert image_filter.image_notes(no_size, skip) == ["image/missing_metadata",
                                                     "image/missing_safety_score"]
  # Whatever is known is still checked.
  assert image_filter.image_rejection(dict(no_size, format="PNG"), skip) == "image/format"
  assert image_filter.image_rejection({"format": None, "width": 300, "height": 900,
                                       "safety_score": 0.1}, skip) == "image/too_small"
  strict = CC12M.copy_and_resolve_references()
  strict.missing_safety = "reject"
  assert image_filter.image_rejection(_candidate(800, 600), CC12M) is None
  assert image_filter.image_notes(_candidate(800, 600), CC12M) == ["image/missing_safety_score"]
  assert image_filter.image_rejection(_candidate(800, 600), strict) == \
      "image/missing_safety_score"
  assert image_filter.image_rejection(_candidate(800, 600, safety=0.1), strict) is None
  assert image_filter.image_notes(_candidate(800, 600, safety=0.1), CC12M) == []


def test_img2dataset_rows():
  jpeg = helpers.jpeg_bytes(256, 256)
  row = {"key": "000010005", "url": "https://x.test/a.jpg", "caption": "a dog on a beach",
         "status": "success", "error_message": None, "width": 256, "height": 256,
         "original_width": 1200, "original_height": 500, "jpg": jpeg,
         "sha256": "ab" * 32}
  parsed = candidates.parse_candidate(row)
  # The stored image is img2dataset's 256x256 resize; the filter needs the
  # web image's size. The bytes are what is hashed.
  assert (parsed["id"], parsed["format"], parsed["width"], parsed["height"]) == \
      ("000010005", "JPEG", 1200, 500)
  assert parsed["image_sha256"] != "ab" * 32 and parsed["alt_text"] == "a dog on a beach"
  assert image_filter.image_rejection(parsed, CC12M) is None
  # Metadata-only rows (images in separate files): the hash is img2dataset's.
  meta = {k: v for k, v in row.items() if k != "jpg"}
  parsed = candidates.parse_candidate(meta)
  assert (parsed["format"], parsed["width"], parsed["image_sha256"]) == (None, 1200, "ab" * 32)
  failed = dict(meta, status="failed_to_download", error_message="HTTP 404", width=None,
                height=None, original_width=None, original_height=None)
  assert candidates.parse_candidate(failed) == (
      "image/download_failed", "000010005", "status='failed_to_download' error='HTTP 404'",
      None)
  hf = {"id": "h", "caption": "a dog", "image": {"bytes": jpeg, "path": "h.jpg"}}
  assert candidates.parse_candidate(hf)["format"] == "JPEG"
