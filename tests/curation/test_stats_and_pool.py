"""Dataset statistics job (real Beam, local runner) and the synthetic raw pool."""
import collections
import json
import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from PIL import Image
import pytest
import tensorflow as tf

from cc12m_jax.curation import candidates
from cc12m_jax.curation import stats
from cc12m_jax.curation import synthetic_pool
from cc12m_jax.curation import words
from cc12m_jax.data import records
from tests.curation import helpers

IN_MEMORY = ["--direct_running_mode=in_memory"]  # one process: faster for tiny inputs


def test_dataset_stats_on_hand_written_captions():
  captions = ["a sumo wrestler in Tokyo", "two mangosteens on a table",
              "<PERSON> eats a mangosteen", "a dog"]
  s = stats.dataset_stats(captions, ["mangosteen", "sumo wrestler", "jellyfish"],
                          ["sumo", "mangosteen"])
  assert s["pairs"] == 4
  assert s["tokens"] == 5 + 5 + 4 + 2
  assert s["median_caption_length"] == 4.5
  assert s["person_caption_share"] == 0.25
  assert s["long_tail_words"] == {"sumo": 1, "mangosteen": 1}
  # 'mangosteens' counts for the class 'mangosteen'; multi-word classes match.
  assert s["classes"]["instances"] == {"mangosteen": 2, "sumo wrestler": 1, "jellyfish": 0}
  assert s["classes"]["median_instances"] == 1.0
  assert s["classes"]["median_instances_per_1m"] == 250_000.0


def test_coverage_curve_counts_classes_at_or_above_k():
  # 1000 captions; per 1M: 0, 1000, 5000, 5000.
  assert stats.coverage_curve([0, 1, 5, 5], 1000, [1, 1000, 1001, 5000, 5001]) == [3, 3, 2, 2, 0]


def test_compare_writes_json_markdown_and_png(tmp_path):
  for name, caps in (("small", ["a lychee on a table"] * 3),
                     ("large", ["a lychee on a table", "a durian in a box"] * 5)):
    helpers.write_jsonl(str(tmp_path / f"{name}.jsonl"), [{"caption": c} for c in caps])
  results = stats.compare({"small": str(tmp_path / "small.jsonl"),
                           "large": str(tmp_path / "large.jsonl")},
                          ["lychee", "durian"], ["durian"], str(tmp_path / "report"))
  assert results["large"]["long_tail_words"]["durian"] == 5
  with open(tmp_path / "report" / "stats.json") as f:
    saved = json.load(f)
  assert saved["datasets"]["small"]["pairs"] == 3
  with open(tmp_path / "report" / "stats.md") as f:
    md = f.read()
  assert "| pairs | 3 | 10 |" in md and "coverage.png" in md
  with Image.open(tmp_path / "report" / "coverage.png") as png:
    assert png.format == "PNG" and png.size[0] > 300


def test_beam_stats_equal_a_plain_count_over_a_web_pool():
  pool, _ = synthetic_pool.generate_pool(400, num_concepts=40, seed=3)
  captions = [r["alt_text"] for r in pool]
  classes = ["dog", "sumo wrestler", "mangosteen", "never seen here"]
  s = stats.dataset_stats(captions, classes, ["dog", "zzz"])
  tokens = [words.caption_tokens(c) for c in captions]
  counts = collections.Counter(t for ts in tokens for t in ts)
  assert s["pairs"] == 400 and s["tokens"] == sum(map(len, tokens))
  assert s["types"] == len(counts)
  lengths = sorted(map(len, tokens))
  assert s["median_caption_length"] == (lengths[199] + lengths[200]) / 2
  # Ranked by count, ties by token; the cut keeps exactly the 25 highest counts.
  assert [n for _, n in s["top_tokens"]] == [n for _, n in counts.most_common(25)]
  assert all(counts[t] == n for t, n in s["top_tokens"])
  assert s["top_tokens"] == sorted(s["top_tokens"], key=lambda tn: (-tn[1], tn[0]))
  assert s["long_tail_words"] == {"dog": counts["dog"], "zzz": 0}
  assert s["classes"]["instances"]["never seen here"] == 0
  assert s["person_caption_share"] == sum("<person>" in ts for ts in tokens) / 400


def test_empty_dataset_gives_zeros():
  s = stats.dataset_stats([], ["dog"], ["dog"])
  assert (s["pairs"], s["tokens"], s["types"], s["median_caption_length"]) == (0, 0, 0, 0.0)
  assert s["top_tokens"] == [] and s["classes"]["instances"] == {"dog": 0}


