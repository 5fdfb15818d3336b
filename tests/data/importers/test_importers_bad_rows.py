"""Bad rows: counted by reason, listed with file and line; strict mode stops.

Small handmade inputs (D=4): a features TSV, Localized Narratives and tags
with one bad row of each kind, read in tiny byte ranges so that line numbers
are resolved across ranges.
"""
import base64
import json

import numpy as np
import pytest

from cc12m_jax.data.importers import cli
from cc12m_jax.data.importers import rows as rows_lib
from cc12m_jax.data.importers import textfiles
from importer_fixtures import BEAM_ARGS, counts, records_by_id, run_import

D = 4


def _b64(array):
  return base64.b64encode(np.asarray(array, "<f4").tobytes())


def _row(image_id: bytes, n: int = 2, *, features=None, num_boxes=None) -> bytes:
  rng = np.random.default_rng(len(image_id))
  features = rng.normal(size=(n, D)) if features is None else features
  boxes = np.tile([[0.0, 0.0, 50.0, 40.0]], (n, 1))
  return b"\t".join([image_id, b"100", b"80", str(num_boxes or n).encode(),
                     _b64(boxes), _b64(features)])


def _features_lines():
  nan = np.ones((2, D))
  nan[1, 2] = np.nan
  good_a = _row(b"a")
  truncated = good_a[:-7]                       # base64 cut mid-quantum
  return [
      good_a,                                   # 1
      truncated.replace(b"a", b"t", 1),         # 2 bad_base64
      _row(b"w", num_boxes=3),                  # 3 wrong_length
      _row(b"n", features=nan),                 # 4 non_finite
      _row(b""),                                # 5 missing_id
      _row(b"a", n=3),                          # 6 duplicate_id (of line 1)
      _row(b"\xff\xfe"),                        # 7 bad_utf8
      b"x\t1\t2",                               # 8 wrong_columns
      _row(b"b"),                               # 9
      _row(b"d"),                               # 10 no captions
  ]


def _narrative(image_id, caption):
  return json.dumps({"image_id": image_id, "caption": caption}).encode()


CAPTION_LINES = [
    _narrative("a", "a dog on a sofa"),         # 1
    b'{"image_id": "b", "caption": "caf\xe9"}',  # 2 bad_utf8 (latin-1 byte)
    _narrative("b", "   "),                     # 3 empty_caption
    b"{not json",                               # 4 bad_json
    _narrative("b", "two cats"),                # 5
    _narrative("c", "no features for me"),      # 6 captions without features
]
TAG_LINES = [
    json.dumps({"image_id": "a", "tags": [{"name": "dog", "score": 0.9}]}).encode(),
    b'{"image_id": "b", "tags": [{"name": "cat", "score": NaN}]}',   # bad_tags
    json.dumps({"image_id": "z", "tags": [{"name": "tree", "score": 0.5}]}).encode(),
]


@pytest.fixture
def inputs(tmp_path):
  paths = {}
  for name, lines in (("features.tsv", _features_lines()), ("narratives.jsonl", CAPTION_LINES),
                      ("tags.jsonl", TAG_LINES)):
    paths[name] = tmp_path / name
    paths[name].write_bytes(b"\n".join(lines) + b"\n")
  return {k: str(v) for k, v in paths.items()}


def _import(inputs, out, **kwargs):
  return run_import(out, "locnar", "unit", [inputs["narratives.jsonl"]],
                    [inputs["features.tsv"]], feature_dim=D, tags=[inputs["tags.jsonl"]],
                    split_bytes=64, **kwargs)


