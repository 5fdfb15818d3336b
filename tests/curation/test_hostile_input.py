"""Issue 18 (findings 3 and 8): hostile input is counted, never fatal, and rejects keep ids.

Every test runs the real Beam pipeline (FnApiRunner, one process) on files
written here: JSON Lines, CC-style TSV, img2dataset Parquet, damaged archives.
"""
import collections
import glob
import gzip
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cc12m_jax.curation import candidates
from cc12m_jax.curation import dofns
from cc12m_jax.curation import report
from cc12m_jax.data.importers import image_ids
from tests.curation import helpers

GOOD = {"url": "https://x.test/a.jpg", "alt_text": "a dog on the beach with a ball",
        "format": "JPEG", "width": 800, "height": 600, "tags": ["dog"],
        "safety_score": 0.1}


def _line(**fields) -> bytes:
  return json.dumps(dict(GOOD, **fields)).encode()


def _rejects(out_dir):
  return helpers.read_jsonl_shards(str(out_dir), "rejects")


def _kept_parquet(out_dir):
  return [row for path in sorted(glob.glob(f"{out_dir}/kept-*.parquet"))
          for row in pq.read_table(path).to_pylist()]


def _reconciles(counts, out_dir, n_lines):
  """in = kept + rejected, in counts.json and in the files written."""
  report.check(counts)
  assert counts["input"] == n_lines
  by_reason = collections.Counter("rejected/" + r["reason"] for r in _rejects(out_dir))
  assert by_reason == {k: v for k, v in counts.items() if k.startswith("rejected/")}


def test_issue_18_hostile_lines_are_counted_with_their_ids(tmp_path):
  lines = [
      _line(id="good"),
      _line(id="surrogate_caption", alt_text="a dog \ud800 on the beach"),  # finding 3
      _line(id="\ud800"),                                                   # finding 3
      b'{"id": "nested", "alt_text": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
      _line(id="wide", width=10**30, height=10**30),   # OverflowError in the Parquet writer
      _line(id="string_width", width="800"),           # finding 8: was accepted
      _line(id="float_width", width=800.7),            # finding 8: was accepted
      _line(id="zero_width", width=0),
      _line(id="bool_height", height=True),
      _line(id="too_wide", width=2**31),
      _line(id={"a": 1}),                              # finding 8: was stringified
      _line(id=["x"]),
      _line(id=17),
      _line(id="\u3000\u00a0"),                        # blank: counts as missing
      _line(id="good", alt_text="a dog on the beach with two balls"),  # finding 8: kept
      _line(id="bad_tags", tags="[not json"),
      _line(id="string_safety", safety_score="0.1"),
      _line(id="unsafe", safety_score=float("inf")),
      b'{"id": "truncated", "alt_text": "a dog on the',
      b"\xff\xfe not utf-8",
      b"",
      b"[1, 2, 3]",
      json.dumps({"alt_text": "no id here"}).encode(),
  ]
  path = tmp_path / "hostile.jsonl"
  path.write_bytes(b"\n".join(lines) + b"\n")
  out = tmp_path / "out"
  counts = helpers.run(helpers.test_config("cc12m", text__min_token_count=0,
                                           output_format="parquet"), str(path), str(out))
  assert counts == {
      "input": 23, "kept": 1,
      "rejected/input/invalid_unicode": 2, "rejected/input/bad_json": 2,
      "rejected/image/bad_size": 6, "rejected/input/id_not_a_string": 3,
      "rejected/input/missing_id": 2, "rejected/input/duplicate_id": 1,
      "rejected/input/bad_tags": 1, "rejected/input/bad_safety_score": 2,
      "rejected/input/bad_utf8": 1, "rejected/input/empty_line": 1,
      "rejected/input/not_an_object": 1}
  _reconciles(counts, out, len(lines))
  kept = _kept_parquet(out)
  assert [(r["id"], r["caption"]) for r in kept] == [("good", "a dog on the beach with a ball")]
  rejects = {r["source"]: r for r in _rejects(out)}
  assert set(rejects) == {f"{path}:{n}" for n in range(2, len(lines) + 1)}
  by_line = {int(source.rsplit(":", 1)[1]): r for source, r in rejects.items()}
  # Every line with a string id keeps it in the rejects, even when the line
  # is not valid JSON (the id is read from its text).
  for n, record_id in ((2, "surrogate_caption"), (3, "\ud800"), (4, "nested"), (5, "wide"),
                       (6, "string_width"), (7, "float_width"), (15, "good"),
                       (16, "bad_tags"), (17, "string_safety"), (19, "truncated")):
    assert by_line[n]["id"] == record_id, n
  assert by_line[15]["detail"] == f"first seen at {path}:1"
  assert [by_line[n]["raw_id"] for n in (11, 12, 13)] == [{"a": 1}, ["x"], 17]
  assert all(by_line[n]["id"] is None for n in (11, 12, 13, 14, 20, 21, 22, 23))
  assert sum(r["id"] is None for r in rejects.values()) == 8


