"""The synthetic long-tail world at its default (small) size.

    python -m cc12m_jax.data.synthetic.generate --config=configs/synthetic_data.py
"""
from configs import base


def get_config():
  return base.get_config()
