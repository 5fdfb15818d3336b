"""The runner: finished stages are skipped, a stage killed midway resumes, and
suites are checked before anything runs. Stages are real `python -m
cc12m_jax.main` subprocesses on the tiny world."""
import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from cc12m_jax.experiments import (commands, concept_report, runner, suite as suite_lib,
                                   validation)
from configs.experiments import common
from tests.experiments import tiny_suite
from tests.experiments.conftest import REPO_ROOT

SUITES = ("headline", "finetune_grid", "vlm_finetune_grid", "table3", "table3_rates", "table5",
          "table7", "fig6", "table8", "table11", "table12", "vlm_caption_style",
          "vlm_finetune_budget")


def _load(spec: str, **fields) -> suite_lib.Suite:
  config = commands.load_config_file(spec)
  for key, value in fields.items():
    config[key] = value
  return suite_lib.from_config(config)


def _stage_pids(stage_dir: str) -> list[int]:
  """Child processes of this one that run cc12m_jax.main in `stage_dir`."""
  pids = []
  for name in os.listdir("/proc"):
    if not name.isdigit():
      continue
    try:
      with open(f"/proc/{name}/stat") as f:
        ppid = int(f.read().rsplit(")", 1)[1].split()[1])
      with open(f"/proc/{name}/cmdline", "rb") as f:
        cmdline = f.read()
    except OSError:
      continue
    if ppid == os.getpid() and b"cc12m_jax.main" in cmdline and stage_dir.encode() in cmdline:
      pids.append(int(name))
  return pids


def _kill_after_first_checkpoint(stage_dir: str, killed: list, timeout: float = 900) -> None:
  """SIGKILLs the stage once a step has both its checkpoint and its input position."""
  deadline = time.time() + timeout
  while time.time() < deadline:
    steps = [set(n for n in os.listdir(os.path.join(stage_dir, d)) if n.isdigit())
             if os.path.isdir(os.path.join(stage_dir, d)) else set()
             for d in ("checkpoints", "input_state")]
    if steps[0] & steps[1]:
      for pid in _stage_pids(stage_dir):
        os.kill(pid, signal.SIGKILL)
        killed.append(min(int(s) for s in steps[0] & steps[1]))
      return
    time.sleep(0.02)


