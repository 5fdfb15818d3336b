"""Rare-word filter: corpus-wide token counts (a global pass) used as a side input."""
import pytest

from tests.curation import helpers


def _records(rare_word, times, frequent=40):
  base = [helpers.record(f"f{i}", "a dog on the beach with a ball") for i in range(frequent)]
  rare = [helpers.record(f"r{i}", f"a dog on the beach with a {rare_word}") for i in range(times)]
  return base + rare


@pytest.mark.parametrize("preset,times,kept_rare", [
    ("cc3m", 4, False), ("cc3m", 5, True), ("cc12m", 19, False), ("cc12m", 20, True)])
def test_rare_word_threshold_boundaries(tmp_path, preset, times, kept_rare):
  path = helpers.write_jsonl(str(tmp_path / "in.jsonl"), _records("kettle", times))
  counts = helpers.run(helpers.test_config(preset), path, str(tmp_path / "out"))
  kept_ids = {r["id"] for r in helpers.read_jsonl_shards(str(tmp_path / "out"), "kept")}
  assert {f"f{i}" for i in range(40)} <= kept_ids
  assert ({f"r{i}" for i in range(times)} <= kept_ids) == kept_rare
  assert counts.get("rejected/text/rare_word", 0) == (0 if kept_rare else times)
  assert counts["input"] == 40 + times
