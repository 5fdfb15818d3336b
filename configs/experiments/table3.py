"""Table 3: nocaps val CIDEr by domain, zero-shot and after COCO fine-tuning,
for no pre-training, CC3M, CC12M and CC3M+CC12M pre-training.

  python -m cc12m_jax.experiments --suite=configs/experiments/table3.py[:paper] --workdir=W

Fine-tuning steps are selected on `selection_source` (coco_val, held out
from fine-tuning and from what is reported, and a selection a paper-size run
can make too: nocaps test references are not public) and the table reports
`report_source` (nocaps_val), never the selection split.
"""
from configs.experiments import common

PRETRAINING = {"cc3m": "cc3m", "cc12m": "cc12m", "cc3m_cc12m": "cc3m,cc12m"}
LABELS = {"cc3m": "CC3M", "cc12m": "CC12M", "cc3m_cc12m": "CC3M+CC12M"}
# Frequency buckets of the long-tail report: in the default synthetic world's
# CC12M-style captions a nocaps out-of-domain class has 31 to 122 mentions
# (median 52; docs/synthetic_world.md), in-domain ones thousands, so the
# buckets are finest where the out-of-domain classes sit.
LONG_TAIL_EDGES = {"synthetic": [0, 1, 25, 40, 55, 75, 100, 200, 500, 2000, 10000],
                   "paper": [0, 1, 10, 100, 1000]}


def domain_columns() -> list:
  """nocaps CIDEr by domain and overall, the columns of the paper's Table 3."""
  return [common.column(key, key, "{report_source}", f"{group}/CIDEr", 100.0)
          for key, group in (("in", "in-domain"), ("near", "near-domain"), ("out", "out-domain"),
                             ("overall", "overall"))]


def get_config(size: str = "synthetic"):
  size = common.check_size(size)
  c = common.suite("table3", "Table 3: nocaps val CIDEr", size, report_source="nocaps_val",
                   selection_source="coco_val", selection_metric="overall/CIDEr")
  c.conditions.scratch = {"ic_train": common.ic_train(size),
                          "ic_evaluate": common.ic_evaluate(size, of="ic_train")}
  for name, sources in PRETRAINING.items():
    c.conditions[name] = {"ic_pretrain": common.ic_pretrain(size, sources),
                          "ic_zero_shot": common.ic_as_is(size),
                          "ic_finetune": common.ic_finetune(size),
                          "ic_evaluate": common.ic_evaluate(size)}
    if size == "synthetic":
      c.conditions[name].ic_probe = common.ic_probe()
  c.rows = [common.row("scratch", "From scratch (COCO only)", "scratch", "ic_evaluate")]
  c.rows += [common.row(f"{n}_zs", f"{LABELS[n]} zero-shot", n, "ic_zero_shot")
             for n in PRETRAINING]
  c.rows += [common.row(f"{n}_ft", f"{LABELS[n]} fine-tuned", n, "ic_evaluate")
             for n in PRETRAINING]
  c.columns = domain_columns()
  # Naming recall by concept frequency in CC12M: where the out-of-domain gain
  # (or loss) comes from, concept by concept. The probes say whether
  # pre-training learned a name; the zero-shot rows whether it is decoded; the
  # fine-tuned rows whether fine-tuning kept it.
  c.long_tail = {"rows": ["scratch", "cc3m_zs", "cc12m_zs", "cc3m_cc12m_zs",
                          "cc3m_ft", "cc12m_ft", "cc3m_cc12m_ft"],
                 "compare": ["cc3m_ft,cc12m_ft", "cc12m_ft,cc3m_cc12m_ft"],
                 # Learned in pre-training, whatever is decoded: the naming probe
                 # on each pre-trained model (the world knows what images show).
                 "probes": ([common.row(f"{n}_probe", f"{LABELS[n]} pre-trained, naming probe",
                                        n, "ic_probe") for n in PRETRAINING]
                            if size == "synthetic" else []),
                 "bucket_source": "cc12m",
                 "bucket_edges": LONG_TAIL_EDGES[size]}
  c.claims = [
      common.chain("Fine-tuned, out-of-domain CIDEr: scratch < CC3M < CC12M <= CC3M+CC12M",
                   "out", "scratch < cc3m_ft < cc12m_ft <= cc3m_cc12m_ft"),
      common.chain("Fine-tuned, overall CIDEr: scratch < CC3M < CC12M < CC3M+CC12M "
                   "(54.7 < 73.2 < 87.4 < 90.2)", "overall",
                   "scratch < cc3m_ft < cc12m_ft < cc3m_cc12m_ft"),
      common.gain("CC12M's gain over CC3M (fine-tuned) is larger out-of-domain than in-domain "
                  "(+26.0 against +6.5)", "cc3m_ft", "cc12m_ft", "out", "in"),
      common.chain("Zero-shot, overall CIDEr: CC3M >= CC12M (29.7 against 27.1)", "overall",
                   "cc3m_zs >= cc12m_zs"),
      common.chain("Zero-shot CC3M is below the from-scratch model, overall (29.7 < 54.7)",
                   "overall", "cc3m_zs < scratch"),
      common.chain("Zero-shot CC12M is below the from-scratch model, overall (27.1 < 54.7)",
                   "overall", "cc12m_zs < scratch"),
  ]
  return c