def test_first_record_of_an_id_wins_by_file_then_line(tmp_path):
  a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
  a.write_bytes(b"\n".join([_line(id="x1"), _line(id="dup", alt_text="a dog on the grass"),
                            _line(id="dup", alt_text="a dog on the sand")]) + b"\n")
  b.write_bytes(_line(id="dup", alt_text="a dog on the road") + b"\n" + _line(id="x1") + b"\n")
  kept_by_order = []
  for order in (f"{b},{a}", f"{a},{b}"):
    out = tmp_path / f"out{len(kept_by_order)}"
    counts = helpers.run(helpers.test_config("cc12m", text__min_token_count=0), order, str(out))
    assert counts["rejected/input/duplicate_id"] == 3 and counts["kept"] == 2
    kept_by_order.append(sorted((r["id"], r["caption"])
                                for r in helpers.read_jsonl_shards(str(out), "kept")))
    dups = sorted((r["id"], r["source"], r["detail"]) for r in _rejects(out))
    assert dups == [("dup", f"{a}:3", f"first seen at {a}:2"),
                    ("dup", f"{b}:1", f"first seen at {a}:2"),
                    ("x1", f"{b}:2", f"first seen at {a}:1")]
  assert kept_by_order[0] == kept_by_order[1] == [("dup", "a dog on the grass"),
                                                  ("x1", GOOD["alt_text"])]


def test_cc_style_tsv_input(tmp_path):
  cc12m_url = "https://x.test/dog.jpg"
  cc3m_url = "http://y.test/Beach%20Dog.jpg"
  lines = [
      b"url\tcaption",                                           # a header line
      f"{cc12m_url}\ta dog on the beach with a ball".encode(),  # CC12M: url, caption
      f"a dog on the beach with a ball\t{cc3m_url}".encode(),   # CC3M: caption, url
      f"{cc12m_url}\ta dog on the beach with a red ball".encode(),  # same URL: same id
      b"https://x.test/3.jpg\ta dog\tan extra column",
      b"no url here\ta dog on the beach",
      b"https://x.test/4.jpg\ta dog on the \xff beach",
      b"",
  ]
  path = tmp_path / "cc.tsv.gz"
  with gzip.open(path, "wb") as f:
    f.write(b"\r\n".join(lines) + b"\r\n")
  config = helpers.test_config("cc12m", text__min_token_count=0,
                               image__missing_metadata="skip_filter",
                               image_text__missing_tags="skip_filter")
  out = tmp_path / "out"
  counts = helpers.run(config, str(path), str(out))
  assert counts == {
      "input": 8, "kept": 2, "rejected/input/tsv_header": 1, "rejected/input/duplicate_id": 1,
      "rejected/input/bad_tsv": 2, "rejected/input/bad_utf8": 1, "rejected/input/empty_line": 1,
      "noted/image/missing_metadata": 2, "noted/image/missing_safety_score": 2,
      "noted/image_text/missing_tags": 2}
  _reconciles(counts, out, len(lines))
  kept = {r["id"]: r for r in helpers.read_jsonl_shards(str(out), "kept")}
  assert set(kept) == {candidates.url_image_id(cc12m_url), candidates.url_image_id(cc3m_url)}
  assert kept[candidates.url_image_id(cc3m_url)]["image_url"] == cc3m_url
  assert kept[candidates.url_image_id(cc12m_url)]["width"] is None
  rejects = {r["source"].rsplit(":", 1)[1]: r for r in _rejects(out)}
  assert rejects["5"]["id"] == candidates.url_image_id("https://x.test/3.jpg")
  assert rejects["7"]["id"] == candidates.url_image_id("https://x.test/4.jpg")
  # The defaults refuse a pool without tags or image metadata, by reason.
  counts = helpers.run(helpers.test_config("cc12m", text__min_token_count=0), str(path),
                       str(tmp_path / "strict"))
  assert counts["rejected/image/missing_metadata"] == 2 and counts["kept"] == 0


