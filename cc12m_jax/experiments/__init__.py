"""Experiment suites: the paper's tables reproduced as chains of cc12m_jax.main runs.

  suite.py       a suite file (configs/experiments/*.py) as conditions, stages,
                 rows, columns and claims
  commands.py    a stage as its `python -m cc12m_jax.main` command and config
  validation.py  every stage checked (config rules, data) before any runs
  runner.py      runs stages as subprocesses: markers, skip, resume, dry run
  scores.py      an evaluate stage's metrics and per-image scores
  bootstrap.py   the paired bootstrap over images
  orderings.py   the paper's qualitative claims tested on the results
  paper.py       the paper's reported figures
  results.py     results.json and the Markdown table
  __main__.py    the command line (docs/experiments.md)

This is the top layer: it runs the entry point, and nothing imports it.
"""
