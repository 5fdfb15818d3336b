"""A suite: conditions made of stages, and the table that reports them.

A suite file (configs/experiments/<table>.py, `get_config(size)`) returns an
ml_collections ConfigDict:

  name, title, size        'table3', a heading, 'synthetic' or 'paper'
  paper_table              key of cc12m_jax.experiments.paper.FIGURES ('' for none)
  data_dir                 given to every stage as config.data.data_dir
  selection_source         eval source that fine-tuning steps are selected on
                           ('' = no selection: the last checkpoint)
  report_source            eval source that the table reports
  selection_metric         metric of the selection source ('overall/CIDEr')
  bootstrap                samples (B), seed, confidence of the paired bootstrap
  conditions.<c>.<stage>   a stage (fields below)
  rows                     [{key, label, condition, stage, paper_row}]: table rows
  columns                  [{key, label, source, metric, scale, stage}]: table
                           columns; `stage` ('' = the row's) lets one row read
                           several stages; `scale` turns the evaluator's unit
                           into the paper's (100 for CIDEr)
  claims                   [{text, column, chain}] or [{text, column, low,
                           high, larger, smaller}] (cc12m_jax/experiments/orderings.py)
  long_tail                the per-concept report (experiments/concept_report.py),
                           or a list of them: rows (row keys), probes ([{key,
                           label, condition, stage}]: naming-probe evaluations,
                           which have no table cell), compare (['before,after']
                           among rows and probes), bucket_source, bucket_edges,
                           column ('' = each row's own stage on the report
                           source; a column key = each row's cell of that
                           column, its stage and its source)

A stage runs `python -m cc12m_jax.main --config=<config> --config.mode=<mode>`
with `overrides` ({section: {key: value}}) and
  init_from         a stage ('<stage>' of the same condition, or
                    '<condition>/<stage>'): its workdir is config.train.init_from
  checkpoint_dir    a stage whose checkpoints an evaluate stage scores
  sources           evaluate: the eval sources it reports
  select            evaluate: choose the checkpoint on the suite's
                    selection source (config.eval.select_checkpoint)
  checkpoint_step   evaluate: a fixed step (-1: latest or selected)

String values may name suite fields as {data_dir}, {selection_source},
{report_source} and {selection_metric}, so that changing one of them is one
line (or one `--suite.<field>=` flag) for every stage.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Mapping

import ml_collections

from cc12m_jax.experiments import paper

TEMPLATE_FIELDS = ("data_dir", "selection_source", "report_source", "selection_metric")
TRAIN_MODES = ("pretrain", "finetune")
MODES = TRAIN_MODES + ("evaluate",)
RELATIONS = ("<", "<=", ">", ">=", "~")


class SuiteError(ValueError):
  """A suite that cannot run as written; the message names the field."""


@dataclasses.dataclass(frozen=True)
class Stage:
  condition: str
  name: str
  config: str
  mode: str
  overrides: tuple[tuple[str, Any], ...]   # ('section.key', value), templates filled
  init_from: str = ""                      # stage key ('<condition>/<stage>') or ''
  checkpoint_dir: str = ""                 # stage key or ''
  sources: tuple[str, ...] = ()            # evaluate: sources reported
  select: bool = False
  checkpoint_step: int = -1

  @property
  def key(self) -> str:
    return f"{self.condition}/{self.name}"

  @property
  def is_training(self) -> bool:
    return self.mode in TRAIN_MODES

  @property
  def dependencies(self) -> tuple[str, ...]:
    return tuple(k for k in (self.init_from, self.checkpoint_dir) if k)


@dataclasses.dataclass(frozen=True)
class Row:
  key: str
  label: str
  condition: str
  stage: str
  paper_row: str


@dataclasses.dataclass(frozen=True)
class Column:
  key: str
  label: str
  source: str
  metric: str     # '<group>/<metric>' as the evaluator names it
  scale: float
  stage: str = ""  # '' = the row's stage


@dataclasses.dataclass(frozen=True)
class Claim:
  """`chain` claims: 'a < b <= c' over row keys, in `column`. Gain claims:
  the gain of row `high` over row `low` is larger in column `larger` than in
  column `smaller`."""
  text: str
  column: str = ""
  chain: str = ""
  low: str = ""
  high: str = ""
  larger: str = ""
  smaller: str = ""

  @property
  def is_gain(self) -> bool:
    return bool(self.low)


@dataclasses.dataclass(frozen=True)
class LongTail:
  """One per-concept long-tail report (experiments/concept_report.py): the rows
  it covers, (before, after) row pairs whose most gained and lost concepts it
  lists, and the pre-training source whose concept counts make its buckets."""
  rows: tuple[str, ...] = ()
  # Naming-probe evaluations in the report beside the rows (no table cells):
  # whether pre-training learned a name, whatever the rows decode.
  probes: tuple[Row, ...] = ()
  compare: tuple[tuple[str, str], ...] = ()
  bucket_source: str = "cc12m"
  bucket_edges: tuple[int, ...] = ()  # () = evaluation/long_tail.BUCKET_EDGES
  # '' = each row's own stage, on the suite's report source. A column key =
  # each row's cell of that column: a suite whose rows caption and whose
  # retrieval column reads another stage (Figure 6) reports both halves.
  column: str = ""

  @property
  def name(self) -> str:
    """Its directory under the suite's results directory."""
    return f"long_tail_{self.column}" if self.column else "long_tail"


