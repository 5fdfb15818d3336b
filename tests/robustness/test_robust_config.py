"""Config values that contradict the data fail before the workdir is touched
(issue 18, finding 9): they used to end in 'Loss is nan' or a Flax
ScopeParamShapeError mid-run, after checkpoints and events were written."""
import os
import subprocess

import pytest

from cc12m_jax import config_rules
from cc12m_jax.data.text import tokenizer as tokenizer_lib
from tests.train.conftest import REPO_ROOT, main_command, trainer_config


@pytest.mark.parametrize("override, expected", [
    ("--config.model.vocab_size=10",
     "config.model.vocab_size: 10 is smaller than the vocabulary {world}/vocab.txt ({vocab} "
     "entries); set it to 0 (read from the vocabulary) or to at least {vocab}."),
    ("--config.model.feature_dim=8",
     "config.model.feature_dim: 8, but the records of source 'cc12m' have feature_dim 16 "
     "({world}/cc12m/metadata.json); set it to 0 (read from metadata.json) or 16."),
])
def test_dims_that_contradict_the_data_fail_before_the_workdir_is_touched(
    tiny_world, tmp_path, override, expected):
  vocab = tokenizer_lib.SubwordTokenizer(os.path.join(tiny_world, "vocab.txt")).vocab_size
  workdir = tmp_path / "run"
  result = subprocess.run(main_command(workdir, trainer_config(tiny_world), override),
                          capture_output=True, text=True, timeout=300, cwd=REPO_ROOT)
  assert result.returncode == 1
  assert "Traceback" not in result.stderr, result.stderr[-3000:]
  [line] = [l for l in result.stderr.splitlines() if l.startswith("FATAL")]
  assert line == "FATAL config error: " + expected.format(world=tiny_world, vocab=vocab)
  assert not workdir.exists()  # no checkpoints/, no events file


def test_matching_and_padded_dims_pass(tiny_world):
  config = trainer_config(tiny_world)
  vocab = tokenizer_lib.SubwordTokenizer(os.path.join(tiny_world, "vocab.txt")).vocab_size
  config.model.vocab_size, config.model.feature_dim = vocab + 64, 16  # padding is allowed
  config_rules.validate(config)
  config.data.eval_sources, config.train.eval_every_steps = "nocaps_val", 10
  config.model.feature_dim = 16
  config_rules.validate(config)  # the eval source agrees too
  config.data.vocab_path = os.path.join(tiny_world, "no_such_vocab.txt")
  with pytest.raises(config_rules.ConfigError,
                     match="config.model.vocab_size: cannot read the vocabulary .*no_such_vocab"):
    config_rules.validate(config)
