"""Kubernetes' CEL libraries in DRA selectors (kgpu.sim.scheduler.plugins.cel_library), evaluated through the
interpreter as selectors are: the values and errors cel-go's ext.Strings and Kubernetes' library.Lists,
library.Regex, ext.Sets and ext.Lists give (their Go sources' cases: code-point indices, Go's SplitN and
TrimSpace, "index out of range: N"). The DRA differential checks them against the real allocator."""

from __future__ import annotations

import pytest

from kgpu.model.dra_types import Device
from kgpu.sim.scheduler.plugins.cel import CelRuntimeError, Evaluator, Unsupported

DEVICE = Device("gpu-0", {"gpu.nvidia.com/productName": "NVIDIA A100-SXM4-80GB", "gpu.nvidia.com/type": "gpu",
                          "gpu.nvidia.com/architecture": "Ampere"}, {"gpu.nvidia.com/memory": 80 * 2**30 * 1000})


def run(expression: str) -> bool | CelRuntimeError | Unsupported:
    ev = Evaluator()
    return ev.evaluate(ev.program(expression), "gpu.nvidia.com", DEVICE)


@pytest.mark.parametrize("expression", [
    # NVIDIA's demo: A100s by product name, whatever its case
    "device.attributes['gpu.nvidia.com'].productName.lowerAscii().matches('^nvidia a100.*$')",
    "'ÀbC'.lowerAscii() == 'Àbc' && 'àbc'.upperAscii() == 'àBC'",  # ASCII letters only
    "'héllo'.charAt(1) == 'é' && 'hello'.charAt(5) == ''",  # code points; the length itself gives ''
    "'hello'.indexOf('l') == 2 && 'hello'.indexOf('l', 3) == 3 && 'hello'.indexOf('', 9) == 9",
    "'hello'.indexOf('o', 5) == -1 && 'hello'.indexOf('z') == -1",
    "'hello'.lastIndexOf('l') == 3 && 'hello'.lastIndexOf('l', 2) == 2 && 'hello'.lastIndexOf('') == 5",
    "'hello'.lastIndexOf('lo', 4) == 3 && 'ab'.lastIndexOf('abc') == -1",
    "'a,b,c'.split(',') == ['a', 'b', 'c'] && 'a,b,c'.split(',', 2) == ['a', 'b,c'] && 'a,b'.split(',', 0) == []",
    "'abc'.split('') == ['a', 'b', 'c'] && 'abc'.split('', 2) == ['a', 'bc']",
    "'hello'.substring(1) == 'ello' && 'hello'.substring(1, 3) == 'el' && 'hello'.substring(5) == ''",
    "' \\t hi \\n'.trim() == 'hi'",
    "'aaa'.replace('a', 'b') == 'bbb' && 'aaa'.replace('a', 'b', 2) == 'bba' && 'aaa'.replace('a', 'b', -1) == 'bbb'",
    "['a', 'b'].join() == 'ab' && ['a', 'b'].join('-') == 'a-b'",
    "[1, 2, 2].isSorted() && ![2, 1].isSorted() && [1, 2, 3].sum() == 6 && [3, 1].min() == 1 && [3, 1].max() == 3",
    "[1, 2, 1].indexOf(1) == 0 && [1, 2, 1].lastIndexOf(1) == 2 && [1].indexOf(5) == -1",
    "'A100 80GB'.find('[0-9]+GB') == '80GB' && 'abc'.find('z') == '' && 'a1b2c3'.findAll('[0-9]') == ['1', '2', '3']",
    "'a1b2c3'.findAll('[0-9]', 2) == ['1', '2']",
    "sets.contains([1, 2, 3], [1, 3]) && sets.equivalent([1, 2], [2, 1, 1]) && sets.intersects([1], [3, 1])",
    "!sets.contains([1], [2]) && !sets.intersects([1], [2])",
    "lists.range(3) == [0, 1, 2] && [1, 1, 2].distinct() == [1, 2] && [1, [2, [3]]].flatten() == [1, 2, [3]]",
    "[3, 1, 2].sort() == [1, 2, 3] && [1, 2, 3].slice(1, 3) == [2, 3]",
])
def test_library_functions_give_cel_gos_values(expression: str) -> None:
    assert run(expression) is True


@pytest.mark.parametrize(("expression", "error"), [
    ("'hello'.charAt(6) == ''", "index out of range: 6"),
    ("'hello'.charAt(-1) == ''", "index out of range: -1"),
    ("'hello'.indexOf('l', -1) == 0", "index out of range: -1"),
    ("'hello'.substring(3, 1) == ''", "invalid substring range. start: 3, end: 1"),
    ("'hello'.substring(9) == ''", "index out of range: 9"),
    ("[].max() == 1", "max called on empty list"),
    ("[9223372036854775807, 1].sum() > 0", "integer overflow"),
    ("[1, 2].slice(1, 5) == []", "cannot slice(1, 5), list is length 2"),
])
def test_library_errors_are_the_pods_filter_error_in_cel_gos_words(expression: str, error: str) -> None:
    out = run(expression)
    assert isinstance(out, CelRuntimeError)
    assert str(out) == error


@pytest.mark.parametrize("expression", [
    "'x'.format([]) == 'x'", "'abc'.reverse() == ''", "[2, 1].sortBy(x, x) == [1, 2]",
    "[1, 2].exists(i, v, v == 2)", "cel.bind(x, 1, [1].all(x, x > 0))",
])
def test_what_the_environment_lacks_is_said_not_matched(expression: str) -> None:
    """format, sortBy and the two-variable comprehensions are not modelled, nor a name cel.bind binds and a
    comprehension declares again; reverse is ext.Strings version 3, which 1.34 does not have."""
    assert isinstance(run(expression), Unsupported)
