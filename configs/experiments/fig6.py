"""Figure 6: pre-training on nested CC12M fractions (10/25/50/100%) against
CC3M; nocaps val CIDEr after COCO fine-tuning and zero-shot Flickr image
retrieval R@1. The paper's claims: 25% of CC12M ~ CC3M, and both monotone
in the fraction (the notes give no figures; the paper's plot has 25/50/100%).

  python -m cc12m_jax.experiments --suite=configs/experiments/fig6.py[:paper] --workdir=W

Fractions keep an image by a fingerprint of its id, so 10% c 25% c 50%
(cc12m_jax/data/pipeline.keep_fraction). The 100% and CC3M conditions are
those of Tables 3 and 8 (shared when run on one workdir).
"""
from configs.experiments import common, table3

FRACTIONS = {"cc12m_10pct": 0.1, "cc12m_25pct": 0.25, "cc12m_50pct": 0.5, "cc12m": 1.0}


def _condition(size: str, sources: str, fraction: float) -> dict:
  return {"ic_pretrain": common.ic_pretrain(size, sources, fraction),
          "ic_finetune": common.ic_finetune(size),
          "ic_evaluate": common.ic_evaluate(size),
          "vlm_pretrain": common.vlm_pretrain(size, sources, fraction),
          "vlm_zero_shot": common.vlm_as_is(size)}


def get_config(size: str = "synthetic"):
  size = common.check_size(size)
  c = common.suite("fig6", "Figure 6: pre-training on fractions of CC12M", size,
                   report_source="nocaps_val", selection_source="coco_val",
                   selection_metric="overall/CIDEr")
  c.conditions.cc3m = _condition(size, "cc3m", 1.0)
  for name, fraction in FRACTIONS.items():
    c.conditions[name] = _condition(size, "cc12m", fraction)
  c.rows = [common.row("cc3m", "CC3M", "cc3m", "ic_evaluate")]
  c.rows += [common.row(name, f"CC12M {round(100 * f)}%", name, "ic_evaluate")
             for name, f in FRACTIONS.items()]
  c.columns = [
      common.column("nocaps", "nocaps CIDEr (fine-tuned)", "{report_source}", "overall/CIDEr",
                    100.0),
      common.column("ir", "Flickr IR R@1 (zero-shot)", "flickr_test", "image_retrieval/R@1", 1.0,
                    stage_name="vlm_zero_shot")]
  # Naming recall (the rows' captions) and zero-shot R@1 (the ir column's
  # stages) by the concept's count in (all of) CC12M: what each added fraction
  # buys, concept by concept, in each half.
  tail = {"rows": ["cc3m", *FRACTIONS], "compare": ["cc12m_50pct,cc12m", "cc3m,cc12m_25pct"],
          "bucket_source": "cc12m", "bucket_edges": table3.LONG_TAIL_EDGES[size]}
  c.long_tail = [tail, {**tail, "column": "ir"}]
  monotone = "cc12m_10pct < cc12m_25pct < cc12m_50pct < cc12m"
  c.claims = [
      common.chain("nocaps CIDEr rises with the CC12M fraction", "nocaps", monotone),
      common.chain("25% of CC12M ~ CC3M on nocaps CIDEr", "nocaps", "cc3m ~ cc12m_25pct"),
      common.chain("Zero-shot IR R@1 rises with the CC12M fraction", "ir", monotone),
      common.chain("25% of CC12M ~ CC3M on zero-shot IR R@1", "ir", "cc3m ~ cc12m_25pct"),
  ]
  return c
