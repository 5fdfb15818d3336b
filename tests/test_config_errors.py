"""Bad `--config.` overrides fail at start-up with one clear line, before any compute."""
import os
import subprocess
import sys

import pytest

from cc12m_jax import config_check
from cc12m_jax import main  # pylint: disable=unused-import  (defines the --config flag)
from configs import synthetic_pretrain

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIG = "configs/synthetic_pretrain.py"


def _main(workdir, *overrides) -> subprocess.CompletedProcess:
  cmd = [sys.executable, "-m", "cc12m_jax.main", f"--config={CONFIG}", f"--workdir={workdir}",
         *overrides]
  return subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=ROOT)


def _fatal_lines(stderr: str) -> list[str]:
  return [line for line in stderr.splitlines() if line.startswith("FATAL Flags parsing error")]


@pytest.mark.parametrize("override, expected", [
    ("--config.model.foo=1",
     "unknown config key config.model.foo (from --config.model.foo=1); "
     "config.model has no key 'foo' (its keys: attention_dropout,"),
    ("--config.model.emb_dims=64",
     "unknown config key config.model.emb_dims (from --config.model.emb_dims=64); "
     "did you mean config.model.emb_dim?"),
    ("--config.nosuch.x=1",
     "unknown config key config.nosuch.x (from --config.nosuch.x=1); "
     "config has no key 'nosuch' (its keys: data, decode, eval, mesh, mode, model,"),
])
def test_unknown_override_key_fails_with_one_line_before_compute(tmp_path, override, expected):
  workdir = tmp_path / "workdir"
  result = _main(workdir, override)
  assert result.returncode != 0
  assert "Traceback" not in result.stderr, result.stderr[-3000:]
  [line] = _fatal_lines(result.stderr)
  assert line.startswith("FATAL Flags parsing error: " + expected), line
  assert not workdir.exists()


def test_wrong_type_still_fails_as_absl_flag_error(tmp_path):
  workdir = tmp_path / "workdir"
  result = _main(workdir, "--config.model.emb_dim=abc")
  assert result.returncode != 0
  assert "Traceback" not in result.stderr, result.stderr[-3000:]
  [line] = _fatal_lines(result.stderr)
  assert line.startswith("FATAL Flags parsing error: flag --config.model.emb_dim=abc:"), line
  assert not workdir.exists()


def test_valid_overrides_parse(tmp_path):
  workdir = tmp_path / "workdir"
  result = _main(workdir, "--config.model.emb_dim=64", "--noconfig.train.async_checkpointing",
                 "--only_check_args")
  assert result.returncode == 0, result.stderr[-3000:]
  assert not _fatal_lines(result.stderr)
  # A valid key reaches the config: num_heads=3 parses, then validation rejects it.
  result = _main(workdir, "--config.model.num_heads=3")
  assert result.returncode != 0
  assert "Traceback" not in result.stderr, result.stderr[-3000:]
  [line] = [l for l in result.stderr.splitlines() if l.startswith("FATAL config error")]
  assert "config.model.num_heads: emb_dim=128 is not divisible by num_heads=3" in line
  assert not workdir.exists()


def test_config_file_runs_once_with_overrides(tmp_path):
  """absl loads the config file; the override check does not load it a second time."""
  calls = tmp_path / "calls.txt"
  config_file = tmp_path / "counting_config.py"
  config_file.write_text(
      "from configs import synthetic_pretrain\n\n\n"
      "def get_config():\n"
      f"  with open({str(calls)!r}, 'a') as f:\n"
      "    f.write('get_config\\n')\n"
      "  return synthetic_pretrain.get_config()\n")
  result = subprocess.run(
      [sys.executable, "-m", "cc12m_jax.main", f"--config={config_file}",
       f"--workdir={tmp_path / 'w'}", "--config.model.emb_dim=64", "--only_check_args"],
      capture_output=True, text=True, timeout=300, cwd=ROOT,
      env=dict(os.environ, PYTHONPATH=ROOT))
  assert result.returncode == 0, result.stderr[-3000:]
  assert calls.read_text().splitlines() == ["get_config"]


def test_generate_entry_point_checks_override_keys(tmp_path):
  result = subprocess.run(
      [sys.executable, "-m", "cc12m_jax.data.synthetic.generate", f"--config={CONFIG}",
       "--config.synthetic.nmu_images=3"], capture_output=True, text=True, timeout=300,
      cwd=ROOT)
  assert result.returncode != 0
  assert "Traceback" not in result.stderr, result.stderr[-3000:]
  [line] = _fatal_lines(result.stderr)
  assert line.startswith("FATAL Flags parsing error: unknown config key "
                         "config.synthetic.nmu_images"), line


def test_check_overrides_in_process():
  argv = ["main", "--config", CONFIG, "--config.optim.learning_rate=1e-4",
          "--config.trian.num_train_steps=5"]
  with pytest.raises(config_check.UnknownOverrideError,
                     match=r"config\.trian\.num_train_steps .*did you mean "
                           r"config\.train\.num_train_steps\?"):
    config_check.check_overrides(argv)
  config_check.check_overrides(argv[:-1])  # all keys known: no error
  config_check.check_overrides(["main", "--config.model.foo=1"])  # no --config: absl's turn


def test_unknown_key_message():
  config = synthetic_pretrain.get_config()
  assert config_check.unknown_key_message(config, "model.emb_dim") is None
  assert config_check.unknown_key_message(config, "model") is None  # a whole section
  # Only sections are suggested for a path that goes deeper ('mode' is a string).
  assert config_check.unknown_key_message(config, "modle.emb_dim").endswith(
      "did you mean config.model.emb_dim?")
  assert config_check.unknown_key_message(config, "model.emb_dim.x").endswith(
      "config.model.emb_dim is a value (int), not a section")