def test_compare_reads_jsonl_and_parquet_together(tmp_path):
  helpers.write_jsonl(str(tmp_path / "a.jsonl"), [{"caption": "a dog"}, {"caption": "a cat"}])
  pq.write_table(pa.table({"caption": ["two dogs", None]}), str(tmp_path / "b.parquet"))
  results = stats.compare({"mixed": f"{tmp_path}/a.jsonl,{tmp_path}/b.parquet"}, ["dog"], [],
                          str(tmp_path / "report"), IN_MEMORY)
  assert results["mixed"]["pairs"] == 4  # the null caption counts as an empty one
  assert results["mixed"]["classes"]["instances"] == {"dog": 2}


def test_compare_reads_every_caption_of_feature_records(tmp_path):
  """Feature-record shards (what generate and the importers write) are a stats input."""
  def record(image_id, caps):
    return records.FeatureRecord(
        image_id=image_id, source="s", global_feature=np.zeros(4, np.float32),
        region_features=np.zeros((1, 4), np.float32),
        region_boxes=np.array([[0, 0, 1, 1]], np.float32), tags=[], tag_scores=np.zeros(0),
        captions=caps, width=10, height=10)
  records.write_records(str(tmp_path / "recs" / "records.tfrecord"),
                        [record("1", ["a dog on grass", "two dogs", "a cat", "a dog", "grass"]),
                         record("2", ["a bird"])], 2)
  results = stats.compare({"recs": str(tmp_path / "recs" / "records.tfrecord-*")},
                          ["dog", "bird"], [], str(tmp_path / "report"), IN_MEMORY)
  assert results["recs"]["pairs"] == 6
  assert results["recs"]["classes"]["instances"] == {"dog": 3, "bird": 1}

  no_captions = tf.train.Example(features=tf.train.Features(feature={
      "image_id": tf.train.Feature(bytes_list=tf.train.BytesList(value=[b"img-7"]))}))
  with tf.io.TFRecordWriter(str(tmp_path / "bad.tfrecord")) as writer:
    writer.write(no_captions.SerializeToString())
  with pytest.raises(Exception, match="feature record 'img-7' has no 'captions'"):
    stats.compare({"bad": str(tmp_path / "bad.tfrecord")}, [], [], str(tmp_path / "r"),
                  IN_MEMORY)


def test_bad_inputs_are_errors_naming_the_file_or_the_name(tmp_path):
  with pytest.raises(FileNotFoundError, match="nothing-here"):
    stats.compare({"x": str(tmp_path / "nothing-here*.jsonl")}, [], [], str(tmp_path / "r"))
  with pytest.raises(ValueError, match="dataset name 'a/b'"):
    stats.compare({"a/b": str(tmp_path / "x.jsonl")}, [], [], str(tmp_path / "r"))
  bad = tmp_path / "bad.jsonl"
  bad.write_text('{"caption": "fine"}\n{"text": "no caption key"}\n')
  with pytest.raises(Exception, match="bad.jsonl: no string 'caption'"):
    stats.compare({"bad": str(bad)}, [], [], str(tmp_path / "r"), IN_MEMORY)


def test_synthetic_pool_is_deterministic_and_varied(tmp_path):
  pool_a, table = synthetic_pool.generate_pool(300, num_concepts=40, seed=1, bytes_fraction=0.5)
  pool_b, _ = synthetic_pool.generate_pool(300, num_concepts=40, seed=1, bytes_fraction=0.5)
  assert pool_a == pool_b
  styles = {r["style"] for r in pool_a}
  assert {"descriptive", "person", "hashtag", "long", "foreign", "junk_file"} <= styles
  probed = [candidates.probe_image(r["image_bytes"]) for r in pool_a if "image_bytes" in r]
  assert {p[0] for p in probed} >= {"JPEG", "PNG"}
  ratios = [max(w, h) / min(w, h) for _, w, h in probed]
  assert min(ratios) < 2.0 and any(2.0 < r <= 2.5 for r in ratios)
  assert all(v in ("product", "character") for v in table.values())
  paths = synthetic_pool.write_pool(pool_a, str(tmp_path), num_shards=2, fmt="both")
  assert [os.path.splitext(p)[1] for p in paths] == [".jsonl", ".parquet"]