@dataclasses.dataclass(frozen=True)
class Suite:
  name: str
  title: str
  size: str
  paper_table: str
  data_dir: str
  selection_source: str
  report_source: str
  selection_metric: str
  stages: tuple[Stage, ...]    # in an order that runs every dependency first
  rows: tuple[Row, ...]
  columns: tuple[Column, ...]
  claims: tuple[Claim, ...]
  bootstrap_samples: int = 1000
  bootstrap_seed: int = 0
  confidence: float = 0.95
  long_tails: tuple[LongTail, ...] = ()

  def stage(self, key: str) -> Stage:
    for s in self.stages:
      if s.key == key:
        return s
    raise KeyError(key)

  def cell_stage(self, row: Row, column: Column) -> Stage:
    """The stage whose evaluation fills (row, column)."""
    return self.stage(f"{row.condition}/{column.stage or row.stage}")

  def row(self, key: str) -> Row:
    for r in self.rows:
      if r.key == key:
        return r
    raise KeyError(key)

  def long_tail_source(self, report: LongTail) -> str:
    """The eval source whose images a long-tail report's entries score."""
    return self.column(report.column).source if report.column else self.report_source

  def long_tail_stage(self, report: LongTail, key: str) -> Stage:
    """The evaluate stage behind a row or probe of a long-tail report."""
    for p in report.probes:
      if p.key == key:
        return self.stage(f"{p.condition}/{p.stage}")
    row = self.row(key)
    if report.column:
      return self.cell_stage(row, self.column(report.column))
    return self.stage(f"{row.condition}/{row.stage}")

  def column(self, key: str) -> Column:
    for c in self.columns:
      if c.key == key:
        return c
    raise KeyError(key)


def _fill(value: Any, fields: Mapping[str, str], where: str) -> Any:
  """`value` with {field} templates filled from the suite's fields."""
  if not isinstance(value, str) or "{" not in value:
    return value
  try:
    return value.format_map(fields)
  except (KeyError, ValueError, IndexError) as e:
    raise SuiteError(f"{where}: {value!r} names an unknown field {e} (templates may name "
                     f"{', '.join('{' + f + '}' for f in TEMPLATE_FIELDS)})") from e


def _flatten(node: Any, prefix: str = "") -> list[tuple[str, Any]]:
  if isinstance(node, (ml_collections.ConfigDict, dict)):
    out = []
    for key in sorted(node.keys()):
      out.extend(_flatten(node[key], f"{prefix}{key}."))
    return out
  return [(prefix[:-1], node)]


