"""The op registry: since-version dispatch, domains, caching, family discovery."""

from __future__ import annotations

import pytest

from onnx_symdims.ops import _registry
from tests.engine._engine_testing import dims, infer


def _hook(tag):
    def hook(ctx, node):
        return tag

    hook.tag = tag
    return hook


@pytest.fixture
def registry():
    reg = _registry.Registry()  # no package: nothing to discover
    reg.register("", "Op", since=1)(_hook("v1"))
    reg.register("", "Op", since=13)(_hook("v13"))
    reg.register("", "Late", since=5)(_hook("late"))
    return reg


@pytest.mark.parametrize(
    ("op", "opset", "tag"),
    [
        ("Op", 1, "v1"),
        ("Op", 12, "v1"),
        ("Op", 13, "v13"),
        ("Op", 28, "v13"),
        ("Op", None, "v13"),  # no opset: the latest hook
        ("Late", 4, None),  # the op did not exist yet
        ("Late", 5, "late"),
        ("Missing", 21, None),
    ],
)
def test_largest_since_not_above_the_opset(registry, op, opset, tag):
    hook = registry.lookup("", op, opset)
    assert (hook.tag if hook else None) == tag


def test_ai_onnx_is_the_default_domain(registry):
    assert registry.lookup("ai.onnx", "Op", 13).tag == "v13"
    assert registry.lookup("com.microsoft", "Op", 13) is None


def test_registration_order_does_not_matter_and_clears_the_cache(registry):
    assert registry.lookup("", "Op", 9).tag == "v1"
    registry.register("", "Op", since=7)(_hook("v7"))  # registered after a cached lookup
    assert registry.lookup("", "Op", 9).tag == "v7"
    assert [r.since for r in registry.registered_ops() if r.op_type == "Op"] == [1, 7, 13]


def test_duplicate_registration_is_an_error(registry):
    with pytest.raises(ValueError, match="registered twice"):
        registry.register("ai.onnx", "Op", since=13)(_hook("again"))


def test_one_decorator_registers_several_ops():
    reg = _registry.Registry()
    hook = reg.register("com.microsoft", ("A", "B"), since=1)(_hook("ab"))
    assert reg.lookup("com.microsoft", "A", 1) is hook
    assert reg.lookup("com.microsoft", "B", 1) is hook


def test_families_are_discovered_without_import_errors():
    ops = {(r.domain, r.op_type, r.since) for r in _registry.registered_ops()}
    assert _registry.registry.load_errors == []
    for op in (
        "Shape",
        "Size",
        "Concat",
        "Gather",
        "Squeeze",
        "Unsqueeze",
        "Cast",
        "Identity",
    ):
        assert any(d == "" and o == op for d, o, _ in ops), op
    assert ("", "Reshape", 1) in ops  # attribute form
    assert ("", "Reshape", 5) in ops  # input form
    assert ("", "Add", 7) in ops  # numpy broadcasting
    assert ("com.microsoft", "FastGelu", 1) in ops


@pytest.mark.parametrize(
    ("opset", "node", "expected"),
    [
        (11, "y = Unsqueeze<axes=[0, -1]>(x)", [1, "N", 3, 1]),
        (13, "y = Unsqueeze(x, axes)", [1, "N", 3, 1]),
        (11, "y = Squeeze<axes=[0]>(u)", ["N", 3, 1]),
        (13, "y = Squeeze(u, axes0)", ["N", 3, 1]),
    ],
)
def test_dispatch_follows_the_model_opset(opset, node, expected):
    m, result = infer(
        f"""g (float[N, 3] x, float[1, N, 3, 1] u) => (y)
        <int64[2] axes = {{0, -1}}, int64[1] axes0 = {{0}}> {{ {node} }}""",
        opset=opset,
    )
    assert dims(m, "y") == expected
    assert not result.diagnostics


def test_user_duplicate_registration_fails_loudly_and_keeps_the_families():
    from onnx_symdims.ops import _registry

    with pytest.raises(ValueError, match="registered twice"):

        @_registry.register("", "Relu")
        def shadow(ctx, node):  # pragma: no cover - never registered
            raise AssertionError

    assert not _registry.registry.load_errors
    assert _registry.lookup("", "Add", 21) is not None


@pytest.mark.parametrize("family", ["shape_ops", "contrib_misc", "control_flow", "indexing"])
def test_a_family_imported_first_loads_every_family(family):
    # A family registering while it is imported must not import the others mid-way: one
    # of them may import from the half-initialized module (contrib_misc uses shape_ops').
    import subprocess
    import sys

    code = (
        f"import onnx_symdims.ops.{family}\n"
        "from onnx_symdims.ops import _registry, lookup\n"
        "assert lookup('', 'Range', 21) is not None\n"
        "assert lookup('com.microsoft', 'Range', 1) is not None\n"
        "print(_registry.registry.load_errors)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("tool", ["gen_family_index.py", "gen_ops_doc.py"])
def test_generated_registry_files_are_current(tool):
    # A stale family index would only cost time (unknown ops load every family); a stale
    # docs/ops.md would misdocument the hooks.
    import subprocess
    import sys
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "tools" / tool
    subprocess.run([sys.executable, str(path), "--check"], check=True)


def test_a_lookup_imports_only_the_families_of_its_op():
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from onnx_symdims.ops import lookup, registered_ops\n"
        "hook = lookup('', 'Relu', 21)\n"
        "loaded = sorted(m for m in sys.modules if m.startswith('onnx_symdims.ops.')\n"
        "                and not m.rpartition('.')[2].startswith('_'))\n"
        "print(hook.__module__, loaded)\n"
        "assert lookup('', 'NoSuchOp', 21) is None\n"  # not indexed: loads every family
        "print(len(registered_ops()) > 300)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    first, second = out.stdout.splitlines()
    assert first == "onnx_symdims.ops.elementwise ['onnx_symdims.ops.elementwise']"
    assert second == "True"
