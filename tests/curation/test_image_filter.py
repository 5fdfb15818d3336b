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
  assert candidates.parse_candidate(raw) == "image/undecodable"
  raw = {"id": "b", "url": "u", "alt_text": "a dog"}
  assert candidates.parse_candidate(raw) == "image/missing_metadata"
  assert candidates.parse_candidate({"id": "c", "alt_text": "x", "image_base64": "%%%"}) == \
      "image/bad_base64"
  assert candidates.parse_candidate(b"{not json") == "input/bad_json"
  assert candidates.parse_candidate({"url": "u", "alt_text": "x"}) == "input/missing_id"