def test_url_ids_agree_with_the_importer():
  # The first 16 hex digits of SHA-1 of the URL, surrounding spaces dropped;
  # pinned (the importer's test pins the same value): kept pairs, exclusion
  # lists and feature files all depend on it.
  assert candidates.url_image_id(" https://x.test/a.jpg\n") == "9d3b9e85cd498306"
  assert candidates.url_image_id("https://example.com/images/1.jpg") == "960ea6c07552f5ea"
  for url in ("https://x.test/a.jpg", " http://y.test/Beach%20Dog.jpg ", "https://ü.test/ß"):
    assert image_ids.url_image_id(url) == candidates.url_image_id(url)


def _img2dataset_table(with_jpg: bool) -> pa.Table:
  """img2dataset's output Parquet: metadata columns (+ jpg with output_format=parquet)."""
  jpeg = helpers.jpeg_bytes(256, 256)  # img2dataset's default resize
  rows = [
      ("000000000", "https://x.test/0.jpg", "a dog on the beach with a ball", "success",
       None, 256, 256, 1200, 600),
      ("000000001", "https://x.test/1.jpg", "a dog in the park", "failed_to_download",
       "HTTP Error 404", None, None, None, None),
      ("000000002", "https://x.test/2.jpg", "a dog on the grass", "failed_to_resize",
       "image too large", None, None, None, None),
      ("000000003", "https://x.test/3.jpg", "a dog on a small beach", "success",
       None, 256, 256, 300, 200),
      ("000000004", "https://x.test/4.jpg", "a dog on a wide beach", "success",
       None, 256, 256, 4000, 500),
  ]
  columns = list(zip(*rows))
  data = {"key": columns[0], "url": columns[1], "caption": columns[2], "status": columns[3],
          "error_message": columns[4], "width": columns[5], "height": columns[6],
          "original_width": columns[7], "original_height": columns[8],
          "exif": ["{}"] * len(rows), "sha256": ["ab" * 32] * len(rows)}
  if with_jpg:
    data["jpg"] = [jpeg if status == "success" else None for status in columns[3]]
    data["txt"] = list(columns[2])
  return pa.table(data)


@pytest.mark.parametrize("with_jpg", [True, False])
def test_img2dataset_parquet_input(tmp_path, with_jpg):
  path = tmp_path / "00000.parquet"
  pq.write_table(_img2dataset_table(with_jpg), str(path))
  # Images in separate files (output_format files / webdataset): the
  # metadata Parquet has no format, only the sizes.
  config = helpers.test_config("cc12m", text__min_token_count=0,
                               image_text__missing_tags="skip_filter",
                               image__missing_metadata="reject" if with_jpg else "skip_filter")
  out = tmp_path / "out"
  counts = helpers.run(config, str(path), str(out))
  expected = {"input": 5, "kept": 1, "rejected/image/download_failed": 2,
              "rejected/image/too_small": 1, "rejected/image/aspect_ratio": 1,
              "noted/image/missing_safety_score": 1, "noted/image_text/missing_tags": 1}
  if not with_jpg:
    expected["noted/image/missing_metadata"] = 1
  assert counts == expected
  _reconciles(counts, out, 5)
  (kept,) = helpers.read_jsonl_shards(str(out), "kept")
  assert (kept["id"], kept["width"], kept["height"]) == ("000000000", 1200, 600)
  assert (kept["image_sha256"] == "ab" * 32) == (not with_jpg)
  failed = [r for r in _rejects(out) if r["reason"] == "image/download_failed"]
  assert sorted(r["id"] for r in failed) == ["000000001", "000000002"]
  assert "HTTP Error 404" in next(r["detail"] for r in failed if r["id"] == "000000001")


