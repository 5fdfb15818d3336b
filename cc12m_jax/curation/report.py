"""Reconciliation of the curation counts and their table."""
import json
from typing import Any, Mapping

from apache_beam.io.filesystems import FileSystems

from cc12m_jax.curation import shards


class ReconciliationError(RuntimeError):
  pass


def read_counts(output_dir: str) -> dict[str, int]:
  """counts.json of a finished run (any Beam filesystem: local, gs://, ...)."""
  with FileSystems.open(FileSystems.join(output_dir, shards.COUNTS_FILE)) as f:
    return json.loads(f.read().decode("utf-8"))


def write_text(path: str, text: str) -> None:
  with FileSystems.create(path) as f:
    f.write(text.encode("utf-8"))


def metric_counts(result: Any, namespace: str) -> dict[str, int]:
  """Committed Beam counters of `namespace` ({} where the runner has none)."""
  try:
    query = result.metrics().query()
  except (AttributeError, NotImplementedError):
    return {}
  out: dict[str, int] = {}
  for counter in query.get("counters", []):
    if counter.key.metric.namespace == namespace:
      name = counter.key.metric.name
      out[name] = out.get(name, 0) + int(counter.committed or 0)
  return out


def check_metrics(counts: Mapping[str, int], metrics: Mapping[str, int]) -> None:
  """The DoFns' counters must agree with counts.json on every outcome they count."""
  for name, value in metrics.items():
    if name.startswith("transform/"):
      continue
    if counts.get(name, 0) != value:
      raise ReconciliationError(
          f"Beam counter {name}={value} disagrees with counts.json ({counts.get(name, 0)})")


def check(counts: Mapping[str, int]) -> None:
  """input == kept + sum of rejections, else ReconciliationError naming the gap."""
  rejected = sum(v for k, v in counts.items() if k.startswith("rejected/"))
  total_in, kept = counts.get("input", 0), counts.get("kept", 0)
  if total_in != kept + rejected:
    raise ReconciliationError(
        f"curation counts do not reconcile: input {total_in} != kept {kept} + rejected "
        f"{rejected} (gap {total_in - kept - rejected})")


def table(counts: Mapping[str, int]) -> str:
  """Markdown table: outcome, count, share of input; kept first, then reasons by size.

  Notes (`noted/<policy>`: candidates a missing-data policy let through a
  filter; they are also in kept or a later rejection) follow the input row.
  """
  total = max(counts.get("input", 0), 1)
  rows = [("kept", counts.get("kept", 0))]
  rows += sorted(((k, v) for k, v in counts.items() if k.startswith("rejected/")),
                 key=lambda kv: (-kv[1], kv[0]))
  rejected = sum(v for k, v in rows[1:])
  lines = ["| outcome | count | share |", "|---|---:|---:|"]
  lines += [f"| {name} | {n} | {100 * n / total:.2f}% |" for name, n in rows]
  lines.append(f"| **rejected (sum)** | {rejected} | {100 * rejected / total:.2f}% |")
  lines.append(f"| **input** | {counts.get('input', 0)} | 100.00% |")
  notes = sorted((k, v) for k, v in counts.items() if k.startswith("noted/"))
  lines += [f"| {name} (passed by policy) | {n} | {100 * n / total:.2f}% |"
            for name, n in notes]
  return "\n".join(lines)
