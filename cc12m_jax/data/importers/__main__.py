"""`python -m cc12m_jax.data.importers <format> ...` (see cli.py)."""
from cc12m_jax.data.importers import cli

if __name__ == "__main__":
  cli.run()
