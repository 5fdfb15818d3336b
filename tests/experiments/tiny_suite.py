"""A suite on the tiny test world: each condition pre-trains a tiny captioner,
then scores it zero-shot on nocaps_val (`--suite.data_dir=<tiny world>`).
`tiny_suite.py` has one condition, `a`; `tiny_suite.py:a,b` two independent
ones with the same stages."""
import copy

from configs.experiments import common

TINY = {
    "data": {"global_batch_size": 8, "eval_global_batch_size": 8, "shuffle_buffer": 50,
             "parse_batch_size": 16, "max_caption_length": 12},
    "model": {"emb_dim": 32, "num_heads": 4, "mlp_dim": 64, "num_encoder_layers": 1,
              "num_decoder_layers": 1},
    "decode": {"method": "greedy", "max_decode_len": 12},
}
# Long enough that the test can kill the run between its first checkpoint
# and its last.
STEPS = 20


def get_config(conditions: str = "a"):
  c = common.suite("tiny", "Tiny suite", "synthetic", report_source="nocaps_val",
                   selection_source="coco_val", selection_metric="overall/CIDEr")
  c.paper_table = ""
  chain = {
      "ic_pretrain": common.stage(
          "configs/synthetic_pretrain.py", "pretrain", **TINY,
          train={"num_train_steps": STEPS, "checkpoint_every_steps": 2, "keep_checkpoints": 2,
                 "log_every_steps": 2, "async_checkpointing": False}),
      "ic_zero_shot": common.stage(
          "configs/synthetic_pretrain.py", "evaluate", checkpoint_dir="ic_pretrain",
          sources="{report_source}", **TINY, eval={"metrics": "CIDEr"}),
  }
  for name in conditions.split(","):
    c.conditions[name] = copy.deepcopy(chain)
  c.rows = [common.row(f"{name}_zs", f"{name.upper()} zero-shot", name, "ic_zero_shot")
            for name in conditions.split(",")]
  c.columns = [common.column("overall", "overall", "{report_source}", "overall/CIDEr", 100.0)]
  return c
