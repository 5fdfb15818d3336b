"""The paper's reported figures, by table, row and column, for side-by-side tables.

Every figure comes from the paper notes (shared/seed/000_34ae69fd0f689e34.txt,
the lines named next to each table). A figure the notes do not give is
absent (shown as '—'), never filled in: e.g. Table 3's from-scratch and
zero-shot rows give only the overall CIDEr, Table 8's CC3M+CC12M rows only
R@1, and Figure 6 gives no numbers at all (its claims are qualitative:
25% of CC12M ~ CC3M, monotone in the fraction).

Units are the paper's: CIDEr x 100, Recall@K in percent.
"""
from __future__ import annotations

from typing import Mapping

# table -> row -> column -> figure
FIGURES: Mapping[str, Mapping[str, Mapping[str, float]]] = {
    # nocaps val CIDEr by domain after COCO fine-tuning, and zero-shot (notes
    # lines 335-345: rows 1-6 of Table 3).
    "table3": {
        "scratch": {"overall": 54.7},
        "cc3m_zs": {"overall": 29.7},
        "cc12m_zs": {"overall": 27.1},
        "cc3m_cc12m_zs": {},
        "cc3m_ft": {"in": 81.8, "near": 73.7, "out": 65.3, "overall": 73.2},
        "cc12m_ft": {"in": 88.3, "near": 86.0, "out": 91.3, "overall": 87.4},
        "cc3m_cc12m_ft": {"in": 92.6, "near": 88.3, "out": 94.5, "overall": 90.2},
    },
    # CC12M pre-training, COCO fine-tuning for 5K / 10K steps (notes line 240).
    "table5": {
        "short": {"coco": 108.1, "nocaps": 87.4},
        "long": {"coco": 110.9, "nocaps": 87.1},
    },
    # CC3M dev CIDEr (notes line 244, 361-363).
    "table7": {
        "scratch": {"cider": 100.9},
        "cc12m_ft": {"cider": 105.4},
        "cc12m_zs": {"cider": 39.3},
    },
    # Flickr30K image retrieval (test), zero-shot and fine-tuned (notes
    # lines 367-371).
    "table8": {
        "cc3m_zs": {"R@1": 35.4, "R@5": 65.2, "R@10": 76.2},
        "cc12m_zs": {"R@1": 42.5, "R@5": 73.1, "R@10": 83.4},
        "cc3m_cc12m_zs": {"R@1": 47.1},
        "scratch_ft": {"R@1": 43.7},
        "cc3m_ft": {"R@1": 52.3, "R@5": 81.7, "R@10": 88.4},
        "cc12m_ft": {"R@1": 58.5, "R@5": 86.6, "R@10": 92.1},
        "cc3m_cc12m_ft": {"R@1": 61.5},
    },
    # Figure 6 (notes line 379): a plot; the notes give no figures.
    "fig6": {},
    # nocaps val CIDEr after COCO fine-tuning of CC12M pre-training with
    # masked objectives (notes lines 300, 381); the other rows are only
    # ordered: both improve with the rate, mass beats mlm at low rates.
    "table11": {
        "ic": {"out": 91.3, "overall": 87.4},
        "mlm_20": {"out": 76.2, "overall": 76.8},
        "mlm_80": {"overall": 88.5},
    },
    # The same with auxiliary losses weighted 0.1 (notes line 382).
    "table12": {
        "ic": {"overall": 87.4},
        "ic_vlm": {"overall": 87.1},
        "ic_moc": {"overall": 89.9},
    },
}


def figure(table: str, row: str, column: str) -> float | None:
  """The paper's figure for (table, row, column), or None when it gives none."""
  if table not in FIGURES:
    raise KeyError(f"no paper table {table!r}; known: {sorted(FIGURES)}")
  return FIGURES[table].get(row, {}).get(column)
