"""Helpers of the importer tests (a uniquely named module: test directories
share one import namespace)."""
import os
from typing import Optional, Sequence

import numpy as np

from cc12m_jax.data import records as records_lib
from cc12m_jax.data.importers import pipeline as pipeline_lib
from cc12m_jax.data.importers import run as run_lib
from cc12m_jax.data.synthetic import export as export_lib

# Beam's local runner in this process: no worker processes to start.
BEAM_ARGS = ("--direct_running_mode=in_memory", "--direct_num_workers=1")
EXPORT_FIELDS = ",".join(export_lib.EXPORT_FIELDS)


def run_import(output_dir: str, fmt: str, source: str, captions: Sequence[str],
               features: Sequence[str], *, feature_dim: int, **kwargs) -> dict:
  """One import on the local runner, replacing an earlier one; the report."""
  spec = pipeline_lib.ImportSpec(
      format=fmt, source=source, output_dir=output_dir, captions=list(captions),
      features=list(features), feature_dim=feature_dim,
      **{k: v for k, v in kwargs.items() if k not in ("vocab_sources",)})
  return run_lib.run_import(spec, BEAM_ARGS, overwrite=True,
                            vocab_sources=kwargs.get("vocab_sources", []),
                            log=lambda _: None)


def records_by_id(data_dir: str, source: str) -> dict:
  return {r.image_id: r for r in records_lib.read_source_records(data_dir, source)}


def assert_same_records(expected: dict, got: dict, *, source: str = "",
                        id_of=lambda i: i, exact_global: bool = True,
                        boxes_atol: float = 1e-6,
                        fields: Optional[Sequence[str]] = None) -> None:
  """The imported records equal the generator's, id for id.

  Features are compared exactly (same storage dtype); boxes to within the
  float32 rounding of a pixel round trip. `fields`: compare only these of
  tags / captions / size / domain (the formats that do not carry them).
  """
  fields = fields or ("tags", "captions", "size", "domain")
  mapped = {id_of(k): v for k, v in expected.items()}
  assert sorted(got) == sorted(mapped)
  for image_id, want in mapped.items():
    have: records_lib.FeatureRecord = got[image_id]
    where = f"{source}/{image_id}"
    np.testing.assert_array_equal(have.region_features, want.region_features, where)
    np.testing.assert_allclose(have.region_boxes, want.region_boxes, atol=boxes_atol,
                               err_msg=where)
    if exact_global:
      np.testing.assert_array_equal(have.global_feature, want.global_feature, where)
    if "tags" in fields:
      assert list(have.tags) == list(want.tags), where
      np.testing.assert_array_equal(have.tag_scores, want.tag_scores, where)
    if "captions" in fields:
      assert list(have.captions) == list(want.captions), where
    if "size" in fields:
      assert (have.width, have.height) == (want.width, want.height), where
    if "domain" in fields:
      assert have.domain == want.domain, where
    if source:
      assert have.source == source, where


def counts(report: dict) -> dict:
  """The report's non-zero counts."""
  return {k: v for k, v in report["counts"].items() if v}


def path(root: str, *parts: str) -> str:
  return os.path.join(root, *parts)
