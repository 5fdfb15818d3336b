"""Caption evaluation (docs/evaluation.md) and retrieval evaluation.

Submodules are imported where used: caption scoring needs pycocoevalcap and
Java, retrieval does not.
"""