def test_finished_stages_are_skipped_and_a_killed_stage_resumes(tiny_world, tmp_path,
                                                                monkeypatch):
  monkeypatch.chdir(REPO_ROOT)
  monkeypatch.setenv("XLA_FLAGS", "--xla_force_host_platform_device_count=1")  # compiles faster
  suite = _load("tests/experiments/tiny_suite.py", data_dir=tiny_world)
  workdir = str(tmp_path / "work")
  runs = runner.plan(suite, workdir, [0], validation.check(suite, workdir))
  pretrain, evaluate = runs
  marker = lambda run: os.path.join(run.directory, runner.MARKER)  # noqa: E731

  # 1. Killed (SIGKILL, like a lost machine) after the first checkpoint.
  killed = []
  watcher = threading.Thread(target=_kill_after_first_checkpoint,
                             args=(pretrain.directory, killed))
  watcher.start()
  with pytest.raises(runner.StageFailed, match=r"a/ic_pretrain \(seed 0\) exited with -9"):
    runner.execute(runs, echo=lambda _: None)
  watcher.join()
  assert killed and not os.path.exists(marker(pretrain))
  assert not os.path.exists(evaluate.directory)

  # 2. The same suite again: the stage resumes from its checkpoint, then the
  # evaluate stage runs.
  lines = []
  runner.execute(runs, echo=lines.append)
  with open(os.path.join(pretrain.directory, runner.LOG)) as f:
    log = f.read()
  resumed = re.search(r"Resuming from \S+/checkpoints at step (\d+)\.", log)
  assert resumed and killed[0] <= int(resumed.group(1)) < tiny_suite.STEPS, log[-3000:]
  assert log.count("=== ") == 2  # one header per attempt
  assert lines[0].startswith("[run]  a/ic_pretrain (seed 0) (resuming)")
  with open(marker(pretrain)) as f:
    finished = json.load(f)
  assert finished["step"] == tiny_suite.STEPS
  # Its time is both attempts': the killed one counts, as it would uninterrupted.
  first, second = finished["attempt_seconds"]
  assert first > 0 and second > 0
  assert finished["seconds"] == pytest.approx(first + second, abs=0.11)
  with open(marker(evaluate)) as f:
    evaluated = json.load(f)
  assert evaluated["inputs"] == {"a/ic_pretrain": json.load(open(marker(pretrain)))["run_id"]}
  # What each stage read, fingerprinted: training sources, the scored split, the vocabulary.
  assert set(evaluated["data"]) == {"cc12m", "nocaps_val", "vocab"}
  assert evaluated["data"]["nocaps_val"] == runner.data_fingerprint(
      os.path.join(tiny_world, "nocaps_val"))
  report_path = evaluated["outputs"]["nocaps_val"]["path"]
  stamps = {p: os.stat(p).st_mtime_ns for p in (marker(pretrain), marker(evaluate))}
  logs = {r.directory: os.path.getsize(os.path.join(r.directory, runner.LOG)) for r in runs}

  # 3. Once more, through the command line: nothing runs, results are written.
  done = subprocess.run(
      [sys.executable, "-m", "cc12m_jax.experiments", "--suite=tests/experiments/tiny_suite.py",
       f"--suite.data_dir={tiny_world}", f"--workdir={workdir}"],
      capture_output=True, text=True, timeout=600, cwd=REPO_ROOT)
  assert done.returncode == 0, done.stderr[-3000:]
  assert "[skip] a/ic_pretrain (seed 0): finished" in done.stdout
  assert "[skip] a/ic_zero_shot (seed 0): finished" in done.stdout
  assert {p: os.stat(p).st_mtime_ns for p in stamps} == stamps
  assert {d: os.path.getsize(os.path.join(d, runner.LOG)) for d in logs} == logs
  with open(os.path.join(workdir, "tiny", "results.json")) as f:
    results = json.load(f)
  with open(report_path) as f:
    report = json.load(f)
  cell = results["rows"][0]["cells"]["overall"]
  assert cell["seeds"]["0"] == pytest.approx(100 * report["scores"]["overall"]["CIDEr"])
  assert "| A zero-shot |" in done.stdout


def _started_at(run: runner.StageRun) -> list[str]:
  """The start time of each attempt of the stage, from its log's headers."""
  with open(os.path.join(run.directory, runner.LOG)) as f:
    return re.findall(r"^=== (\S+) ", f.read(), flags=re.M)


