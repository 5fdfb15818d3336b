"""Reconciliation of the curation counts and their table."""
import json
import os
from typing import Mapping

from cc12m_jax.curation import shards


class ReconciliationError(RuntimeError):
  pass


def read_counts(output_dir: str) -> dict[str, int]:
  path = os.path.join(output_dir, shards.COUNTS_FILE)
  with open(path, encoding="utf-8") as f:
    return json.load(f)


def check(counts: Mapping[str, int]) -> None:
  """input == kept + sum of rejections, else ReconciliationError naming the gap."""
  rejected = sum(v for k, v in counts.items() if k.startswith("rejected/"))
  total_in, kept = counts.get("input", 0), counts.get("kept", 0)
  if total_in != kept + rejected:
    raise ReconciliationError(
        f"curation counts do not reconcile: input {total_in} != kept {kept} + rejected "
        f"{rejected} (gap {total_in - kept - rejected})")


def table(counts: Mapping[str, int]) -> str:
  """Markdown table: outcome, count, share of input; kept first, then reasons by size."""
  total = max(counts.get("input", 0), 1)
  rows = [("kept", counts.get("kept", 0))]
  rows += sorted(((k, v) for k, v in counts.items() if k.startswith("rejected/")),
                 key=lambda kv: (-kv[1], kv[0]))
  rejected = sum(v for k, v in rows[1:])
  lines = ["| outcome | count | share |", "|---|---:|---:|"]
  lines += [f"| {name} | {n} | {100 * n / total:.2f}% |" for name, n in rows]
  lines.append(f"| **rejected (sum)** | {rejected} | {100 * rejected / total:.2f}% |")
  lines.append(f"| **input** | {counts.get('input', 0)} | 100.00% |")
  return "\n".join(lines)
