"""Dataset statistics job and the synthetic raw pool."""
import json
import os

from PIL import Image

from cc12m_jax.curation import candidates
from cc12m_jax.curation import stats
from cc12m_jax.curation import synthetic_pool
from tests.curation import helpers


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
