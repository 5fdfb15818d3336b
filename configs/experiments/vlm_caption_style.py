"""Table 8's CC3M and CC12M conditions, for the caption-style ablation.

On the default world, fine-tuned on Flickr-style data, CC12M-style
pre-training retrieves worse than CC3M-style (docs/results.md, *Table 8*).
The leading reading is the caption: CC3M-style captions are clean sentences,
close to Flickr's, alt-texts are not, and a quarter of them (against a tenth)
fit their image poorly. This suite runs the two conditions, with Table 8's
very stages, on four worlds that differ only in the cc12m source's captions,
each in its own workdir (`launch/reproduce.sh vlm_caption_style` makes them):
`--config.synthetic.cc12m_caption_style` alt_text (the default) or cc3m (the
same scenes written as CC3M's transformations write them), crossed with
`--config.synthetic.cc12m_misaligned_fraction` 0.25 (the default, CC12M's
poor-fit share) or 0.1 (CC3M's); and on a fifth, the default's captions and
shares with `--config.synthetic.web_image_text_filter=True` (every web pair
passes the image-text filter both pipelines keep, as real kept pairs do).
Where CC12M's deficit after fine-tuning closes says what costs it.

  python -m cc12m_jax.experiments --suite=configs/experiments/vlm_caption_style.py --workdir=W
"""
from configs.experiments import common, table3, table8

CONDITIONS = ("cc3m", "cc12m")


def get_config(size: str = "synthetic"):
  size = common.check_size(size)
  table = table8.get_config(size)
  c = common.suite("vlm_caption_style", "Table 8's CC3M and CC12M rows (caption-style ablation)",
                   size, report_source="flickr_test", selection_source="flickr_val",
                   selection_metric="image_retrieval/R@1", paper_table="table8")
  for name in CONDITIONS:
    c.conditions[name] = table.conditions[name]
  c.rows = [row for row in table.rows if row.condition in CONDITIONS]
  c.columns = table.columns
  c.long_tail = {"rows": ["cc3m_zs", "cc12m_zs", "cc3m_ft", "cc12m_ft"],
                 "compare": ["cc3m_zs,cc12m_zs", "cc3m_ft,cc12m_ft"], "bucket_source": "cc3m",
                 "bucket_edges": table3.LONG_TAIL_EDGES[size]}
  c.claims = [
      common.chain("Zero-shot R@1: CC3M < CC12M (35.4 < 42.5)", "R@1", "cc3m_zs < cc12m_zs"),
      common.chain("Fine-tuned R@1: CC3M < CC12M (52.3 < 58.5)", "R@1", "cc3m_ft < cc12m_ft"),
  ]
  return c