def chain_of(text: str) -> tuple[list[str], list[str]]:
  """'a < b <= c' -> (['a', 'b', 'c'], ['<', '<=']); SuiteError when malformed."""
  tokens = text.split()
  rows, relations = tokens[0::2], tokens[1::2]
  if len(tokens) < 3 or len(tokens) % 2 == 0 or any(r not in RELATIONS for r in relations):
    raise SuiteError(f"claim chain {text!r}: write row keys separated by one of {RELATIONS} "
                     "with spaces around each, e.g. 'scratch < cc3m_ft <= cc12m_ft'")
  return rows, relations


def _resolve_ref(ref: str, condition: str, where: str, known: set[str]) -> str:
  if not ref:
    return ""
  key = ref if "/" in ref else f"{condition}/{ref}"
  if key not in known:
    raise SuiteError(f"{where}: no stage {key!r} in the suite (stages: {sorted(known)})")
  return key


def _order(stages: dict[str, Stage]) -> list[Stage]:
  """Depth-first: each stage after its dependencies, otherwise by (condition, name)."""
  done: list[Stage] = []
  state: dict[str, int] = {}

  def visit(key: str, path: list[str]) -> None:
    if state.get(key) == 2:
      return
    if state.get(key) == 1:
      raise SuiteError("stages depend on each other in a cycle: " + " -> ".join(path + [key]))
    state[key] = 1
    for dep in stages[key].dependencies:
      visit(dep, path + [key])
    state[key] = 2
    done.append(stages[key])

  for key in sorted(stages):
    visit(key, [])
  return done


def _stage(cfg: ml_collections.ConfigDict, condition: str, name: str,
           fields: Mapping[str, str], known: set[str]) -> Stage:
  where = f"conditions.{condition}.{name}"
  mode = cfg.get("mode", "")
  if mode not in MODES:
    raise SuiteError(f"{where}.mode: {mode!r} is not one of {MODES}")
  if not cfg.get("config"):
    raise SuiteError(f"{where}.config: name the stage's config file (configs/....py)")
  overrides = tuple((path, _fill(v, fields, f"{where}.overrides.{path}"))
                    for path, v in _flatten(cfg.get("overrides", {})))
  sources = tuple(s.strip() for s in _fill(cfg.get("sources", ""), fields, f"{where}.sources")
                  .split(",") if s.strip())
  stage = Stage(
      condition=condition, name=name, config=_fill(cfg.config, fields, f"{where}.config"),
      mode=mode, overrides=overrides,
      init_from=_resolve_ref(cfg.get("init_from", ""), condition, f"{where}.init_from", known),
      checkpoint_dir=_resolve_ref(cfg.get("checkpoint_dir", ""), condition,
                                  f"{where}.checkpoint_dir", known),
      sources=sources, select=bool(cfg.get("select", False)),
      checkpoint_step=int(cfg.get("checkpoint_step", -1)))
  if stage.mode == "evaluate":
    if not stage.checkpoint_dir:
      raise SuiteError(f"{where}.checkpoint_dir: an evaluate stage names the stage it scores")
    if not stage.sources:
      raise SuiteError(f"{where}.sources: an evaluate stage names the sources it reports")
    if stage.select and stage.checkpoint_step >= 0:
      raise SuiteError(f"{where}: select and checkpoint_step={stage.checkpoint_step} both "
                       "choose the checkpoint; keep one")
  elif stage.checkpoint_dir or stage.sources or stage.select:
    raise SuiteError(f"{where}: checkpoint_dir, sources and select are for evaluate stages")
  if stage.mode == "finetune" and not stage.init_from:
    raise SuiteError(f"{where}.init_from: a finetune stage names the stage it starts from")
  return stage


