"""Planning renames from equalities: closure, targets, filters, and soundness."""

from __future__ import annotations

import itertools
import random

import pytest

from onnx_symdims import expr
from onnx_symdims.passes._anchor_renames import (
    ambiguous_labels,
    degenerate_classes,
    plan_renames,
)

d = expr.parse_dim


def _pairs(*texts: tuple[str | int, str | int]):
    return [
        (d(a) if isinstance(a, str) else a, d(b) if isinstance(b, str) else b)
        for a, b in texts
    ]


def _plan(pairs, renamable, inputs=(), **kw):
    return plan_renames(_pairs(*pairs), renamable=renamable, input_symbols=inputs, **kw)


def _assert_sound(pairs, mapping):
    """Every key equals its target under every small binding satisfying the equalities."""
    dims = _pairs(*pairs)
    values = sorted({*range(5), *(x for pair in dims for x in pair if isinstance(x, int))})
    names = sorted(
        {s for a, b in dims for x in (a, b) if not isinstance(x, int) for s in x.symbols()}
    )
    satisfied = 0
    for combo in itertools.product(values, repeat=len(names)):
        env = dict(zip(names, combo))
        try:
            if any(expr.evaluate(a, env) != expr.evaluate(b, env) for a, b in dims):
                continue
        except (ArithmeticError, ValueError):
            continue
        satisfied += 1
        for key, target in mapping.items():
            assert expr.evaluate(key, env) == expr.evaluate(target, env), (key, target, env)
    assert satisfied


RENAME_CASES = [
    # (equalities, renamable, input symbols, expected {key: target})
    pytest.param([("nnz", "N")], {"nnz"}, (), {"nnz": "N"}, id="simple"),
    pytest.param(
        [("s1", "s2"), ("s2", "s3"), ("s3", "s4"), ("s4", "N")],
        {"s1", "s2", "s3", "s4"},
        (),
        {"s1": "N", "s2": "N", "s3": "N", "s4": "N"},
        id="long-chain-closed",
    ),
    pytest.param(
        [("g", "batch"), ("g", "B")], {"g"}, (), {"g": "B"}, id="byte-order-smallest"
    ),
    pytest.param(
        [("g", "DYN0"), ("g", "batch")], {"g"}, (), {"g": "batch"}, id="DYN-filtered-not-veto"
    ),
    pytest.param([("g", "DYN0")], {"g"}, (), {}, id="DYN-never-a-target"),
    pytest.param([("g", 5)], {"g"}, (), {"g": "5"}, id="int-target"),
    pytest.param([("g", 5), ("g", "N")], {"g"}, (), {"g": "N"}, id="name-before-int"),
    pytest.param([("g", "N+1")], {"g"}, (), {"g": "N+1"}, id="declared-compound-target"),
    pytest.param(
        [("g+1", "N")], {"g"}, (), {"g+1": "N", "g": "N-1"}, id="solved-not-leaf-equal"
    ),
    pytest.param(
        [("2*g", "2*dnz"), ("g", "dnz")],
        {"g"},
        (),
        {"2*g": "2*dnz", "g": "dnz"},
        id="compound-and-leaf",
    ),
    pytest.param(
        [("h", "2*g"), ("g", "N")],
        {"g", "h"},
        (),
        {"g": "N", "h": "2*N", "2*g": "2*N"},
        id="fixed-point",
    ),
    pytest.param([("b+c", "e")], set(), (), {}, id="declared-compound-kept"),
    pytest.param([("b+c", "e")], set(), ("e",), {"b+c": "e"}, id="compound-to-input-symbol"),
    pytest.param(
        [("past_seq+seq", "total_seq"), ("broadcast(past_seq+seq,total_seq)", "total_seq")],
        set(),
        ("total_seq",),
        {"past_seq+seq": "total_seq", "broadcast(past_seq+seq,total_seq)": "total_seq"},
        id="kv-cache-input",
    ),
    pytest.param(
        [("past_seq+seq", "total_seq")], set(), ("past_seq", "seq"), {}, id="kv-cache-label"
    ),
    pytest.param([("N", "M")], set(), (), {}, id="declared-names-never-renamed"),
    pytest.param(
        [("_d0", "s0"), ("s0", "NonZero_nz_nnz")], set(), (), {}, id="look-generated"
    ),
    # the unsound derivations: never x -> y
    pytest.param([("x+1", "y")], {"x"}, (), {"x+1": "y", "x": "y-1"}, id="x+1==y"),
    pytest.param([("2*x", "2*y+2")], {"x"}, (), {"2*x": "2*y+2"}, id="2x==2y+2"),
    pytest.param([("x//2", "y//2")], {"x"}, (), {"x//2": "y//2"}, id="x//2==y//2"),
    pytest.param(
        [("2*(a//2)", "2*(b//2)")], {"a"}, (), {"2*(a//2)": "2*(b//2)"}, id="2(a//2)==2(b//2)"
    ),
    pytest.param(
        [("broadcast(d,e)", 64)], {"d", "e"}, (), {"broadcast(d,e)": "64"}, id="broadcast-64"
    ),
]