def test_parallel_runs_independent_chains_side_by_side_and_stops_cleanly_on_a_failure(
    tiny_world, tmp_path, monkeypatch):
  monkeypatch.chdir(REPO_ROOT)
  monkeypatch.setenv("XLA_FLAGS", "--xla_force_host_platform_device_count=1")
  suite = _load("tests/experiments/tiny_suite.py:a,b", data_dir=tiny_world)
  workdir = str(tmp_path / "work")
  runs = runner.plan(suite, workdir, [0], validation.check(suite, workdir))
  by_name = {run.name: run for run in runs}
  a_pretrain, b_pretrain = by_name["a/ic_pretrain (seed 0)"], by_name["b/ic_pretrain (seed 0)"]
  done = lambda run: os.path.exists(os.path.join(run.directory, runner.MARKER))  # noqa: E731

  # 1. Both pre-trainings start at once; a's is killed after its first
  # checkpoint. b's, already running, finishes and is kept; nothing new starts.
  killed = []
  watcher = threading.Thread(target=_kill_after_first_checkpoint,
                             args=(a_pretrain.directory, killed))
  watcher.start()
  lines = []
  with pytest.raises(runner.StageFailed, match=r"a/ic_pretrain \(seed 0\) exited with -9"):
    runner.execute(runs, parallel=2, echo=lines.append)
  watcher.join()
  assert killed
  assert [l.split(":")[0] for l in lines[:2]] == ["[run]  a/ic_pretrain (seed 0)",
                                                  "[run]  b/ic_pretrain (seed 0)"]
  assert done(b_pretrain) and not done(a_pretrain)
  assert not any(os.path.exists(r.directory) for r in runs if r.stage.key.endswith("zero_shot"))

  # 2. Again: a's pre-training resumes beside b's zero-shot scoring; each
  # zero-shot stage starts only after its own pre-training has finished.
  lines = []
  runner.execute(runs, parallel=2, echo=lines.append)
  assert lines[0].startswith("[skip] b/ic_pretrain (seed 0)")
  assert lines[1].startswith("[run]  a/ic_pretrain (seed 0) (resuming)")
  assert lines[2].startswith("[run]  b/ic_zero_shot (seed 0)")  # while a's pre-trains
  assert all(done(run) for run in runs)
  for name in "ab":
    pretrain, zero_shot = by_name[f"{name}/ic_pretrain (seed 0)"], by_name[f"{name}/ic_zero_shot (seed 0)"]
    with open(os.path.join(pretrain.directory, runner.MARKER)) as f:
      finished = json.load(f)["finished"]
    assert _started_at(zero_shot)[-1] >= finished


def test_a_finished_stage_whose_command_changed_is_refused(tmp_path):
  suite = _load("tests/experiments/tiny_suite.py", data_dir=str(tmp_path))
  runs = runner.plan(suite, str(tmp_path), [0], validation.check(suite, str(tmp_path),
                                                                 check_data=False))
  os.makedirs(runs[0].directory)
  args = [a.replace("num_train_steps=20", "num_train_steps=30") for a in runs[0].args]
  with open(os.path.join(runs[0].directory, runner.MARKER), "w") as f:
    json.dump({"args": args, "run_id": "x", "inputs": {}}, f)
  with pytest.raises(suite_lib.SuiteError) as e:
    runner.execute(runs)
  assert "- --config.train.num_train_steps=30\n+ --config.train.num_train_steps=20" in str(e.value)


def test_a_stage_made_from_an_earlier_run_of_its_input_is_refused(tmp_path):
  suite = _load("tests/experiments/tiny_suite.py", data_dir=str(tmp_path))
  pretrain, evaluate = runner.plan(suite, str(tmp_path), [0],
                                   validation.check(suite, str(tmp_path), check_data=False))
  for run, run_id, inputs in ((pretrain, "new", {}), (evaluate, "e", {"a/ic_pretrain": "old"})):
    os.makedirs(run.directory)
    with open(os.path.join(run.directory, runner.MARKER), "w") as f:
      json.dump({"args": list(run.args), "run_id": run_id, "inputs": inputs}, f)
  with pytest.raises(suite_lib.SuiteError, match="made from an earlier run of a/ic_pretrain"):
    runner.execute([pretrain, evaluate], echo=lambda _: None)


