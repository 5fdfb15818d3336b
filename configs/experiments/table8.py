"""Table 8: Flickr30K image retrieval R@1/5/10 (test), zero-shot and after
fine-tuning on Flickr train, for no pre-training, CC3M, CC12M and CC3M+CC12M
vlm pre-training.

  python -m cc12m_jax.experiments --suite=configs/experiments/table8.py[:paper] --workdir=W

Fine-tuning steps are selected on flickr_val R@1; flickr_test is reported.
"""
from configs.experiments import common, table3

PRETRAINING = {"cc3m": "cc3m", "cc12m": "cc12m", "cc3m_cc12m": "cc3m,cc12m"}
LABELS = {"cc3m": "CC3M", "cc12m": "CC12M", "cc3m_cc12m": "CC3M+CC12M"}


def get_config(size: str = "synthetic"):
  size = common.check_size(size)
  c = common.suite("table8", "Table 8: Flickr30K image retrieval", size,
                   report_source="flickr_test", selection_source="flickr_val",
                   selection_metric="image_retrieval/R@1")
  c.conditions.scratch = {"vlm_train": common.vlm_train(size),
                          "vlm_evaluate": common.vlm_evaluate(size, of="vlm_train")}
  for name, sources in PRETRAINING.items():
    c.conditions[name] = {"vlm_pretrain": common.vlm_pretrain(size, sources),
                          "vlm_zero_shot": common.vlm_as_is(size, sources="{report_source}"),
                          "vlm_finetune": common.vlm_finetune(size),
                          "vlm_evaluate": common.vlm_evaluate(size)}
  c.rows = [common.row(f"{n}_zs", f"{LABELS[n]} zero-shot", n, "vlm_zero_shot")
            for n in PRETRAINING]
  c.rows += [common.row("scratch_ft", "From scratch (Flickr only)", "scratch", "vlm_evaluate")]
  c.rows += [common.row(f"{n}_ft", f"{LABELS[n]} fine-tuned", n, "vlm_evaluate")
             for n in PRETRAINING]
  c.columns = [common.column(f"R@{k}", f"R@{k}", "{report_source}", f"image_retrieval/R@{k}", 1.0)
               for k in (1, 5, 10)]
  # R@1 per concept, by the concept's count in CC3M: does CC12M pre-training
  # retrieve what CC3M never (or rarely) names, and what does it cost elsewhere?
  c.long_tail = {"rows": ["cc3m_zs", "cc12m_zs", "scratch_ft", "cc3m_ft", "cc12m_ft",
                          "cc3m_cc12m_ft"],
                 "compare": ["cc3m_zs,cc12m_zs", "cc3m_ft,cc12m_ft"], "bucket_source": "cc3m",
                 "bucket_edges": table3.LONG_TAIL_EDGES[size]}
  c.claims = [
      common.chain("Zero-shot R@1: CC3M < CC12M < CC3M+CC12M (35.4 < 42.5 < 47.1)", "R@1",
                   "cc3m_zs < cc12m_zs < cc3m_cc12m_zs"),
      common.chain("Fine-tuned R@1: scratch < CC3M < CC12M < CC3M+CC12M "
                   "(43.7 < 52.3 < 58.5 < 61.5)", "R@1",
                   "scratch_ft < cc3m_ft < cc12m_ft < cc3m_cc12m_ft"),
      common.chain("Zero-shot CC3M+CC12M beats fine-tuned from scratch, R@1 (47.1 > 43.7)",
                   "R@1", "cc3m_cc12m_zs > scratch_ft"),
  ]
  return c
