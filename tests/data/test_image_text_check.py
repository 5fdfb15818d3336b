"""The image-text check applies the curation's filter to feature records."""
import numpy as np
import pytest
import tensorflow as tf

from cc12m_jax.data import image_text_check
from cc12m_jax.data import records as records_lib


def _record(image_id, tags, scores, captions):
  return records_lib.FeatureRecord(
      image_id=image_id, source="web", global_feature=np.zeros(4, np.float32),
      region_features=np.zeros((1, 4), np.float32),
      region_boxes=np.array([[0, 0, 1, 1]], np.float32), tags=tags,
      tag_scores=np.asarray(scores, np.float32), captions=captions, width=640, height=480)


def test_counts_each_caption_under_the_filters_reason(tmp_path):
  shards = records_lib.write_records(str(tmp_path / "web" / "records.tfrecord"), [
      # 'jellyfish' (0.9) occurs, as a hashtag, and 'jellyfishes' stems to it.
      _record("a", ["jellyfish", "ocean"], [0.9, 0.3], ["#jellyfish #blue #ocean #pretty"]),
      _record("b", ["jellyfish"], [0.9], ["Jellyfishes in the aquarium",
                                           "click here to see more"]),
      # 'ocean' occurs but below min_tag_score; nothing confident matches.
      _record("c", ["ocean", "sea turtle"], [0.3, 0.8], ["a turtle in the ocean"]),
      _record("d", ["ocean"], [0.2], ["ocean"]),   # no tag is confident
      _record("e", [], [], ["an empty tagger"]),
  ], num_shards=2)
  counts = image_text_check.check_records(records_lib.read_records(shards, 4))
  assert counts == {"records": 5, "captions": 6, "pass": 2,
                    "image_text/tag_overlap": 2, "image_text/no_confident_tags": 2}
  table = image_text_check.markdown({"web": counts})
  assert "| web | 5 | 6 | 2 (33.3%) |" in table


def test_a_record_without_tag_scores_is_named(tmp_path):
  example = records_lib.record_to_example(_record("x1", ["dog"], [0.9], ["a dog"]))
  del example.features.feature["tag_scores"]
  path = str(tmp_path / "bad.tfrecord")
  with tf.io.TFRecordWriter(path) as w:
    w.write(example.SerializeToString())
  with pytest.raises(records_lib.BadRecordError, match="image_id='x1' reason=wrong_shape"):
    image_text_check.check_records(records_lib.read_records([path], 4))