def test_a_finished_stage_whose_data_changed_is_refused(tiny_world, tmp_path):
  data_dir = str(tmp_path / "data")
  shutil.copytree(tiny_world, data_dir)
  suite = _load("tests/experiments/tiny_suite.py", data_dir=data_dir)
  runs = runner.plan(suite, str(tmp_path), [0], validation.check(suite, str(tmp_path)))
  evaluate = runs[1]
  assert dict(evaluate.data) == {"cc12m": f"{data_dir}/cc12m",
                                 "nocaps_val": f"{data_dir}/nocaps_val",
                                 "vocab": f"{data_dir}/vocab.txt"}
  for run in runs:  # finished on the data as it is
    os.makedirs(run.directory)
    fingerprints = {name: runner.data_fingerprint(path) for name, path in run.data}
    with open(os.path.join(run.directory, runner.MARKER), "w") as f:
      json.dump({"args": list(run.args), "run_id": run.stage.key, "data": fingerprints,
                 "inputs": {"a/ic_pretrain": "a/ic_pretrain"}}, f)
  # Files beside the records (the moc centroids) and the same bytes written
  # again are not a change.
  np.save(os.path.join(data_dir, "cc12m", "centroids.npy"), np.zeros((2, 3), np.float32))
  meta = os.path.join(data_dir, "nocaps_val", "metadata.json")
  with open(meta) as f:
    text = f.read()
  with open(meta, "w") as f:
    f.write(text)
  lines = []
  runner.execute(runs, echo=lines.append)
  assert [line.split(":")[0] for line in lines] == ["[skip] a/ic_pretrain (seed 0)",
                                                    "[skip] a/ic_zero_shot (seed 0)"]
  # Another split under the same name: the evaluation is refused, naming it.
  with open(meta, "w") as f:
    f.write(re.sub(r'"num_records": (\d+)', lambda m: f'"num_records": {int(m[1]) + 1}', text))
  with pytest.raises(suite_lib.SuiteError) as e:
    runner.execute(runs, echo=lambda _: None)
  assert (f"stage a/ic_zero_shot (seed 0) finished on other data than is there now: "
          f"nocaps_val ({data_dir}/nocaps_val) changed since; delete {evaluate.directory}"
          in str(e.value))
  # A shard rewritten with other content has another size.
  with open(meta, "w") as f:
    f.write(text)
  shard = sorted(glob.glob(os.path.join(data_dir, "cc12m", "records.tfrecord-*")))[0]
  with open(shard, "ab") as f:
    f.write(b"\0")
  with pytest.raises(suite_lib.SuiteError, match=r"a/ic_pretrain \(seed 0\) finished on other "
                     r"data than is there now: cc12m "):
    runner.execute(runs, echo=lambda _: None)
  # The same words in another order: every record the same, every id another.
  with open(shard, "rb+") as f:
    f.truncate(os.path.getsize(shard) - 1)
  vocab = os.path.join(data_dir, "vocab.txt")
  with open(vocab) as f:
    words = f.read().splitlines()
  with open(vocab, "w") as f:
    f.write("\n".join(words[:-2] + words[-1:] + words[-2:-1]) + "\n")
  with pytest.raises(suite_lib.SuiteError, match=r"a/ic_pretrain \(seed 0\) finished on other "
                     r"data than is there now: vocab "):
    runner.execute(runs, echo=lambda _: None)


def test_every_suite_validates_at_both_sizes_and_shared_stages_agree():
  commands_of = {}
  for name in SUITES:
    for size in common.SIZES:
      suite = _load(f"configs/experiments/{name}.py:{size}")
      configs = validation.check(suite, "/tmp/w", check_data=False)
      for run in runner.plan(suite, "/tmp/w", [0, 1], configs):
        commands_of.setdefault((size, run.stage.key, run.seed), set()).add(run.args)
  # A stage two suites share (e.g. cc12m/ic_pretrain) is one command, so it runs once.
  assert all(len(v) == 1 for v in commands_of.values())
  assert ("paper", "cc12m/ic_pretrain", 1) in commands_of


def test_dry_run_prints_stages_after_their_inputs_selecting_on_the_held_out_split(capsys):
  suite = _load("configs/experiments/table3.py:synthetic")
  runs = runner.plan(suite, "/tmp/w", [0, 1], validation.check(suite, "/tmp/w", check_data=False))
  runner.execute(runs, dry_run=True)
  out = capsys.readouterr().out.splitlines()
  headers = [line for line in out if line.startswith("# ") and "(seed" in line]
  assert len(headers) == 34  # 17 stages (3 of them naming probes) x 2 seeds
  seen = []
  for header in headers:
    key, seed = re.match(r"# (\S+) \(seed (\d)\)", header).groups()
    after = header.split("after: ")[1]
    assert after == "nothing" or all((dep, seed) in seen for dep in after.split(", "))
    seen.append((key, seed))
  evaluate = next(line for line in out if "seed_1/ic_evaluate" in line and "runs/cc12m" in line)
  assert "--config.data.eval_sources=coco_val,nocaps_val" in evaluate
  assert "--config.eval.selection_metric=coco_val/overall/CIDEr" in evaluate
  assert "--config.eval.select_checkpoint=True" in evaluate
  assert "--config.train.seed=1" in evaluate and "--config.data.seed=1" in evaluate