def test_damaged_files_count_what_they_hold(tmp_path):
  good = [_line(id=f"g{i}") for i in range(400)]
  data = gzip.compress(b"\n".join(good) + b"\n")
  (tmp_path / "truncated.jsonl.gz").write_bytes(data[:len(data) // 2])
  (tmp_path / "garbage.parquet").write_bytes(b"PAR1 this is not parquet at all")
  (tmp_path / "ok.jsonl").write_bytes(_line(id="ok") + b"\n")
  out = tmp_path / "out"
  counts = helpers.run(helpers.test_config("cc12m", text__min_token_count=0),
                       f"{tmp_path}/*.jsonl.gz,{tmp_path}/*.parquet,{tmp_path}/ok.jsonl",
                       str(out))
  unreadable = [r for r in _rejects(out) if r["reason"] == "input/unreadable"]
  assert sorted(r["source"].rsplit("/", 1)[1] for r in unreadable)[0] == "garbage.parquet:1"
  assert len(unreadable) == 2 and counts["rejected/input/unreadable"] == 2
  truncated = next(r for r in unreadable if "truncated" in r["source"])
  lines_read = int(truncated["source"].rsplit(":", 1)[1]) - 1
  assert 0 < lines_read < 400 and "EOFError" in truncated["detail"]
  # Lines before the damage are curated as usual (a partial last line, cut
  # by the truncation, is a bad_json rejection).
  assert counts["input"] == lines_read + 2 + 1
  assert counts["kept"] + counts.get("rejected/input/bad_json", 0) == lines_read + 1
  _reconciles(counts, out, counts["input"])


class _Exploding(dict):
  """A record whose fields cannot be read: stands for any unforeseen failure."""

  def get(self, key, default=None):
    raise RuntimeError(f"cannot read {key}")


def test_an_element_that_raises_is_rejected_at_the_dofn_boundary():
  config = helpers.test_config("cc12m", text__min_token_count=0)
  (out,) = dofns.ParseFn().process((("f.jsonl", 7), "parquet", _Exploding(id="x")))
  assert out.tag == dofns.REJECTED
  reason, line = out.value
  assert reason == "input/unreadable"
  assert json.loads(line) == {"id": None, "reason": "input/unreadable", "source": "f.jsonl:7",
                              "detail": "parse: RuntimeError: cannot read id"}
  # NlpFn: one text breaks spaCy's batch; only that candidate is rejected.
  nlp_fn = dofns.NlpFn(config)
  nlp_fn.setup()
  good = dofns.parse_element(_line(id="ok"), "jsonl", ("f.jsonl", 1))
  bad = dict(good, id="broken", source=("f.jsonl", 2), alt_text=None)
  outs = list(nlp_fn.process([good, bad, dict(good, id="ok2")]))
  assert [o["id"] for o in outs if isinstance(o, dict)] == ["ok", "ok2"]
  (rejected,) = [json.loads(o.value[1]) for o in outs if not isinstance(o, dict)]
  assert (rejected["id"], rejected["reason"], rejected["source"]) == \
      ("broken", "input/unreadable", "f.jsonl:2")
  assert rejected["detail"].startswith("nlp: ")
  # The last check before the writers: a value Parquet cannot hold.
  record = next(o for o in outs if isinstance(o, dict))
  (out,) = dofns.RareWordFn().process(dict(record, width=10**30), frozenset())
  assert json.loads(out.value[1])["detail"].startswith("output: ValueError: kept field width")


def test_an_undecodable_line_keeps_the_id_a_parsed_line_would_have():
  """Invalid UTF-8 anywhere in a line: its reject carries the id by the same alias
  priority as a line that parses ("id" before "key" before "uid"), not whichever
  alias comes first in the text, and never an id the bad bytes fall inside."""
  def rejected_id(line: bytes):
    rejection = candidates.parse_candidate(line)
    assert rejection.reason == "input/bad_utf8"
    return rejection.record_id

  assert rejected_id(b'{"key": "\xed\xa0\x80", "alt_text": "a", "id": "x\xc2\xb4"}') == "x\u00b4"
  assert rejected_id(b'{"uid": "u", "key": "k", "alt_text": "a \xff dog"}') == "k"
  assert rejected_id(b'{"id": "a\xffb", "key": "k"}') is None  # as record_id_of: no fallback
  assert rejected_id(b'{"id": "r", "meta": {"id": "n"}, "alt_text": "\xff"}') == "r"


def test_a_cc_tsv_excludes_by_url_and_a_bad_exclusion_line_names_its_file(tmp_path):
  path = tmp_path / "in.jsonl"
  path.write_bytes(_line(id="a", url="https://x.test/a.jpg") + b"\n" +
                   _line(id="b", url="https://x.test/b.jpg") + b"\n")
  cc3m = tmp_path / "cc3m.tsv"
  cc3m.write_bytes(b"caption\turl\na dog\thttps://x.test/b.jpg\n")
  counts = helpers.run(helpers.test_config("cc12m", text__min_token_count=0), str(path),
                       str(tmp_path / "out"), exclude=str(cc3m))
  assert counts["rejected/excluded/in_other_dataset"] == 1 and counts["kept"] == 1
  # A dropped exclusion line would let the other dataset's images back in:
  # an unreadable one is an error naming the file and line.
  cc3m.write_bytes(b"a dog\thttps://x.test/b.jpg\nno url\tat all\n")
  with pytest.raises(Exception, match=r"cc3m.tsv:2: input/bad_tsv"):
    helpers.run(helpers.test_config("cc12m", text__min_token_count=0), str(path),
                str(tmp_path / "out2"), exclude=str(cc3m))