def from_config(cfg: ml_collections.ConfigDict) -> Suite:
  """The Suite a suite file describes; SuiteError names the first bad field."""
  fields = {f: str(cfg.get(f, "")) for f in TEMPLATE_FIELDS}
  for f in ("name", "report_source", "data_dir"):
    if not cfg.get(f):
      raise SuiteError(f"suite.{f} is empty")
  if cfg.selection_source and cfg.selection_source == cfg.report_source:
    raise SuiteError(f"suite.selection_source and suite.report_source are both "
                     f"{cfg.report_source!r}: steps must be selected on a held-out split, "
                     "never on the split that is reported")
  known = {f"{c}/{s}" for c in cfg.conditions for s in cfg.conditions[c]}
  stages = {f"{c}/{s}": _stage(cfg.conditions[c][s], c, s, fields, known)
            for c in cfg.conditions for s in cfg.conditions[c]}
  for stage in stages.values():
    for dep, kind in ((stage.init_from, "init_from"), (stage.checkpoint_dir, "checkpoint_dir")):
      if dep and not stages[dep].is_training:
        raise SuiteError(f"conditions.{stage.condition}.{stage.name}.{kind}: {dep!r} is an "
                         "evaluate stage; it has no checkpoints")
  rows = tuple(Row(r.key, r.get("label", r.key), r.condition, r.stage, r.get("paper_row", r.key))
               for r in cfg.rows)
  columns = tuple(Column(c.key, c.get("label", c.key), _fill(c.source, fields, f"column {c.key}"),
                         c.metric, float(c.get("scale", 1.0)), c.get("stage", ""))
                  for c in cfg.columns)
  claims = []
  for i, cl in enumerate(cfg.get("claims", ())):
    try:
      claims.append(Claim(**{k: cl[k] for k in cl.keys()}))
    except TypeError as e:
      raise SuiteError(f"suite.claims[{i}]: {e}") from e
  paper_table = cfg.get("paper_table", cfg.name)
  if paper_table and paper_table not in paper.FIGURES:
    raise SuiteError(f"suite.paper_table: {paper_table!r} is not one of {sorted(paper.FIGURES)} "
                     "('' for none)")
  boot = cfg.get("bootstrap", ml_collections.ConfigDict())
  suite = Suite(
      name=cfg.name, title=cfg.get("title", cfg.name), size=cfg.get("size", ""),
      paper_table=paper_table, data_dir=cfg.data_dir,
      selection_source=cfg.get("selection_source", ""), report_source=cfg.report_source,
      selection_metric=cfg.get("selection_metric", ""), stages=tuple(_order(stages)),
      rows=rows, columns=columns, claims=tuple(claims),
      bootstrap_samples=int(boot.get("samples", 1000)), bootstrap_seed=int(boot.get("seed", 0)),
      confidence=float(boot.get("confidence", 0.95)),
      long_tails=_long_tails(cfg.get("long_tail", ())))
  _check_table(suite)
  return suite


def _long_tails(spec: Any) -> tuple[LongTail, ...]:
  """suite.long_tail: one report (a dict) or a list of them."""
  if not spec:
    return ()
  reports = []
  one = isinstance(spec, (Mapping, ml_collections.ConfigDict))
  for tail in map(ml_collections.ConfigDict, [spec] if one else list(spec)):
    compare = []
    for pair in tail.get("compare", ()):
      before, sep, after = pair.partition(",")
      if not sep:
        raise SuiteError(f"suite.long_tail.compare: {pair!r} is not 'before_row,after_row'")
      compare.append((before.strip(), after.strip()))
    reports.append(LongTail(
        rows=tuple(tail.get("rows", ())),
        probes=tuple(Row(p.key, p.get("label", p.key), p.condition, p.stage, p.key)
                     for p in map(ml_collections.ConfigDict, tail.get("probes", ()))),
        compare=tuple(compare), bucket_source=tail.get("bucket_source", "cc12m"),
        bucket_edges=tuple(int(e) for e in tail.get("bucket_edges", ())),
        column=tail.get("column", "")))
  return tuple(reports)