def test_stages_selects_by_pattern_with_what_the_selection_depends_on(tmp_path):
  suite = _load("configs/experiments/fig6.py:synthetic")
  runs = runner.plan(suite, "/tmp/w", [0, 1], validation.check(suite, "/tmp/w", check_data=False))
  assert len(runs) == 50  # 5 conditions x 5 stages x 2 seeds
  captioning = runner.select(runs, ["*/ic_*"])
  assert len(captioning) == 30
  assert {r.stage.name for r in captioning} == {"ic_pretrain", "ic_finetune", "ic_evaluate"}
  assert [r for r in runs if r in captioning] == captioning  # plan order kept
  # One evaluation pulls in the fine-tuning it scores and the pre-training under that.
  one = runner.select(runs, ["cc3m/ic_evaluate"])
  assert [(r.stage.key, r.seed) for r in one] == [
      (k, seed) for seed in (0, 1)
      for k in ("cc3m/ic_pretrain", "cc3m/ic_finetune", "cc3m/ic_evaluate")]
  both = runner.select(runs, ["cc3m/vlm_*", "cc12m_10pct/ic_pretrain"])
  assert sorted({r.stage.key for r in both}) == [
      "cc12m_10pct/ic_pretrain", "cc3m/vlm_pretrain", "cc3m/vlm_zero_shot"]
  assert runner.select(runs, []) == runs
  with pytest.raises(suite_lib.SuiteError, match=r"'\*/ic_pretrian' matches no stage.*"
                     r"cc12m/ic_evaluate"):
    runner.select(runs, ["*/ic_*", "*/ic_pretrian"])
  # The flag: the dry run prints the selected stages only.
  out = subprocess.run(
      [sys.executable, "-m", "cc12m_jax.experiments", "--suite=configs/experiments/fig6.py",
       f"--workdir={tmp_path}", "--stages=*/ic_*", "--dry_run", "--nocheck_data"],
      capture_output=True, text=True, timeout=300, cwd=REPO_ROOT)
  assert out.returncode == 0, out.stderr[-3000:]
  headers = [line for line in out.stdout.splitlines() if line.startswith("# ") and "(seed" in line]
  assert len(headers) == 15 and all("/ic_" in h for h in headers)
  assert "# 15 stages" in out.stdout


def test_first_seed_runs_only_the_seeds_from_it(tmp_path):
  # One seed per machine: --first_seed=1 --seeds=2 plans seeds 1 and 2, never 0.
  out = subprocess.run(
      [sys.executable, "-m", "cc12m_jax.experiments", "--suite=configs/experiments/table3.py",
       f"--workdir={tmp_path}", "--seeds=2", "--first_seed=1", "--dry_run", "--nocheck_data"],
      capture_output=True, text=True, timeout=300, cwd=REPO_ROOT)
  assert out.returncode == 0, out.stderr[-3000:]
  headers = [line for line in out.stdout.splitlines() if line.startswith("# ") and "(seed" in line]
  assert sorted({re.search(r"\(seed (\d+)\)", h).group(1) for h in headers}) == ["1", "2"]
  assert len(headers) == 34  # 17 stages (3 of them naming probes) x 2 seeds
  assert f"{tmp_path}/runs/cc12m/seed_2/ic_pretrain" in out.stdout
  assert "seed_0" not in out.stdout


