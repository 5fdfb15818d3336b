"""CC12M curation preset (paper Section 2.2): relaxed filters, <PERSON> only.

python -m cc12m_jax.curation.run --config=configs/curation_cc12m.py \
    --config.input='raw/*.parquet' --config.output_dir=out/cc12m \
    --config.exclude='out/cc3m/kept-*.jsonl'

A CC-style TSV (url<TAB>caption: no tags, no image metadata) or img2dataset
metadata without images needs the missing-data policies said out loud
(docs/curation.md, "Input"):
    --config.input='cc12m.tsv' --config.image_text.missing_tags=skip_filter \
    --config.image.missing_metadata=skip_filter
"""
from cc12m_jax.curation import config as curation_config


def get_config():
  return curation_config.preset_config("cc12m")