def test_bad_rows_are_counted_by_reason_and_listed_with_their_line(inputs, tmp_path):
  out = str(tmp_path / "out")
  report = _import(inputs, out)
  assert counts(report) == {
      "joined": 2, "captions": 2, "features_without_captions": 1,
      "captions_without_features": 1, "tags_without_features": 1,
      "rows/features": 4, "rows/captions": 3, "rows/tags": 2,
      "bad_rows/bad_base64": 1, "bad_rows/wrong_length": 1, "bad_rows/non_finite": 1,
      "bad_rows/missing_id": 1, "bad_rows/duplicate_id": 1, "bad_rows/bad_utf8": 2,
      "bad_rows/wrong_columns": 1, "bad_rows/empty_caption": 1, "bad_rows/bad_json": 1,
      "bad_rows/bad_tags": 1}
  records = records_by_id(out, "unit")
  assert sorted(records) == ["a", "b"]
  assert records["a"].captions == ["a dog on a sofa"] and records["a"].tags == ["dog"]
  assert records["b"].captions == ["two cats"] and records["b"].tags == []
  assert len(records["a"].region_features) == 2      # line 1 kept, not line 6

  with open(f"{out}/unit/bad_rows.jsonl") as f:
    listed = sorted((r["file"].rsplit("/", 1)[-1], r["line"], r["reason"])
                    for r in map(json.loads, f))
  assert listed == sorted([
      ("features.tsv", 2, "bad_base64"), ("features.tsv", 3, "wrong_length"),
      ("features.tsv", 4, "non_finite"), ("features.tsv", 5, "missing_id"),
      ("features.tsv", 6, "duplicate_id"), ("features.tsv", 7, "bad_utf8"),
      ("features.tsv", 8, "wrong_columns"), ("narratives.jsonl", 2, "bad_utf8"),
      ("narratives.jsonl", 3, "empty_caption"), ("narratives.jsonl", 4, "bad_json"),
      ("tags.jsonl", 2, "bad_tags")])


def test_strict_mode_names_file_and_line(tmp_path):
  features = tmp_path / "features.tsv"
  lines = _features_lines()
  features.write_bytes(b"\n".join([lines[0], lines[8], lines[3]]) + b"\n")  # NaN on line 3
  narratives = tmp_path / "n.jsonl"
  narratives.write_bytes(CAPTION_LINES[0] + b"\n")
  with pytest.raises(rows_lib.BadRowError,
                     match=rf"^bad row: {features}:3: non_finite \(image 'n'\)"):
    run_import(str(tmp_path / "out"), "locnar", "unit", [str(narratives)], [str(features)],
               feature_dim=D, strict=True, split_bytes=64)


def test_strict_duplicate_names_both_rows(tmp_path):
  features = tmp_path / "features.tsv"
  lines = _features_lines()
  features.write_bytes(b"\n".join([lines[0], lines[8], lines[5]]) + b"\n")
  narratives = tmp_path / "n.jsonl"
  narratives.write_bytes(CAPTION_LINES[0] + b"\n")
  with pytest.raises(rows_lib.BadRowError) as raised:
    run_import(str(tmp_path / "out"), "locnar", "unit", [str(narratives)], [str(features)],
               feature_dim=D, strict=True, split_bytes=64)
  assert str(raised.value).startswith(f"bad row: {features}:3: duplicate_id (image 'a')")
  assert str(raised.value).endswith(f"(first at {features}:1)")


def test_cli_strict_prints_the_bad_row_and_fails(inputs, tmp_path, capsys):
  argv = ["locnar", "--source=unit", f"--output_dir={tmp_path / 'out'}",
          f"--captions={inputs['narratives.jsonl']}", f"--features={inputs['features.tsv']}",
          "--feature_dim=4", "--strict", "--vocab_sources=none", *BEAM_ARGS]
  assert cli.main(argv) == 1
  err = capsys.readouterr().err
  assert err.startswith(f"error: bad row: {inputs['features.tsv']}:")


def test_cli_rejects_a_misspelt_flag(inputs, tmp_path):
  with pytest.raises(SystemExit, match="did you mean --direct_running_mode"):
    cli.main(["locnar", "--source=unit", f"--output_dir={tmp_path}",
              f"--captions={inputs['narratives.jsonl']}",
              f"--features={inputs['features.tsv']}", "--direct_runing_mode=in_memory"])


@pytest.mark.parametrize("split_bytes", [1, 7, 64, 1000])
def test_byte_ranges_read_every_line_once_with_its_number(tmp_path, split_bytes):
  lines = [b"x" * n for n in (0, 5, 1, 30, 0, 0, 12, 3)] + [b"last-no-newline"]
  path = tmp_path / "t.txt"
  path.write_bytes(b"\n".join(lines))
  seen = []
  for name, start, end in textfiles.byte_ranges(str(path), path.stat().st_size, split_bytes):
    seen += list(textfiles.read_range(name, start, end))
  numbers = textfiles.newlines_before(str(path), [offset for offset, _ in seen])
  assert [(numbers[o] + 1, line) for o, line in seen] == [
      (i + 1, line) for i, line in enumerate(lines)]