def test_the_grid_evaluates_one_long_fine_tuning_per_rate_at_every_step_budget():
  suite = _load("configs/experiments/finetune_grid.py:synthetic")
  runs = {run.stage.key: run.args for run in
          runner.plan(suite, "/tmp/w", [0], validation.check(suite, "/tmp/w", check_data=False))}
  finetunings = sorted(key for key in runs if "_finetune" in key)
  assert finetunings == ["cc12m/ic_finetune", "cc12m/ic_finetune_lr1e-03",
                         "cc12m/ic_finetune_lr1e-04"]
  assert all("--config.train.num_train_steps=900" in runs[key] for key in finetunings)
  capped = runs["cc12m/ic_evaluate_lr1e-03_b300"]
  assert "--config.eval.selection_max_step=300" in capped
  assert "--config.eval.checkpoint_dir=/tmp/w/runs/cc12m/seed_0/ic_finetune_lr1e-03" in capped
  # The longest budget is the recipe's own evaluation: no cap, Table 3's command.
  assert not any("selection_max_step" in arg for arg in runs["cc12m/ic_evaluate"])
  assert [row.label for row in suite.rows][:3] == [
      "lr 1e-04, 300 steps", "lr 1e-04, 600 steps", "lr 1e-04, 900 steps"]
  assert len(suite.rows) == 9


def test_only_stages_that_score_read_the_eval_splits_and_references():
  """A pre-training that never evaluates is not re-run (or refused) when the
  held-out splits or their reference file change; its evaluations are."""
  suite = _load("configs/experiments/table8.py:synthetic", data_dir="/d")
  runs = {run.stage.key: dict(run.data) for run in
          runner.plan(suite, "/tmp/w", [0], validation.check(suite, "/tmp/w", check_data=False))}
  assert runs["cc12m/vlm_pretrain"] == {"cc12m": "/d/cc12m", "vocab": "/d/vocab.txt"}
  assert runs["cc12m/vlm_finetune"] == {"flickr_train": "/d/flickr_train",
                                        "vocab": "/d/vocab.txt"}
  assert runs["cc12m/vlm_evaluate"] == {
      "flickr_train": "/d/flickr_train", "flickr_val": "/d/flickr_val",
      "flickr_test": "/d/flickr_test", "references": "/d/flickr/dataset_flickr30k.json",
      "vocab": "/d/vocab.txt"}


def test_a_missing_split_fails_validation_naming_it(tiny_world):
  suite = _load("configs/experiments/table7.py", data_dir=tiny_world)
  validation.check(suite, "/tmp/w")  # the world has cc3m_dev
  suite = _load("configs/experiments/table7.py", data_dir=tiny_world, report_source="cc3m_test")
  with pytest.raises(suite_lib.SuiteError) as e:
    validation.check(suite, "/tmp/w")
  assert "reads source 'cc3m_test', which " + tiny_world in str(e.value)
  assert "stage cc12m/ic_zero_shot_cc3m_dev" in str(e.value)


def test_moc_without_centroids_fails_validation_naming_the_job(tiny_world):
  suite = _load("configs/experiments/table12.py", data_dir=tiny_world)
  with pytest.raises(suite_lib.SuiteError) as e:
    validation.check(suite, "/tmp/w")
  message = str(e.value)
  assert f"centroids {tiny_world}/cc12m/centroids.npy do not exist" in message
  assert f"cc12m_jax.data.clusters --data_dir={tiny_world} --source=cc12m" in message
  assert "ic+0.1*moc" in message and "ic+0.1*vlm" not in message


def test_reporting_the_selection_split_is_refused():
  config = commands.load_config_file("configs/experiments/table3.py")
  config.selection_source = "nocaps_val"
  with pytest.raises(suite_lib.SuiteError, match="held-out split"):
    suite_lib.from_config(config)
  config = commands.load_config_file("configs/experiments/table3.py")
  for condition in ("scratch", "cc3m", "cc12m", "cc3m_cc12m"):
    config.conditions[condition].ic_evaluate.sources = "coco_val,{report_source}"
  config.columns[0].source = "coco_val"
  with pytest.raises(suite_lib.SuiteError, match="selects its checkpoint on 'coco_val'"):
    suite_lib.from_config(config)