@pytest.mark.parametrize(("pairs", "renamable", "inputs", "expected"), RENAME_CASES)
def test_plan(pairs, renamable, inputs, expected):
    plan = _plan(pairs, renamable, inputs)
    assert plan.text_mapping() == expected
    _assert_sound(pairs, plan.mapping)


@pytest.mark.parametrize(("pairs", "renamable", "inputs", "expected"), RENAME_CASES)
def test_plan_does_not_depend_on_order(pairs, renamable, inputs, expected):
    rng = random.Random(0)
    for _ in range(5):
        shuffled = [p if rng.random() < 0.5 else p[::-1] for p in pairs]
        rng.shuffle(shuffled)
        assert _plan(shuffled, renamable, inputs).text_mapping() == expected


def test_implied_equalities_and_contradictions():
    plan = _plan([("g", "N"), ("g", "M"), ("h", 5), ("h", 6)], {"g", "h"})
    assert [tuple(map(str, c)) for c in plan.implied] == [("5", "6"), ("M", "N")]
    assert len(plan.contradictions) == 1
    assert plan.text_mapping() == {"g": "M"}  # h's class is contradictory: unused


def test_ban_prefix_can_be_disabled():
    assert _plan([("g", "DYN0")], {"g"}, ban_prefix=None).text_mapping() == {"g": "DYN0"}


def test_targets_never_contain_renamable_symbols():
    plan = _plan([("g", "h"), ("h", "k+1"), ("g", "N")], {"g", "h", "k"})
    for target in plan.mapping.values():
        assert isinstance(target, int) or not target.symbols() & {"g", "h", "k"}
    assert plan.text_mapping()["k"] == "N-1"


def test_only_preferred_names_are_targets():
    # S is declared only inside a loop body: it is no target for an outer symbol
    pairs = [("g+1", "S"), ("g", "S")]
    assert _plan(pairs, {"g"}).text_mapping() != {}
    plan = plan_renames(_pairs(*pairs), renamable={"g"}, preferred={"N"})
    assert plan.text_mapping() == {}
    plan = plan_renames(_pairs(("g", "S"), ("g", "N")), renamable={"g"}, preferred={"N"})
    assert plan.text_mapping() == {"g": "N"}


PLANS_NOTHING_CASES = [
    ([("(H+3)//4", "max(H-1,0)//4+1"), ("(W+3)//4", "max(1,(W+3)//4)")], set(), True),
    ([("max(0,min(p+s,s+8,8))", "min(s+min(8,p),8)")], {"g"}, True),
    ([("b+c", "e")], set(), False),  # a bare name: a target for the compound
    ([("3", "min(3,L)")], set(), False),  # an int
    ([("N*min(1,C)", "N")], set(), False),
    ([("g+1", "N+M")], {"g"}, False),  # a minted symbol
]


@pytest.mark.parametrize(("pairs", "renamable", "nothing"), PLANS_NOTHING_CASES)
def test_the_anchor_pass_skips_planning_only_when_nothing_is_planned(
    pairs, renamable, nothing
):
    from onnx_symdims.passes._anchors import _plans_nothing

    assert _plans_nothing(_pairs(*pairs), frozenset(renamable)) is nothing
    for inputs in ((), ("H", "W", "p", "s", "e", "L", "N", "C", "M")):
        plan = _plan(pairs, renamable, inputs)
        if nothing:
            assert (plan.mapping, plan.implied, plan.contradictions) == ({}, (), ())


def test_ambiguous_labels_with_a_label_inference_cannot_check():
    # K is also declared where inference computed nothing (an output of unknown rank).
    found = ambiguous_labels(
        [(d("K"), d("L//3+1"))], renamable=[], input_symbols=["L"], unverified=["K"]
    )
    assert {k: [expr.to_onnx(v) for v in vs] for k, vs in found.items()} == {"K": ["L//3+1"]}
    assert (
        ambiguous_labels(
            [(d("K"), d("L//3+1"))], renamable=[], input_symbols=["L"], unverified=["M"]
        )
        == {}
    )


