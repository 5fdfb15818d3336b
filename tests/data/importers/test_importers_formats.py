"""Each public format, imported, gives the synthetic generator's own records.

The world is exported once (conftest.py); each test imports one format on
Beam's local runner and compares with the records the generator wrote.
(cc, coco and nocaps are compared in test_importers_end_to_end.py, whose
imports the training run then uses.)
"""
import base64
import json
import os

import numpy as np

from cc12m_jax.data import records as records_lib
from cc12m_jax.data.importers import bottomup
from cc12m_jax.data.synthetic import export as export_lib
from importer_fixtures import (EXPORT_FIELDS, assert_same_records, counts,
                               records_by_id, run_import)


def _tsv(pub, source):
  return os.path.join(pub, "features", f"{source}.tsv")


def _tags(pub, source):
  return os.path.join(pub, "tags", f"{source}.jsonl")


def test_flickr_karpathy_json_one_split(public_world, tmp_path):
  world, pub, d = public_world
  out = str(tmp_path)
  report = run_import(out, "flickr", "flickr_test",
                      [os.path.join(pub, "captions", "dataset_flickr30k.json")],
                      [_tsv(pub, "flickr_test")], feature_dim=d, split="test",
                      tsv_fields=EXPORT_FIELDS, tags=[_tags(pub, "flickr_test")])
  assert counts(report) == {"joined": 3, "captions": 15, "rows/features": 3,
                            "rows/captions": 3, "rows/tags": 3}
  assert_same_records(records_by_id(world, "flickr_test"), records_by_id(out, "flickr_test"),
                      source="flickr_test")


def test_localized_narratives_are_the_captions(public_world, tmp_path):
  world, pub, d = public_world
  out = str(tmp_path)
  report = run_import(out, "locnar", "locnar_coco_val",
                      [os.path.join(pub, "localized_narratives", "coco_val.jsonl")],
                      [_tsv(pub, "coco_val")], feature_dim=d, tsv_fields=EXPORT_FIELDS)
  # Five narratives an image: five caption rows, joined into one record.
  assert counts(report) == {"joined": 10, "captions": 50, "rows/features": 10,
                            "rows/captions": 50}
  assert_same_records(records_by_id(world, "coco_val"), records_by_id(out, "locnar_coco_val"),
                      source="locnar_coco_val", fields=("captions", "size"))


def test_lxmert_rows_with_object_and_attribute_fields(public_world, tmp_path):
  world, pub, d = public_world
  records = list(records_by_id(world, "nocaps_val").values())
  features = export_lib.write_tsv(records, str(tmp_path / "f.tsv"), layout="lxmert")
  out = str(tmp_path / "out")
  run_import(out, "nocaps", "nocaps_val", [os.path.join(pub, "captions", "nocaps_val.json")],
             [features], feature_dim=d, features_format="lxmert",
             tsv_fields=export_lib.lxmert_fields(), tags=[_tags(pub, "nocaps_val")])
  assert_same_records(records_by_id(world, "nocaps_val"), records_by_id(out, "nocaps_val"))


def test_vinvl_rows_boxes_from_geometry_size_from_captions(public_world, tmp_path):
  world, pub, d = public_world
  expected = records_by_id(world, "coco_val")
  features = export_lib.write_tsv(expected.values(), str(tmp_path / "f.tsv"), layout="vinvl")
  out = str(tmp_path / "out")
  run_import(out, "coco", "coco_val", [os.path.join(pub, "captions", "coco_val.json")],
             [features], feature_dim=d, features_format="vinvl")
  got = records_by_id(out, "coco_val")
  # Normalized geometry: boxes exact; no global feature: the regions' mean.
  assert_same_records(expected, got, exact_global=False, boxes_atol=0.0,
                      fields=("captions", "size"))
  for image_id, record in got.items():
    mean = expected[image_id].region_features.astype(np.float64).mean(0)
    np.testing.assert_allclose(record.global_feature, mean, rtol=1e-3, atol=1e-3)


def test_six_column_bottomup_global_feature_is_the_mean(public_world, tmp_path):
  world, pub, d = public_world
  expected = records_by_id(world, "coco_val")
  features = export_lib.write_tsv(expected.values(), str(tmp_path / "f.tsv"), layout="bottomup6")
  out = str(tmp_path / "out")
  run_import(out, "coco", "coco_val", [os.path.join(pub, "captions", "coco_val.json")],
             [features], feature_dim=d, feature_dtype="float32")
  for image_id, record in records_by_id(out, "coco_val").items():
    want = expected[image_id].region_features.astype(np.float64).mean(0).astype(np.float32)
    np.testing.assert_array_equal(record.global_feature, want)


def test_npz_directory_with_default_keys(public_world, tmp_path):
  world, pub, d = public_world
  expected = records_by_id(world, "flickr_val")
  directory = export_lib.write_npz_dir(expected.values(), str(tmp_path / "npz"))
  out = str(tmp_path / "out")
  report = run_import(out, "flickr", "flickr_val",
                      [os.path.join(pub, "captions", "dataset_flickr30k.json")],
                      [os.path.join(directory, "*.npz")], feature_dim=d,
                      features_format="npz", split="val", tags=[_tags(pub, "flickr_val")])
  assert counts(report)["joined"] == 3
  assert_same_records(expected, records_by_id(out, "flickr_val"))