def test_launcher_prefixes_the_command_or_takes_it_where_it_says():
  suite = _load("tests/experiments/tiny_suite.py", data_dir="/data")
  run = runner.plan(suite, "/w", [0], validation.check(suite, "/w", check_data=False))[0]
  assert runner.command_line(run, ["nice", "-n", "5"], "python3") == [
      "nice", "-n", "5", "python3", *run.args]
  ssh = runner.command_line(run, ["ssh", "host", "cd /repo && {command}"], "python3")
  assert ssh[:2] == ["ssh", "host"] and len(ssh) == 3
  assert ssh[2].startswith("cd /repo && python3 -m cc12m_jax.main --config=configs/")
  assert "--config.data.data_dir=/data" in ssh[2]


def _probe_suite(data_dir: str, evaluator: str = "naming") -> suite_lib.Suite:
  config = tiny_suite.get_config("a")
  config.data_dir = data_dir
  config.conditions.a.ic_pretrain.overrides.train.num_train_steps = 4
  probe = common.ic_probe()
  probe.overrides.update({k: v for k, v in tiny_suite.TINY.items() if k != "decode"})
  probe.overrides.synthetic = {"num_concepts": 40}  # the tiny world's inventory
  probe.overrides.eval.evaluator = evaluator
  config.conditions.a.ic_probe = probe
  config.long_tail = {"rows": ["a_zs"], "probes": [common.row("a_probe", "A probe", "a",
                                                              "ic_probe")]}
  return suite_lib.from_config(config)


def test_a_probe_stage_runs_the_naming_probe_for_the_long_tail_report(tiny_world, tmp_path,
                                                                       monkeypatch):
  monkeypatch.chdir(REPO_ROOT)
  monkeypatch.setenv("XLA_FLAGS", "--xla_force_host_platform_device_count=1")
  suite = _probe_suite(tiny_world)
  workdir = str(tmp_path / "work")
  configs = validation.check(suite, workdir)
  runner.execute(runner.plan(suite, workdir, [0], configs), echo=lambda _: None)
  probe_dir = commands.stage_dir(workdir, "a/ic_probe", 0)
  with open(os.path.join(probe_dir, runner.MARKER)) as f:
    outputs = json.load(f)["outputs"]["nocaps_val"]
  assert outputs["step"] == 4
  ranks_file = os.path.join(os.path.dirname(outputs["path"]), "ranks.json")
  with open(ranks_file) as f:
    ranks = json.load(f)
  with open(os.path.join(tiny_world, "nocaps_val", "concepts.json")) as f:
    shown = json.load(f)
  pairs = [(i, c) for i, concepts in shown.items() for c in concepts]
  first = sum(ranks[i][c] == 1 for i, c in pairs)
  assert outputs["metrics"]["overall/naming_R@1"] == pytest.approx(first / len(pairs))
  report = concept_report.make(suite, suite.long_tails[0], workdir, [0], tiny_world, configs,
                               str(tmp_path / "lt"))
  probe_rows = report["by_bucket"]["a_probe"]
  assert sum(r["pairs"] for r in probe_rows) == len(pairs)
  assert sum(r["named"] for r in probe_rows) == first


def test_a_probe_must_be_a_naming_evaluation_on_data_that_knows_what_images_show(
    tiny_world, tmp_path):
  with pytest.raises(suite_lib.SuiteError, match="'a_probe' reads stage a/ic_probe, whose "
                     "config.eval.evaluator is 'captioning', not 'naming'"):
    validation.check(_probe_suite(tiny_world, evaluator="captioning"), "/tmp/w")
  data_dir = str(tmp_path / "world")
  shutil.copytree(tiny_world, data_dir)
  os.remove(os.path.join(data_dir, "nocaps_val", "concepts.json"))
  with pytest.raises(suite_lib.SuiteError, match="stage a/ic_probe runs the naming probe on "
                     "'nocaps_val', but .* has no concepts.json"):
    validation.check(_probe_suite(data_dir), "/tmp/w")
