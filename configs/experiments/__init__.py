"""Experiment suites (python -m cc12m_jax.experiments --suite=configs/experiments/<table>.py)."""
