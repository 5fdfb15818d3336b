"""The package's import graph, built from the source: no cycles, no hidden imports.

docs/architecture.md says data flows one way; these tests keep it true.
Modules are parsed, not imported, so a cycle hidden behind a function-level
import is found as well.
"""
import ast
import pathlib

import pytest

from cc12m_jax.data import batch_spec

ROOT = pathlib.Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "cc12m_jax"
# Imports inside functions are allowed only for these (optional at run time).
OPTIONAL_IMPORTS = frozenset()
# Layers from the bottom up: a module may import its own layer and the ones
# below, never one above (docs/architecture.md draws this).
LAYERS = (
    ("cc12m_jax.config_check",),
    # The synthetic world's concept inventory feeds both its raw web pool
    # (curation) and its feature records (data).
    ("cc12m_jax.data.synthetic.concepts",),
    ("cc12m_jax.curation",),
    ("cc12m_jax.data",),
    ("cc12m_jax.models", "cc12m_jax.sharding"),
    ("cc12m_jax.objectives",),
    ("cc12m_jax.core",),
    ("cc12m_jax.decoding",),
    ("cc12m_jax.evaluation",),
    ("cc12m_jax.train",),
    ("cc12m_jax.config_rules",),
    ("cc12m_jax.main",),
    ("cc12m_jax.experiments",),
)


def module_name(path: pathlib.Path) -> str:
  parts = list(path.relative_to(ROOT).with_suffix("").parts)
  if parts[-1] == "__init__":
    parts = parts[:-1]
  return ".".join(parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _resolve(name: str) -> str | None:
  """The package module that `import name` loads (the longest known prefix)."""
  while name:
    if name in MODULES:
      return name
    name = name.rpartition(".")[0]
  return None


def imports_of(module: str) -> list[tuple[str, int, bool]]:
  """(imported package module, line, inside a function) for every import of `module`."""
  tree = ast.parse(MODULES[module].read_text())
  package = module if MODULES[module].name == "__init__.py" else module.rpartition(".")[0]
  found = []

  def visit(node, in_function):
    for child in ast.iter_child_nodes(node):
      nested = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
      targets = []
      if isinstance(child, ast.Import):
        targets = [a.name for a in child.names]
      elif isinstance(child, ast.ImportFrom):
        base = child.module or ""
        if child.level:
          anchor = package.split(".")[:len(package.split(".")) - child.level + 1]
          base = ".".join(anchor + ([base] if base else []))
        # `from pkg import mod` imports pkg.mod when that is a module.
        targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base
                   for a in child.names]
      for target in targets:
        resolved = _resolve(target)
        if resolved is not None and resolved != module:
          found.append((resolved, child.lineno, in_function))
        elif resolved is None and in_function:
          found.append((target, child.lineno, True))
      visit(child, nested)

  visit(tree, False)
  return found


GRAPH = {m: sorted({t for t, _, _ in imports_of(m) if t in MODULES}) for m in MODULES}


def find_cycle(graph: dict[str, list[str]]) -> list[str] | None:
  """One cycle of `graph` as a path [a, b, ..., a], or None (iterative DFS)."""
  state = {}  # 1 on the stack, 2 done
  for start in graph:
    if state.get(start):
      continue
    stack = [(start, iter(graph[start]))]
    path = [start]
    state[start] = 1
    while stack:
      node, children = stack[-1]
      child = next(children, None)
      if child is None:
        state[node] = 2
        stack.pop()
        path.pop()
      elif state.get(child) == 1:
        return path[path.index(child):] + [child]
      elif not state.get(child):
        state[child] = 1
        stack.append((child, iter(graph[child])))
        path.append(child)
  return None


def test_cycle_finder_finds_a_planted_cycle():
  assert find_cycle({"a": ["b"], "b": ["c"], "c": ["a"], "d": []}) == ["a", "b", "c", "a"]
  assert find_cycle({"a": ["b"], "b": [], "c": ["a", "b"]}) is None


def test_no_import_cycle_in_the_package():
  assert len(GRAPH) > 50  # the whole package was parsed
  cycle = find_cycle(GRAPH)
  assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_no_import_inside_a_function():
  hidden = [f"{m}:{line} imports {target}" for m in MODULES
            for target, line, in_function in imports_of(m)
            if in_function and target.split(".")[0] not in OPTIONAL_IMPORTS]
  assert not hidden, "imports inside functions:\n" + "\n".join(hidden)


def _layer(module: str) -> int:
  for index, prefixes in enumerate(LAYERS):
    if any(module == p or module.startswith(p + ".") for p in prefixes):
      return index
  raise AssertionError(f"{module} is in no layer of LAYERS: add it there and to "
                       "docs/architecture.md")


@pytest.mark.parametrize("module", sorted(m for m in MODULES if m != "cc12m_jax"))
def test_imports_point_down_the_layers(module):
  upward = [t for t in GRAPH[module] if t != "cc12m_jax" and _layer(t) > _layer(module)]
  assert not upward, f"{module} (layer {LAYERS[_layer(module)]}) imports upward: {upward}"


def test_docs_batch_table_is_the_batch_spec():
  docs = (ROOT / "docs" / "architecture.md").read_text()
  assert batch_spec.markdown_table() in docs, (
      "docs/architecture.md's batch table differs from data/batch_spec.py; paste:\n"
      + batch_spec.markdown_table())


# The model, its objectives, the train step and decoding build and run where
# only JAX is installed (an accelerator image, a benchmark host):
# docs/architecture.md. TensorFlow is the input pipeline's and the file
# tools', never theirs.
NEEDS_ONLY_JAX = ("cc12m_jax.core.run_setup", "cc12m_jax.train.state",
                  "cc12m_jax.objectives.registry", "cc12m_jax.decoding.captioner_decode")
TENSORFLOW = ("tensorflow", "tensorflow_text")


def _third_party_imports(module: str) -> set[str]:
  """Top-level names of the non-package modules that `module` imports."""
  names = set()
  for node in ast.walk(ast.parse(MODULES[module].read_text())):
    if isinstance(node, ast.Import):
      names |= {a.name.split(".")[0] for a in node.names}
    elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
      names.add(node.module.split(".")[0])
  return names - {"cc12m_jax"}


def _imported_with(roots: tuple[str, ...]) -> dict[str, str]:
  """Every package module that importing `roots` runs -> the module that imports it
  (parent packages' __init__ included, since Python runs them first)."""
  parent_of, stack = {r: r for r in roots}, list(roots)
  while stack:
    module = stack.pop()
    parts = module.split(".")
    packages = [".".join(parts[:k]) for k in range(1, len(parts))]
    for child in GRAPH[module] + [p for p in packages if p in MODULES]:
      if child not in parent_of:
        parent_of[child] = module
        stack.append(child)
  return parent_of


def test_the_model_step_and_decoding_import_no_tensorflow():
  imported = _imported_with(NEEDS_ONLY_JAX)
  assert "cc12m_jax.models.captioner" in imported and "cc12m_jax.train.step" in imported
  offenders = [f"{m} (imported by {by}) imports "
               f"{sorted(_third_party_imports(m) & set(TENSORFLOW))}"
               for m, by in sorted(imported.items())
               if _third_party_imports(m) & set(TENSORFLOW)]
  assert not offenders, "\n".join(offenders)


def test_the_tensorflow_check_finds_the_input_pipeline():
  imported = _imported_with(("cc12m_jax.data.pipeline",))
  assert "tensorflow" in _third_party_imports("cc12m_jax.data.pipeline")
  assert "cc12m_jax.data.records" in imported
