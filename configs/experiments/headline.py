"""The paper's headline comparison, the README's main job: CC3M-style against
CC12M-style pre-training (and no pre-training), each fine-tuned on COCO-style
data, on nocaps by domain; Table 3 without its CC3M+CC12M row.

  python -m cc12m_jax.experiments --suite=configs/experiments/headline.py --workdir=W

Its stages are Table 3's (configs/experiments/table3.py), built by the same
functions: on one workdir, running table3 afterwards reuses all of them and
adds the CC3M+CC12M condition. Steps are selected on coco_val; nocaps_val is
reported.
"""
from configs.experiments import common
from configs.experiments import table3


def get_config(size: str = "synthetic"):
  size = common.check_size(size)
  c = table3.get_config(size)
  c.name = "headline"
  c.title = c.title.replace("Table 3:", "Headline (Table 3, CC3M against CC12M):")
  c.paper_table = "table3"  # the same rows, so the paper's figures sit beside them
  kept = ("scratch", "cc3m", "cc12m")
  for condition in list(c.conditions.keys()):
    if condition not in kept:
      del c.conditions[condition]
    elif "ic_probe" in c.conditions[condition]:
      # The naming probes (minutes each) are Table 3's diagnosis, not the headline.
      del c.conditions[condition]["ic_probe"]
  c.rows = [r for r in c.rows if r.condition in kept]
  c.long_tail = {"rows": ["scratch", "cc3m_ft", "cc12m_ft"], "compare": ["cc3m_ft,cc12m_ft"],
                 "bucket_source": "cc12m", "bucket_edges": table3.LONG_TAIL_EDGES[size]}
  c.claims = [
      common.chain("Fine-tuned, out-of-domain CIDEr: scratch < CC3M < CC12M", "out",
                   "scratch < cc3m_ft < cc12m_ft"),
      common.chain("Fine-tuned, overall CIDEr: scratch < CC3M < CC12M (54.7 < 73.2 < 87.4)",
                   "overall", "scratch < cc3m_ft < cc12m_ft"),
      common.gain("CC12M's gain over CC3M (fine-tuned) is larger out-of-domain than in-domain "
                  "(+26.0 against +6.5)", "cc3m_ft", "cc12m_ft", "out", "in"),
      common.chain("Zero-shot, overall CIDEr: CC3M >= CC12M (29.7 against 27.1)", "overall",
                   "cc3m_zs >= cc12m_zs"),
  ]
  return c
