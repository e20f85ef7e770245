"""kgpu's modules import each other without a circle, counting every import (module-level, inside functions,
under TYPE_CHECKING): a circle is a sign two modules are one concept, or one is in the wrong place. The graph is
import-linter's own (grimp), which ``make layers`` checks the layer contracts on."""

from __future__ import annotations

import sys

import grimp


def _circles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Tarjan's strongly connected components with more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.find_modules_directly_imported_by(v)):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10_000))
    try:
        for m in sorted(graph.modules):
            if m not in index:
                visit(m)
    finally:
        sys.setrecursionlimit(limit)
    return out


def test_no_module_imports_itself_through_others() -> None:
    graph = grimp.build_graph("kgpu", include_external_packages=False)
    assert len(graph.modules) > 100  # the whole package was read
    assert _circles(graph) == []


def test_a_circle_is_found() -> None:
    """The check itself: two modules importing each other are reported."""
    graph = grimp.ImportGraph()
    for m in ("a", "a.x", "a.y", "a.z"):
        graph.add_module(m)
    graph.add_import(importer="a.x", imported="a.y")
    graph.add_import(importer="a.y", imported="a.x")
    graph.add_import(importer="a.z", imported="a.x")
    assert _circles(graph) == [["a.x", "a.y"]]
