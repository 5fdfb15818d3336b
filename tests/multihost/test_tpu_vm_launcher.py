"""launch/tpu_vm.sh: what it would run on a TPU slice, read back the way bash reads it.

The dry run prints each command shell-quoted. Bash itself turns each printed
line into words (gcloud's argv), and each --command (what every worker's login
shell runs) into the commands it calls, with the remote programs replaced by
shell functions that print their arguments. A config path, a workdir and
overrides holding spaces and quotes must reach cc12m_jax.main unchanged.
"""
import os
import stat
import subprocess

import pytest

from tests.train.conftest import REPO_ROOT

LAUNCHER = os.path.join(REPO_ROOT, "launch", "tpu_vm.sh")
CONFIG = "configs/my config's \"v2\".py"
WORKDIR = "gs://bucket/runs/it's a \"run\" $HOME"
EXTRA = ["--config.data.data_dir=gs://bucket/feature dir/it's", "--config.train.num_train_steps=10"]
REPO_DIR = "my repo"
FIELD, RECORD = "\x1f", "\x1e"
# The programs a worker's command calls, as functions that print their name
# and arguments; `tee` passes its input through.
REMOTE = ("cd", "bash", "python3", "rm", "mkdir", "tar", "mv")
PRELUDE = "".join(
    f'{name}() {{ printf "%s{FIELD}" {name} "$@"; printf "{RECORD}"; }}; ' for name in REMOTE
) + "tee() { cat; }; "


def _words(command_line: str) -> list[str]:
  """The words bash makes of one simple command line."""
  out = subprocess.run(["bash", "-c", f'words() {{ printf "%s\\0" "$@"; }}; words {command_line}'],
                       capture_output=True, check=True, timeout=60).stdout.decode()
  return out.split("\0")[:-1]


def _remote_calls(command: str) -> list[list[str]]:
  """The programs (with their arguments) a worker's shell would call for `command`."""
  out = subprocess.run(["bash", "-c", PRELUDE + command], capture_output=True, check=True,
                       timeout=60).stdout.decode()
  return [r.split(FIELD)[:-1] for r in out.split(RECORD)[:-1]]


@pytest.fixture
def fake_gcloud(tmp_path):
  """A `gcloud` first on PATH that records each call's argv instead of reaching Google Cloud."""
  bin_dir, calls = tmp_path / "bin", tmp_path / "gcloud_calls"
  bin_dir.mkdir()
  script = bin_dir / "gcloud"
  script.write_text(f'#!/usr/bin/env bash\nprintf "%s\\0" gcloud "$@" >> {calls}\n'
                    f'printf "\\n" >> {calls}\n')
  script.chmod(script.stat().st_mode | stat.S_IXUSR)
  env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}", PROJECT="my-project",
             REPO_DIR=REPO_DIR, TARBALL=str(tmp_path / "src.tgz"))
  return env, calls


def _launch(env, *flags: str) -> subprocess.CompletedProcess:
  return subprocess.run(["bash", LAUNCHER, *flags, "my-tpu", "us-central2-b", CONFIG, WORKDIR,
                         *EXTRA], capture_output=True, text=True, env=env, timeout=120,
                        cwd=REPO_ROOT)


def test_dry_run_prints_every_command_and_runs_none(fake_gcloud, tmp_path):
  env, calls = fake_gcloud
  result = _launch(env, "--dry_run")
  assert result.returncode == 0, result.stderr
  assert not calls.exists() and not (tmp_path / "src.tgz").exists()  # nothing ran
  commands = [_words(line[2:]) for line in result.stdout.splitlines() if line.startswith("+ ")]
  tar, scp, sync, setup, train = commands
  target = ["--zone=us-central2-b", "--worker=all", "--project=my-project"]

  # 1. sync: a tarball of the checkout, copied to and unpacked on every worker.
  assert tar[:2] == ["bash", "-c"] and "git ls-files" in tar[2] and str(tmp_path / "src.tgz") in tar[2]
  assert scp == ["gcloud", "compute", "tpus", "tpu-vm", "scp", str(tmp_path / "src.tgz"),
                 "my-tpu:/tmp/cc12m_jax_src.tgz", *target]
  ssh = ["gcloud", "compute", "tpus", "tpu-vm", "ssh", "my-tpu", *target]
  assert sync[:-1] == ssh and sync[-1].startswith("--command=")
  assert ["tar", "-xzf", "/tmp/cc12m_jax_src.tgz", "-C", f"{REPO_DIR}.new"] in _remote_calls(
      sync[-1][len("--command="):])
  assert ["mv", f"{REPO_DIR}.new", REPO_DIR] in _remote_calls(sync[-1][len("--command="):])

  # 2. setup: install.sh (Java, WordNet, the package), then JAX for TPUs.
  assert setup[:-1] == ssh
  installs = _remote_calls(setup[-1][len("--command="):])
  assert installs[0] == ["cd", REPO_DIR]
  assert ["bash", "launch/install.sh"] in installs
  assert installs[-1][:4] == ["python3", "-m", "pip", "install"]
  assert installs[-1][-1] == "jax[tpu]>=0.6,<0.11"

  # 3. run: cc12m_jax.main on every worker, config, workdir and overrides intact.
  assert train[:-1] == ssh
  calls_made = _remote_calls(train[-1][len("--command="):])
  assert calls_made[0] == ["cd", REPO_DIR]
  assert calls_made[1] == ["python3", "-m", "cc12m_jax.main", f"--config={CONFIG}",
                           f"--workdir={WORKDIR}", "--config.train.distributed=True", *EXTRA]


def test_a_real_run_runs_what_the_dry_run_printed(fake_gcloud, tmp_path):
  env, calls = fake_gcloud
  dry = _launch(env, "--dry_run")
  printed = [_words(line[2:]) for line in dry.stdout.splitlines() if line.startswith("+ gcloud")]
  result = _launch(env)
  assert result.returncode == 0, result.stderr
  made = [call.split("\0") for call in calls.read_text().split("\0\n") if call]
  assert made == printed
  assert not (tmp_path / "src.tgz").exists()  # the tarball is removed once copied


def test_skip_flags_leave_out_sync_and_setup(fake_gcloud):
  env, _ = fake_gcloud
  result = _launch(env, "--dry_run", "--skip_sync", "--skip_setup")
  lines = [line for line in result.stdout.splitlines() if line.startswith("+ ")]
  assert len(lines) == 1 and "cc12m_jax.main" in lines[0]


def test_usage_errors():
  result = subprocess.run(["bash", LAUNCHER, "--dry_run", "my-tpu"], capture_output=True,
                          text=True, timeout=60)
  assert result.returncode == 2 and "usage:" in result.stderr
  result = subprocess.run(["bash", LAUNCHER, "--bogus", "a", "b", "c", "d"], capture_output=True,
                          text=True, timeout=60)
  assert result.returncode == 2 and "unknown option --bogus" in result.stderr