def _check_table(suite: Suite) -> None:
  """Rows, columns and claims name what exists, and no reported cell comes from
  a stage that selected its checkpoint on that cell's source."""
  if len({r.key for r in suite.rows}) != len(suite.rows):
    raise SuiteError("suite.rows: row keys repeat")
  if len({c.key for c in suite.columns}) != len(suite.columns):
    raise SuiteError("suite.columns: column keys repeat")
  if not 0 < suite.confidence < 1 or suite.bootstrap_samples < 1:
    raise SuiteError("suite.bootstrap: samples >= 1 and 0 < confidence < 1")
  for row in suite.rows:
    for column in suite.columns:
      where = f"row {row.key!r}, column {column.key!r}"
      try:
        stage = suite.cell_stage(row, column)
      except KeyError:
        raise SuiteError(f"{where}: no stage {row.condition}/{column.stage or row.stage}") from None
      if stage.mode != "evaluate":
        raise SuiteError(f"{where}: stage {stage.key} is not an evaluate stage")
      if column.source not in stage.sources:
        raise SuiteError(f"{where}: stage {stage.key} reports {list(stage.sources)}, "
                         f"not {column.source!r}")
      if stage.select and column.source == suite.selection_source:
        raise SuiteError(f"{where}: stage {stage.key} selects its checkpoint on "
                         f"{column.source!r}, so that split cannot be reported")
  rows, columns = {r.key for r in suite.rows}, {c.key for c in suite.columns}
  names = [report.name for report in suite.long_tails]
  if len(set(names)) != len(names):
    raise SuiteError(f"suite.long_tail: two reports on one column ({names}); "
                     "give each its own column")
  for report in suite.long_tails:
    _check_long_tail(suite, report, rows, columns)
  for i, claim in enumerate(suite.claims):
    where = f"suite.claims[{i}] ({claim.text!r})"
    if claim.is_gain:
      named_rows, named_columns = [claim.low, claim.high], [claim.larger, claim.smaller]
    else:
      named_rows, _ = chain_of(claim.chain)
      named_columns = [claim.column]
    for r in named_rows:
      if r not in rows:
        raise SuiteError(f"{where}: no row {r!r} (rows: {sorted(rows)})")
    for c in named_columns:
      if c not in columns:
        raise SuiteError(f"{where}: no column {c!r} (columns: {sorted(columns)})")


def _check_long_tail(suite: Suite, report: LongTail, rows: set[str], columns: set[str]) -> None:
  """A report's entries exist, are evaluate stages and score one source."""
  where_report = f"suite.long_tail ({report.name})"
  if report.column and report.column not in columns:
    raise SuiteError(f"{where_report}: column {report.column!r} is not a column "
                     f"(columns: {sorted(columns)})")
  probes = {p.key for p in report.probes}
  for p in report.probes:
    where = f"suite.long_tail.probes: {p.key!r}"
    if p.key in rows:
      raise SuiteError(f"{where} is also a row key; a probe has its own key")
    try:
      stage = suite.stage(f"{p.condition}/{p.stage}")
    except KeyError:
      raise SuiteError(f"{where}: no stage {p.condition}/{p.stage}") from None
    if stage.mode != "evaluate":
      raise SuiteError(f"{where}: stage {stage.key} is not an evaluate stage")
  if len(probes) != len(report.probes):
    raise SuiteError("suite.long_tail.probes: probe keys repeat")
  for r in report.rows + tuple(r for pair in report.compare for r in pair):
    if r not in rows | probes:
      raise SuiteError(f"suite.long_tail: no row or probe {r!r} (rows: {sorted(rows)}, "
                       f"probes: {sorted(probes)})")
  source = suite.long_tail_source(report)
  for r in report.rows + tuple(sorted(probes)):
    if source not in suite.long_tail_stage(report, r).sources:
      raise SuiteError(f"suite.long_tail: {r!r} does not evaluate {source!r}")
  for pair in report.compare:
    if not set(pair) <= set(report.rows) | probes:
      raise SuiteError(f"suite.long_tail.compare: {pair} must be among long_tail.rows "
                       "and long_tail.probes")
  edges = report.bucket_edges
  if edges and (edges[0] != 0 or any(b <= a for a, b in zip(edges, edges[1:]))):
    raise SuiteError(f"suite.long_tail.bucket_edges: {list(edges)} must be increasing "
                     "integers starting at 0")
