"""The engine's packages import one another in layers, never in a cycle.

The graph is read from the source (``ast``), not from ``sys.modules``: every ``import`` and
``from ... import`` of every module counts, those inside functions and ``TYPE_CHECKING``
blocks included, at the package level (``engine.models.llama`` importing
``engine.core.forward_batch`` is the edge models → core). A top-level module
(``engine/engine.py``, ``engine/launch_server.py``, ``engine/engine_config.py``) is a node of
its own. Imports by string (``importlib.import_module``) are not seen.

The layers, bottom to top; a package imports only packages of layers below its own:

1. ``core`` (``ForwardBatch``, the errors, the process guards), ``engine_config``: no engine
   imports at all, so everything may import them.
2. ``kernels``: Triton and C++ kernels that know tensors only.
3. ``memory``: KV slots, buffers and the radix cache.
4. ``config``: ``ModelConfig`` and the architectures table (``config/architectures.py``,
   which imports nothing), so that config validates a model without importing model code.
5. ``layers``: RMSNorm, rotary, packed linear.
6. ``attention``: the backends, over a ``core.ForwardBatch``; ``gguf``: GGUF files read as a
   ``config.ModelConfig`` and ``layers.BlockTensor`` weights.
7. ``models``: the model classes and their registry.
7b. ``distributed``: tensor parallelism's group, sharded layers and step messages, over ``models``.
8. ``runtime``: the model runners, which own models, pools and attention backends.
9. ``sampling``, ``text`` (stop strings, decoding token ids to text), ``function_call``,
   ``reasoning``: request-level leaves.
10. ``constrained``: structured output, over ``sampling``; ``ipc``: the messages between the
    processes, which carry ``sampling``'s typed ``SamplingParams``.
11. ``scheduler``, ``detokenizer``, ``server``: the packages of the three processes, which
    never import one another (they talk over ``ipc``).
12. ``engine`` (the offline ``Engine``), ``launch_server``: the entry points.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from pathlib import Path

import engine

ENGINE_DIR = Path(engine.__file__).resolve().parent

LAYERS: tuple[frozenset[str], ...] = (
    frozenset({"core", "engine_config"}),
    frozenset({"kernels"}),
    frozenset({"memory"}),
    frozenset({"config"}),
    frozenset({"layers"}),
    frozenset({"attention", "gguf"}),
    frozenset({"models"}),
    frozenset({"distributed"}),
    frozenset({"runtime"}),
    frozenset({"sampling", "text", "function_call", "reasoning"}),
    frozenset({"constrained", "ipc"}),
    frozenset({"scheduler", "detokenizer", "server"}),
    frozenset({"engine", "launch_server"}),
)


def _node(module: str) -> str | None:
    """The package-level node of ``engine.x.y`` (``x``); None outside the engine package."""
    parts = module.split(".")
    if parts[0] != "engine" or len(parts) < 2:
        return None
    return parts[1]


def _imported_modules(path: Path, module: str) -> Iterator[str]:
    """Every module ``path`` imports, anywhere in its body, as absolute dotted names."""
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = module.split(".")[: None if is_package else -1]
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            # NOTE: ``from engine import text`` imports the module engine.text; a name that is
            # no module (``from engine import Foo``) is dropped by ``_is_node``.
            yield base
            yield from (f"{base}.{alias.name}" for alias in node.names)


def import_graph(package_dir: Path = ENGINE_DIR) -> dict[str, set[str]]:
    """Package-level edges of the engine: node → the other nodes its modules import."""
    graph: dict[str, set[str]] = {}
    for path in sorted(package_dir.rglob("*.py")):
        parts = path.relative_to(package_dir.parent).with_suffix("").parts
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        source = _node(module)
        if source is None:
            continue
        targets = graph.setdefault(source, set())
        for imported in _imported_modules(path, module):
            target = _node(imported)
            if target is not None and target != source and _is_node(package_dir, target):
                targets.add(target)
    return graph


def _is_node(package_dir: Path, name: str) -> bool:
    return (package_dir / name).is_dir() or (package_dir / f"{name}.py").is_file()


def find_cycle(graph: Mapping[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` as its nodes in order, the first repeated at the end; or None."""
    done: set[str] = set()
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        if node in path:
            return [*path[path.index(node) :], node]
        if node in done:
            return None
        path.append(node)
        for target in sorted(graph.get(node, ())):
            cycle = visit(target)
            if cycle is not None:
                return cycle
        path.pop()
        done.add(node)
        return None

    for start in sorted(graph):
        cycle = visit(start)
        if cycle is not None:
            return cycle
    return None


def test_find_cycle_names_the_cycle() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None


def test_graph_sees_imports_in_functions_and_type_checking_blocks(tmp_path: Path) -> None:
    package = tmp_path / "engine"
    for name, source in {
        "__init__.py": "",
        "top.py": "from engine import b\n",
        "a/__init__.py": "",
        "a/x.py": "def f() -> None:\n    from engine.b.y import g\n",
        "b/__init__.py": "from . import y\n",
        "b/y.py": (
            "from typing import TYPE_CHECKING\n"
            "if TYPE_CHECKING:\n    import engine.c\n"
            "from ..a import x\n"
        ),
        "c.py": "from engine import Unknown\n",
    }.items():
        (package / name).parent.mkdir(parents=True, exist_ok=True)
        (package / name).write_text(source)
    assert import_graph(package) == {"top": {"b"}, "a": {"b"}, "b": {"a", "c"}, "c": set()}


def test_engine_packages_have_no_import_cycle() -> None:
    cycle = find_cycle(import_graph())
    assert cycle is None, "engine packages import one another in a cycle: " + " → ".join(cycle or [])


def test_engine_packages_import_only_layers_below_their_own() -> None:
    layer_of = {name: index for index, layer in enumerate(LAYERS) for name in layer}
    graph = import_graph()
    unplaced = sorted(set(graph) - set(layer_of))
    assert not unplaced, f"place these engine packages in LAYERS: {', '.join(unplaced)}"
    upward = sorted(
        f"{source} → {target}"
        for source, targets in graph.items()
        for target in targets
        if layer_of[target] >= layer_of[source]
    )
    assert not upward, "imports of a package in the same or a higher layer: " + ", ".join(upward)
