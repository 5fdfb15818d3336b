"""What a run is made of, below both training and evaluation.

  run_setup.py     model, mesh, shardings, parameter restore (RunSetup)
  checkpointing.py orbax checkpoints of a train state and the input position
  evaluator.py     the evaluator interface (run(params) -> EvalResult) and reporting
  selection.py     best-checkpoint selection by one evaluation metric

cc12m_jax.train and cc12m_jax.evaluation import this package; it imports
neither of them.
"""
