"""CC3M curation preset (Sharma et al., 2018, as summarised in paper Section 2.2).

python -m cc12m_jax.curation.run --config=configs/curation_cc3m.py \
    --config.input='raw/*.parquet' --config.output_dir=out/cc3m
"""
from cc12m_jax.curation import config as curation_config


def get_config():
  return curation_config.preset_config("cc3m")
