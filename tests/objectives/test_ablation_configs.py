"""The configs of every Table 11 / 12 row, and their suites, at both sizes."""
import itertools

import pytest

from cc12m_jax import config_rules
from cc12m_jax.experiments import commands, paper, runner, suite as suite_lib, validation
from configs import ablation_finetune, ablation_pretrain, synthetic_ablation_pretrain


@pytest.mark.parametrize("row", sorted(set(ablation_pretrain.TABLE11 + ablation_pretrain.TABLE12)))
def test_every_row_is_a_valid_run_at_both_sizes(row):
  for module in (ablation_pretrain, synthetic_ablation_pretrain):
    config = module.get_config(row)
    config_rules.validate(config, num_devices=8)
    assert config.train.objective == row.split(",")[0]
    if "," in row:
      assert config.objectives.text_mask_rate == float(row.split(",")[1])
  finetune = ablation_finetune.get_config()
  finetune.train.init_from = "/pretrained"
  config_rules.validate(finetune, num_devices=8)
  assert finetune.train.init_partial


def test_suites_validate_share_the_ic_row_with_table3_and_carry_the_paper_figures():
  commands_of = {}
  for name, size in itertools.product(("table3", "table11", "table12"), ("synthetic", "paper")):
    suite = suite_lib.from_config(commands.load_config_file(f"configs/experiments/{name}.py:{size}"))
    for run in runner.plan(suite, "/tmp/w", [0], validation.check(suite, "/tmp/w",
                                                                   check_data=False)):
      commands_of.setdefault((size, run.stage.key), set()).add(run.args)
      if run.stage.key.startswith("mlm_") and run.stage.name == "ic_finetune":
        assert "--config.train.init_partial=True" in run.args
  # The ic row is Table 3's CC12M condition: one command, run once per workdir.
  assert all(len(v) == 1 for v in commands_of.values())
  assert ("paper", "cc12m/ic_pretrain") in commands_of
  # Table 3's 17 stages (14 and its 3 naming probes), then 3 new ones per new row: 8
  # in Table 11, 2 in Table 12, whose rows also evaluate their pre-trained captioners
  # zero-shot (1 more each).
  assert len([k for k in commands_of if k[0] == "synthetic"]) == 17 + 8 * 3 + 2 * 4
  assert ("synthetic", "ic_vlm/ic_zero_shot") in commands_of
  assert ("synthetic", "mlm_20/ic_zero_shot") not in commands_of  # mlm has no decoder
  assert paper.figure("table11", "mlm_20", "overall") == 76.8
  assert paper.figure("table12", "ic_moc", "overall") == 89.9
