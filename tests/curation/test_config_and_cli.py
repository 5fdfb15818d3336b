"""Presets, config validation and the command line."""
import json
import os
import subprocess
import sys

import pytest

from cc12m_jax.curation import config as config_lib
from tests.curation import helpers

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _flat(config, prefix=""):
  out = {}
  for key, value in config.items():
    if hasattr(value, "items"):
      out.update(_flat(value, f"{prefix}{key}."))
    else:
      out[prefix + key] = value
  return out


def test_presets_differ_only_where_the_paper_says():
  cc3m, cc12m = (_flat(config_lib.preset_config(p)) for p in ("cc3m", "cc12m"))
  differing = {k for k in cc3m if cc3m[k] != cc12m[k]} - {"preset"}
  assert differing == set(config_lib._PRESET_DIFFERENCES["cc3m"])  # pylint: disable=protected-access
  assert cc3m["image.max_aspect_ratio"] == 2.0 and cc12m["image.max_aspect_ratio"] == 2.5
  assert cc3m["text.min_token_count"] == 5 and cc12m["text.min_token_count"] == 20
  assert cc12m["text.min_words"] == 3 and cc12m["text.max_words"] == 256
  assert cc12m["text.max_repeated_word_fraction"] == 0.2
  assert cc12m["transform.person"] == "placeholder" and cc3m["transform.person"] == "hypernym"
  # Kept in both (paper: unchanged).
  for key in ("image.allowed_formats", "image.min_shorter_side", "text.require_noun",
              "text.require_determiner", "image_text.min_tag_overlap"):
    assert cc3m[key] == cc12m[key]


def test_config_errors_name_the_field():
  config = helpers.test_config("cc12m")
  with pytest.raises(ValueError, match="input"):
    config_lib.validate(config)
  config.input, config.output_dir = "x.jsonl", "/tmp/x"
  config.image.max_aspect_ratio = 0.5
  with pytest.raises(ValueError, match="image.max_aspect_ratio"):
    config_lib.validate(config)
  with pytest.raises(AttributeError):
    config.text.max_wrods = 3  # locked: a typo is an error
  with pytest.raises(ValueError, match="preset"):
    config_lib.preset_config("cc6m")


def test_command_line_runs_and_prints_the_table(tmp_path):
  records = [helpers.record(f"r{i}", "a dog on the beach with a ball") for i in range(6)]
  records.append(helpers.record("bad", "a dog on the beach", fmt="PNG"))
  path = helpers.write_jsonl(str(tmp_path / "in.jsonl"), records)
  out = tmp_path / "out"
  proc = subprocess.run(
      [sys.executable, "-m", "cc12m_jax.curation.run",
       f"--config={REPO}/configs/curation_cc12m.py", f"--config.input={path}",
       f"--config.output_dir={out}", "--config.text.min_token_count=0",
       "--config.beam.direct_running_mode=in_memory", "--config.beam.direct_num_workers=1",
       "--direct_runner_bundle_repeat=0"],  # a Beam option, passed through
      cwd=REPO, capture_output=True, text=True, timeout=240, check=False)
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert "| kept | 6 |" in proc.stdout
  assert "| rejected/image/format | 1 |" in proc.stdout
  with open(out / "counts.json") as f:
    # No record has a safety score: the default policy (accept) lets them
    # through and counts each one that passed the image filter.
    assert json.load(f) == {"input": 7, "kept": 6, "rejected/image/format": 1,
                            "noted/image/missing_safety_score": 6}
  assert "| noted/image/missing_safety_score (passed by policy) | 6 |" in proc.stdout
