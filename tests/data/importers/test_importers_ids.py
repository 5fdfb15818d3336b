"""Image ids agree across curation, import and exclusion.

Web data has no ids: curation and the CC TSV importer both derive them from
the URL (image_ids.url_image_id), so a pair curated from the raw pool and
the same pair imported from a CC TSV become the same record, and the same
image in CC3M and CC12M has the same id (test_importers_end_to_end.py
checks the input pipeline's exclusion on it).
"""
import os

import apache_beam as beam
import pytest

from cc12m_jax.curation import candidates
from cc12m_jax.curation import dofns
from cc12m_jax.curation import shards
from cc12m_jax.data.importers import captions
from cc12m_jax.data.importers import image_ids
from cc12m_jax.data.importers import rows
from cc12m_jax.data.synthetic import export as export_lib
from importer_fixtures import (BEAM_ARGS, EXPORT_FIELDS, assert_same_records, counts,
                               records_by_id, run_import)


def test_url_image_id_is_pinned():
  # Records, exclusion lists and feature files of earlier imports depend on
  # this exact rule: changing it splits the ids of one image.
  assert image_ids.url_image_id("https://example.com/images/1.jpg") == "960ea6c07552f5ea"
  assert image_ids.url_image_id("  https://example.com/images/1.jpg\n") == "960ea6c07552f5ea"
  assert image_ids.url_image_id("https://example.com/images/2.jpg") != "960ea6c07552f5ea"


@pytest.mark.parametrize("line", [
    b"https://example.com/images/1.jpg\ta dog on a beach",        # CC12M's order
    b"a dog on a beach\thttps://example.com/images/1.jpg",        # CC3M's order
    b"\xef\xbb\xbfhttps://example.com/images/1.jpg\ta dog on a beach",  # a BOM
])
def test_curation_and_the_importer_read_a_tsv_line_alike(line):
  curated = candidates.parse_tsv_line(line)
  imported = captions.parse_cc_line(rows.Location("cc.tsv", is_line=True), line)
  assert curated["id"] == imported.image_id == "960ea6c07552f5ea"
  assert imported.captions == ["a dog on a beach"] == [curated["alt_text"]]


def _kept_rows(records):
  """cc3m records as curation's kept rows (shards.KEPT_SCHEMA), the id
  derived from the URL as curation derives it for url-only candidates."""
  for r in records:
    url = export_lib.url_of(r.image_id)
    yield {"id": image_ids.url_image_id(url), "image_url": url, "image_sha256": "",
           "width": r.width, "height": r.height, "caption": r.captions[0],
           "alt_text": r.captions[0],
           "tags": [{"name": t, "score": float(s)} for t, s in zip(r.tags, r.tag_scores)],
           "person_substituted": False}


@pytest.mark.parametrize("output_format", ["jsonl", "parquet"])
def test_curated_pairs_join_features_by_the_url_id(public_world, tmp_path, output_format):
  world, pub, d = public_world
  expected = records_by_id(world, "cc3m")
  kept_dir = str(tmp_path / "curated")
  with beam.Pipeline(argv=list(BEAM_ARGS)) as p:   # curation's own writer
    _ = (p | beam.Create(list(_kept_rows(expected.values())))
         | shards.WriteKept(kept_dir, output_format, num_shards=2))
  out = str(tmp_path / "out")
  report = run_import(out, "curated", "cc3m",
                      [os.path.join(kept_dir, f"{shards.KEPT_PREFIX}-*.{output_format}")],
                      [os.path.join(pub, "features", "cc3m.tsv")], feature_dim=d,
                      tsv_fields=EXPORT_FIELDS)
  assert counts(report) == {"joined": 40, "captions": 40, "rows/features": 40,
                            "rows/captions": 40}
  got = records_by_id(out, "cc3m")
  assert_same_records(expected, got, source="cc3m",
                      id_of=lambda i: export_lib.exported_id("cc3m", i))
  # Curation's exclusion of another dataset's kept pairs keys on the same id.
  row = next(_kept_rows(expected.values()))
  assert f"id:{row['id']}" in dofns.exclusion_keys(row) and row["id"] in got
