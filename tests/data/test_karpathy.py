"""Karpathy-split JSON reader and the join to feature records."""
import json

import pytest

from cc12m_jax.data import karpathy


def _write(tmp_path, images):
  path = tmp_path / "dataset_flickr30k.json"
  path.write_text(json.dumps({"dataset": "flickr30k", "images": images}))
  return str(path)


def _image(i, split, n=5):
  return {"filename": f"{1000 + i}.jpg", "imgid": i, "split": split,
          "sentids": list(range(5 * i, 5 * i + n)),
          "sentences": [{"raw": f"A photo {i} caption {j}.", "tokens": ["a", "photo"],
                         "imgid": i, "sentid": 5 * i + j} for j in range(n)]}


def test_reads_one_split_in_file_order(tmp_path):
  path = _write(tmp_path, [_image(0, "train"), _image(1, "test"), _image(2, "val"),
                           _image(3, "test")])
  test = karpathy.load_karpathy_json(path, "test")
  assert [im.image_id for im in test] == ["1001", "1003"]
  assert test[0].captions == tuple(f"A photo 1 caption {j}." for j in range(5))
  assert len(karpathy.load_karpathy_json(path)) == 4


def test_tokens_are_used_when_raw_is_missing(tmp_path):
  image = _image(0, "test", n=1)
  del image["sentences"][0]["raw"]
  path = _write(tmp_path, [image])
  assert karpathy.load_karpathy_json(path, "test")[0].captions == ("a photo",)


@pytest.mark.parametrize("mutate,message", [
    (lambda im: im.pop("sentences"), r"images\[1\].*missing key 'sentences'"),
    (lambda im: im.update(split="dev"), r"1001.jpg.*unknown split 'dev'"),
    (lambda im: im.update(sentences=[]), r"1001.jpg.*no sentences"),
    (lambda im: im.update(filename="1000.jpg"), r"repeats images\[0\]"),
])
def test_bad_entries_name_the_image(tmp_path, mutate, message):
  images = [_image(0, "test"), _image(1, "test")]
  mutate(images[1])
  with pytest.raises(ValueError, match=message):
    karpathy.load_karpathy_json(_write(tmp_path, images), "test")


def test_join_matches_record_order_and_reports_mismatches(tmp_path):
  images = karpathy.load_karpathy_json(
      _write(tmp_path, [_image(i, "test") for i in range(4)]), "test")
  joined = karpathy.join_by_image_id(images, ["1002", "1000.jpg", "1003", "1001"])
  assert [im.image_id for im in joined.images] == ["1002", "1000", "1003", "1001"]
  assert joined.record_positions == [0, 1, 2, 3]

  with pytest.raises(ValueError, match=r"1 record\(s\) not in the split \(first \['9'\]\).*"
                                       r"1 split image\(s\) without a record"):
    karpathy.join_by_image_id(images, ["1002", "9", "1003", "1001"])
  lenient = karpathy.join_by_image_id(images, ["1002", "9", "1002", "1001"], strict=False)
  assert lenient.counts() == {"matched": 2, "records_without_json": 1,
                              "json_without_record": 2, "duplicate_records": 1}
  assert lenient.record_positions == [0, 3]