@pytest.mark.parametrize(
    ("pairs", "inputs", "renamable", "expected"),
    [
        ([("K", "L"), ("K", "2*L")], ["L"], [], {"K": ("2*L", "L")}),
        ([("K", "2"), ("M", "3"), ("K", "M")], [], [], {"K": ("2", "3"), "M": ("2", "3")}),
        ([("K", "L"), ("K", "L")], ["L"], [], {}),  # one size, named twice
        # A minted size (a data-dependent count) proves nothing for the label either: the
        # label claims nnz == L, which nothing checks (TorchScript's Uniqueout4_dim_0).
        ([("K", "nnz"), ("K", "L")], ["L"], ["nnz"], {"K": ("L", "nnz")}),
        ([("K", "nnz"), ("K", "nnz")], [], ["nnz"], {}),  # only the count: it names it
        # two counts: nothing says they are equal (onnxruntime: 3 and 4, helper 84)
        ([("K", "nnz"), ("K", "m")], [], ["nnz", "m"], {"K": ("m", "nnz")}),
        # Sizes equal without the label (an input names the sum): one class.
        (
            [("K", "total"), ("total", "past+seq"), ("K", "past+seq")],
            ["total", "past", "seq"],
            [],
            {},
        ),
        ([("total", "L"), ("total", "2*L")], ["total", "L"], [], {}),  # an input: implied
        (
            [("K", "M"), ("K", "L"), ("M", "2*L")],
            ["L"],
            [],
            {"K": ("2*L", "L"), "M": ("2*L", "L")},
        ),
    ],
)
def test_ambiguous_labels(pairs, inputs, renamable, expected):
    def parse(t):
        return int(t) if t.isdigit() else d(t)

    found = ambiguous_labels(
        [(parse(a), parse(b)) for a, b in pairs], renamable=renamable, input_symbols=inputs
    )
    assert {
        k: tuple(str(v) if isinstance(v, int) else expr.to_onnx(v) for v in vs)
        for k, vs in found.items()
    } == expected


@pytest.mark.parametrize(
    ("pairs", "renamable", "degenerate"),
    [
        ([("L", "2*L")], [], True),  # L = 0 only
        ([("seq", "past+seq")], [], True),  # past = 0 only
        ([("3", "2*L+5")], [], True),  # never
        ([("total", "past+seq")], [], False),  # a relation between sizes
        ([("L", "3")], [], False),  # a fixed size: an implied equality
        ([("nnz", "L"), ("nnz", "2*L")], ["nnz"], True),  # through a minted symbol
        ([("nnz", "L")], ["nnz"], False),
    ],
)
def test_degenerate_classes(pairs, renamable, degenerate):
    def parse(t):
        return int(t) if t.isdigit() else d(t)

    found = degenerate_classes([(parse(a), parse(b)) for a, b in pairs], renamable=renamable)
    assert bool(found) == degenerate


@pytest.mark.parametrize(("pairs", "renamable", "inputs", "expected"), RENAME_CASES)
def test_plan_stops_on_a_round_that_joins_no_class_as_a_confirming_round_would(
    pairs, renamable, inputs, expected, monkeypatch
):
    # A round whose new edges all lie within its classes ends the planning; running
    # every round up to the cap must plan the same (mapping, implied, contradictions),
    # in the same order.
    from onnx_symdims.passes import _anchor_renames

    quick = _plan(pairs, renamable, inputs)
    monkeypatch.setattr(_anchor_renames, "_joins_nothing", lambda classes, edges: False)
    monkeypatch.setattr(_anchor_renames, "_MAX_ROUNDS", 16)
    monkeypatch.setattr(_anchor_renames, "_PLANS", {})  # planned again, not remembered
    confirmed = _plan(pairs, renamable, inputs)
    assert list(quick.mapping.items()) == list(confirmed.mapping.items())
    assert quick == confirmed


def test_plans_and_degenerate_classes_of_repeated_arguments_are_remembered_not_shared():
    from onnx_symdims.passes import _anchor_renames

    pairs = [("g", "N"), ("h", "2*g")]
    first = _plan(pairs, {"g", "h"})
    first.mapping.clear()  # a caller's own copy
    again = _plan(pairs, {"g", "h"})
    assert again.text_mapping() == {"g": "N", "h": "2*N", "2*g": "2*N"}
    assert again == _anchor_renames._plan(
        tuple(_pairs(*pairs)), frozenset({"g", "h"}), frozenset(), None, "DYN"
    )
    degenerate = _pairs(("L", "2*L"))
    found = degenerate_classes(degenerate, renamable=())
    found.clear()
    assert degenerate_classes(degenerate, renamable=()) == [frozenset({d("L"), d("2*L")})]