def test_coco_karpathy_json_joined_by_cocoid_named_by_file_stem(public_world, tmp_path):
  world, pub, d = public_world
  expected = records_by_id(world, "coco_train")
  images, stem = [], {}
  for i, r in enumerate(expected.values()):
    stem[r.image_id] = f"COCO_val2014_{i:012d}"
    images.append({"filename": f"{stem[r.image_id]}.jpg", "cocoid": r.image_id,
                   "split": ("train", "restval", "test")[i % 3],
                   "sentences": [{"raw": c, "tokens": c.split()} for c in r.captions]})
  karpathy = tmp_path / "dataset_coco.json"
  karpathy.write_text(json.dumps({"dataset": "coco", "images": images}))
  out = str(tmp_path / "out")
  report = run_import(out, "coco", "coco_train", [str(karpathy)], [_tsv(pub, "coco_train")],
                      feature_dim=d, split="train,restval", tsv_fields=EXPORT_FIELDS)
  kept = {im["cocoid"] for im in images if im["split"] != "test"}
  assert counts(report)["joined"] == len(kept) == 20
  assert counts(report)["features_without_captions"] == 10  # the test split's
  # Features keyed by cocoid (the generator's id here); records named as the
  # Karpathy reader (data/karpathy.py) names references.
  assert_same_records({k: v for k, v in expected.items() if k in kept},
                      records_by_id(out, "coco_train"), id_of=stem.get,
                      fields=("captions", "size"))


def _b64(array, dtype="<f4"):
  return base64.b64encode(np.asarray(array, dtype).tobytes())


def test_more_than_16_regions_keeps_the_16_most_confident(tmp_path):
  rng = np.random.default_rng(0)
  n, d = 20, 4
  features = rng.normal(size=(n, d)).astype(np.float32)
  boxes = np.tile(np.array([[10, 20, 110, 220]], np.float32), (n, 1))
  confidence = rng.permutation(n).astype(np.float32)  # distinct
  fields = bottomup.LAYOUTS["lxmert"]
  values = {"img_id": b"img", "img_h": b"400", "img_w": b"200",
            "objects_id": _b64(np.arange(n), "<i8"), "objects_conf": _b64(confidence),
            "attrs_id": _b64(np.zeros(n), "<i8"), "attrs_conf": _b64(np.zeros(n)),
            "num_boxes": str(n).encode(), "boxes": _b64(boxes), "features": _b64(features)}
  tsv = tmp_path / "f.tsv"
  tsv.write_bytes(b"\t".join(values[f] for f in fields) + b"\n")
  narratives = tmp_path / "n.jsonl"
  narratives.write_text(json.dumps({"image_id": "img", "caption": "a long story"}) + "\n")
  out = str(tmp_path / "out")
  run_import(out, "locnar", "one", [str(narratives)], [str(tsv)], feature_dim=d,
             features_format="lxmert", feature_dtype="float32")
  (record,) = records_by_id(out, "one").values()
  keep = np.sort(np.argsort(-confidence)[:records_lib.MAX_REGIONS])
  assert len(keep) == 16 and set(keep) == set(np.flatnonzero(confidence >= 4))
  np.testing.assert_array_equal(record.region_features, features[keep])
  # Pixel boxes / size (width 200, height 400, LXMERT's height-first order).
  np.testing.assert_allclose(record.region_boxes[0], [0.05, 0.05, 0.55, 0.55], atol=1e-7)
  # The global feature is the mean of all 20 regions, not of the 16 kept.
  np.testing.assert_allclose(record.global_feature, features.mean(0), atol=1e-6)
  assert (record.width, record.height, record.captions) == (200, 400, ["a long story"])


def test_nocaps_domains_and_sizes_from_the_image_info(public_world, tmp_path):
  world, pub, d = public_world
  expected = records_by_id(world, "nocaps_val")
  with open(os.path.join(pub, "captions", "nocaps_val.json")) as f:
    full = json.load(f)
  info = {"images": full["images"]}                     # val image info: no captions
  captions = {"images": [{"id": im["id"]} for im in full["images"]],
              "annotations": full["annotations"]}       # captions without domains
  dropped = full["images"][0]["id"]
  info["images"] = info["images"][1:]                   # one image with no domain
  (tmp_path / "info.json").write_text(json.dumps(info))
  (tmp_path / "captions.json").write_text(json.dumps(captions))
  vinvl = export_lib.write_tsv(expected.values(), str(tmp_path / "f.tsv"), layout="vinvl")
  out = str(tmp_path / "out")
  report = run_import(out, "nocaps", "nocaps_val", [str(tmp_path / "captions.json")], [vinvl],
                      feature_dim=d, features_format="vinvl",
                      image_info=[str(tmp_path / "info.json")])
  assert counts(report)["bad_rows/bad_domain"] == 1
  expected.pop(dropped)
  assert_same_records(expected, records_by_id(out, "nocaps_val"), exact_global=False,
                      fields=("captions", "size", "domain"))
