"""Reference readers (COCO captions, nocaps, Karpathy) and their errors."""
import json

import pytest

from cc12m_jax.evaluation import nocaps, report as report_lib


def write(tmp_path, obj, name="refs.json"):
  path = tmp_path / name
  path.write_text(json.dumps(obj))
  return str(path)


def test_coco_captions_json_has_no_domains(tmp_path):
  path = write(tmp_path, {
      "images": [{"id": 7, "file_name": "a.jpg"}, {"id": 9}],
      "annotations": [{"image_id": 9, "id": 1, "caption": "A cat."},
                      {"image_id": 7, "id": 2, "caption": "A dog."},
                      {"image_id": 7, "id": 3, "caption": "Two dogs."}]})
  refs = nocaps.load_references(path)
  assert refs.captions == {"7": ["A dog.", "Two dogs."], "9": ["A cat."]}
  assert refs.domains == {"7": "", "9": ""}
  assert refs.original_ids == {"7": 7, "9": 9}
  assert report_lib.predictions_list({"9": "a cat", "7": "a dog"}, refs) == [
      {"image_id": 7, "caption": "a dog"}, {"image_id": 9, "caption": "a cat"}]


def test_karpathy_split(tmp_path):
  path = write(tmp_path, {"images": [
      {"filename": "1.jpg", "split": "test", "sentences": [{"raw": "x y"}]},
      {"filename": "2.jpg", "split": "train", "sentences": [{"raw": "z"}]}]})
  refs = nocaps.load_references(path, split="test")
  # Keyed as the feature records name images: the file name's stem.
  assert refs.captions == {"1": ["x y"]}
  assert report_lib.predictions_list({"1": "a b"}, refs) == [{"image_id": "1", "caption": "a b"}]
  with pytest.raises(ValueError, match="no images with split 'val'"):
    nocaps.load_references(path, split="val")


@pytest.mark.parametrize("data, match", [
    ({"images": [{"id": 1}], "annotations": [{"image_id": 2, "caption": "x"}]},
     r"annotations\[0\] refers to image 2"),
    ({"images": [{"id": 1}], "annotations": []}, "image '1' has no reference"),
    ({"images": [{"id": 1, "domain": "far"}],
      "annotations": [{"image_id": 1, "caption": "x"}]}, "domain 'far'"),
    ({"images": [{"id": 1}, {"id": 1}], "annotations": []}, "listed twice"),
    ({"images": [{"id": 1}], "annotations": [{"image_id": 1}]},
     r"annotations\[0\] has no 'caption'"),
    ({"foo": 1}, "not a COCO/nocaps"),
])
def test_bad_reference_files_name_the_fault(tmp_path, data, match):
  with pytest.raises(ValueError, match=match):
    nocaps.load_references(write(tmp_path, data))


def test_prediction_errors_name_the_image(tmp_path):
  refs = nocaps.References({"1": ["a"], "2": ["b"]}, {"1": "", "2": ""},
                           {"1": 1, "2": 2}, "r.json")
  with pytest.raises(KeyError, match="'3'"):
    nocaps.evaluate({"1": "a", "3": "c"}, refs)
  with pytest.raises(ValueError, match=r"1 reference images have no "
                     r"prediction, e\.g\. \['2'\]"):
    nocaps.evaluate({"1": "a"}, refs)
  with pytest.raises(ValueError, match="unknown metrics"):
    nocaps.evaluate({"1": "a", "2": "b"}, refs, metrics=("CIDEr-X",))
  path = write(tmp_path, [{"image_id": 1, "caption": "a"},
                          {"image_id": 1, "caption": "b"}], "pred.json")
  with pytest.raises(ValueError, match="image 1 predicted twice"):
    report_lib.read_predictions(path)
