"""GatherNDOfIndexGridPass: transformers' vmap-built mask gather, as a slice of the mask.

Firing cases run before and after in onnxruntime, on sizes with empty batches and
sequences and with a mask longer than the index grid (the gather reads a prefix);
declining cases name their reason.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from onnx_symdims.rewrite import GatherNDOfIndexGridPass, analyze
from tests.rewrite._rewrite_testing import apply_pass, assert_equivalent, model, ops, proto

# The padding mask of a BERT export: mask[b, t] for every (b, t), as [B, 1, 1, T].
# {limit} is the kv length the grid spans: S (the mask's own dim) or P + S.
MASK = """
    g (bool[B, {mask_len}] mask, float[B, S] ids, float[B, 2, P, 4] past) => (bool[?, ?, ?, ?] y) {{
        zero = Constant<value = int64 {{0}}>()
        one = Constant<value = int64 {{1}}>()
        sb = Shape<start = 0, end = 1>(ids)
        b = Squeeze(sb)
        ss = Shape<start = 1, end = 2>(ids)
        s = Squeeze(ss)
        sp = Shape<start = 2, end = 3>(past)
        p = Squeeze(sp)
        total = Add(p, s)
        rb = Range(zero, b, one)
        rt = Range(zero, {limit}, one)
        shape_b = Constant<value = int64[4] {{-1, 1, 1, 1}}>()
        shape_t = Constant<value = int64[4] {{1, 1, 1, -1}}>()
        gb = Reshape(rb, shape_b)
        gt = Reshape({rt}, shape_t)
        m = Max(gb, gt)
        grid = Shape(m)
        eb = Expand({gb}, grid)
        et = Expand(gt, grid)
        last = Constant<value = int64[1] {{-1}}>()
        ub = Unsqueeze(eb, last)
        ut = Unsqueeze(et, last)
        idx = Concat<axis = -1>({parts})
        y = GatherND(mask, idx)
    }}
"""


def _mask(mask_len="S", limit="s", rt="rt", gb="gb", parts="ub, ut") -> str:
    return MASK.format(mask_len=mask_len, limit=limit, rt=rt, gb=gb, parts=parts)


SIZES = [
    {"B": 2, "S": 3, "P": 0, "T": 3},
    {"B": 0, "S": 2, "P": 1, "T": 3},
    {"B": 1, "S": 0, "P": 0, "T": 0},
    {"B": 3, "S": 1, "P": 4, "T": 5},
]


def _bool_mask(sizes):
    rng = np.random.default_rng(sizes["B"] * 10 + sizes["S"])
    return rng.random((sizes["B"], sizes["T"])) < 0.5


@pytest.mark.parametrize(
    ("body", "expected", "longer"),
    [
        # the grid spans the mask's own length: the mask with two axes inserted
        (_mask(mask_len="S"), ["Unsqueeze"], False),
        # a KV-cache decoder: the grid spans P + S of a mask declared T long, so the gather
        # reads a prefix (a mask longer than P + S runs too); P + S <= T is not proven and
        # an empty batch gathers P + S columns of nothing, where the Slice keeps T: a
        # Reshape to the grid's shape keeps P + S (the grid's shape stays)
        (
            _mask(mask_len="T", limit="total"),
            [
                "Add",
                "Range",
                "Range",
                "Reshape",
                "Reshape",
                "Max",
                "Unsqueeze",
                "Slice",
                "Reshape",
            ],
            True,
        ),
    ],
    ids=["own_length", "kv_prefix"],
)
def test_gather_of_an_index_grid_becomes_a_slice(body, expected, longer):
    before, m, rewrite = apply_pass(GatherNDOfIndexGridPass, body)
    assert rewrite.fired == {"gather_nd_of_index_grid": 1}
    assert [op for op in ops(m) if op not in ("Shape", "Squeeze")] == expected
    sizes = [{**s, "T": s["S"]} for s in SIZES] if not longer else SIZES
    if longer:  # a mask longer than the grid: the gather reads its first P + S columns;
        # an empty batch with a mask shorter than the grid runs too (gathers nothing)
        sizes = [*sizes, {"B": 2, "S": 2, "P": 1, "T": 6}, {"B": 0, "S": 3, "P": 2, "T": 1}]
    assert_equivalent(before, m, sizes, given={"mask": _bool_mask})


def _two_gathers(pos: str) -> str:
    """The mask and a second tensor ``pos`` gathered with one grid."""
    return (
        _mask()
        .replace(
            "past) => (bool[?, ?, ?, ?] y) {",
            f"past, {pos} pos) => (bool[?, ?, ?, ?] y, int64[?, ?, ?, ?] z) {{",
        )
        .replace(
            "y = GatherND(mask, idx)",
            "y = GatherND(mask, idx)\n        z = GatherND(pos, idx)",
        )
    )


def test_a_grid_shared_by_two_gathers_goes_when_both_are_rewritten():
    """whisper's decoder gathers its padding mask and a cumulative sum with one grid."""
    before, m, rewrite = apply_pass(GatherNDOfIndexGridPass, _two_gathers("int64[B, S]"))
    assert rewrite.fired == {"gather_nd_of_index_grid": 2}
    assert "GatherND" not in ops(m) and "Range" not in ops(m)
    sizes = [{**s, "T": s["S"]} for s in SIZES]
    assert_equivalent(before, m, sizes, given={"mask": _bool_mask})


def test_a_grid_shared_with_a_gather_that_stays_stays_too():
    # pos has a third axis the grid does not index: that gather stays, and the grid too
    _, m, rewrite = apply_pass(GatherNDOfIndexGridPass, _two_gathers("int64[B, S, 3]"))
    assert not rewrite.fired
    assert rewrite.declined["removes no more nodes than it adds"] >= 1
    assert ops(m).count("GatherND") == 2


# A sliding window of 2: the kv positions are arange(P + S) + max(P - 2, 0).
WINDOW = _mask(mask_len="T", limit="total").replace(
    "gt = Reshape(rt, shape_t)",
    """two = Constant<value = int64 {2}>()
        over = Sub(p, two)
        shift = Max(over, zero)
        shifted = Add(rt, shift)
        gt = Reshape(shifted, shape_t)""",
)


def test_a_sliding_window_gather_becomes_a_shifted_slice():
    before, m, rewrite = apply_pass(GatherNDOfIndexGridPass, WINDOW)
    assert rewrite.fired == {"gather_nd_of_index_grid": 1}
    assert "GatherND" not in ops(m) and "Slice" in ops(m)
    sizes = []
    for b, s, p, more in (
        (2, 3, 0, 0),
        (1, 1, 4, 0),
        (0, 2, 5, 1),
        (2, 0, 3, 2),
        (1, 2, 1, 0),
    ):
        sizes.append({"B": b, "S": s, "P": p, "T": p + s + max(p - 2, 0) + more})
    sizes.append(
        {"B": 0, "S": 3, "P": 5, "T": 2}
    )  # an empty batch, a mask shorter than the window
    assert_equivalent(before, m, sizes, given={"mask": _bool_mask})


DECLINES = {
    "an offset that may be negative (GatherND's indices would wrap around)": (
        WINDOW.replace("shift = Max(over, zero)", "shift = Identity(over)"),
        "an index component is not a reshaped Range",
    ),
    "the components in the other order (a transpose)": (
        _mask(parts="ut, ub").replace("bool[B, S] mask", "bool[S, B] mask"),
        "the grid's axes are not in increasing order",
    ),
    "batch_dims": (
        _mask().replace("y = GatherND(mask, idx)", "y = GatherND<batch_dims = 1>(mask, idx)"),
        "batch_dims is not 0",
    ),
    "a limit that may be negative (an empty Range, but a Slice end from the back)": (
        _mask(mask_len="T", limit="lim").replace(
            "float[B, 2, P, 4] past)", "float[B, 2, P, 4] past, int64 lim)"
        ),
        "a Range's limit is not proven >= 0",
    ),
    "a Range that does not start at 0": (
        _mask().replace("rb = Range(zero, b, one)", "rb = Range(one, b, one)"),
        "a Range does not start at 0 with step 1",
    ),
}


@pytest.mark.parametrize("case", DECLINES)
def test_gather_of_an_index_grid_declines(case):
    body, reason = DECLINES[case]
    _, m, rewrite = apply_pass(GatherNDOfIndexGridPass, body)
    assert not rewrite.fired
    assert rewrite.declined[reason] >= 1, rewrite.declined
    assert "GatherND" in ops(m)


def _grid_case(
    k: int, m: int, positions: tuple[int, ...], prefix: tuple[bool, ...], shifted: bool = False
) -> str:
    """A gather of a rank-``k`` tensor over a rank-``m`` grid; axis ``j`` spans all of
    ``data``'s dim ``j``, or (``prefix[j]``) the first ``L_j`` of them, or (``shifted``, on
    the prefix axes) ``L_j`` of them from ``O_j`` on."""
    dims = ", ".join(f"D{j}" for j in range(k))
    extra = "".join(f", float[L{j}] l{j}" for j in range(k) if prefix[j])
    extra += "".join(f", float[O{j}] o{j}" for j in range(k) if prefix[j] and shifted)
    lines = ["zero = Constant<value = int64 {0}>()", "one = Constant<value = int64 {1}>()"]
    for j in range(k):
        source = f"l{j}" if prefix[j] else "data"
        axis = 0 if prefix[j] else j
        lines += [
            f"s{j} = Shape<start = {axis}, end = {axis + 1}>({source})",
            f"n{j} = Squeeze(s{j})",
            f"r{j} = Range(zero, n{j}, one)"
            if not (prefix[j] and shifted)
            else f"q{j} = Range(zero, n{j}, one)\n"
            f"            so{j} = Shape(o{j})\n"
            f"            f{j} = Squeeze(so{j})\n"
            f"            r{j} = Add(q{j}, f{j})",
            f"t{j} = Constant<value = int64[{m}] {{"
            + ", ".join("-1" if a == positions[j] else "1" for a in range(m))
            + "}>()",
            f"g{j} = Reshape(r{j}, t{j})",
        ]
    top = "g0"
    for j in range(1, k):
        lines.append(f"mx{j} = Max({top}, g{j})")
        top = f"mx{j}"
    lines += ["grid = Shape(" + top + ")", "last = Constant<value = int64[1] {-1}>()"]
    for j in range(k):
        name = f"u{j}" if k > 1 else "idx"  # one component: the index itself
        lines += [f"e{j} = Expand(g{j}, grid)", f"{name} = Unsqueeze(e{j}, last)"]
    if k > 1:
        lines.append("idx = Concat<axis = -1>(" + ", ".join(f"u{j}" for j in range(k)) + ")")
    lines.append("y = GatherND(data, idx)")
    body = "\n            ".join(lines)
    return f"""
        g (float[{dims}] data{extra}) => (float[?] y) {{
            {body}
        }}
    """


GRID_CASES = [
    (k, m, positions, prefix, shifted)
    for k, m in ((1, 1), (1, 3), (2, 2), (2, 4), (3, 4))
    for positions in itertools.combinations(range(m), k)
    for prefix in itertools.product((False, True), repeat=k)
    for shifted in ((False, True) if any(prefix) and k < 3 else (False,))
    if (k, m) != (3, 4) or prefix in ((False,) * 3, (True, False, True))
]


@pytest.mark.parametrize(("k", "m", "positions", "prefix", "shifted"), GRID_CASES)
def test_every_grid_layout_keeps_the_outputs(k, m, positions, prefix, shifted):
    """Every placement of a rank-1 to 3 tensor's axes in a grid of rank up to 4, each
    spanning its whole axis, a prefix or a window from an offset: fired, same outputs on
    sizes with zeros and ones (windows of any length and offset that fit the axis)."""
    body = _grid_case(k, m, positions, prefix, shifted)
    before, m_after, rewrite = apply_pass(GatherNDOfIndexGridPass, body)
    assert rewrite.fired == {"gather_nd_of_index_grid": 1}, rewrite.declined
    assert "GatherND" not in ops(m_after)
    rng = np.random.default_rng(k * 100 + m * 10 + sum(positions))
    sizes = []
    for _ in range(6):
        binding = {f"D{j}": int(rng.integers(0, 4)) for j in range(k)}
        for j in range(k):
            binding[f"O{j}"] = int(rng.integers(0, binding[f"D{j}"] + 1)) if shifted else 0
            binding[f"L{j}"] = int(rng.integers(0, binding[f"D{j}"] - binding[f"O{j}"] + 1))
        sizes.append(binding)
    assert_equivalent(before, m_after, sizes)


def test_a_grid_also_read_by_a_gather_in_a_branch_is_left_to_it():
    """A gather inside an If branch shares the grid: the main graph's gather is rewritten
    alone (the branch's node cannot be replaced from the main graph) and the grid stays."""
    body = (
        _mask()
        .replace(
            "past) => (bool[?, ?, ?, ?] y) {",
            "past, bool c) => (bool[?, ?, ?, ?] y, bool[?, ?, ?, ?] z) {",
        )
        .replace(
            "y = GatherND(mask, idx)",
            """y = GatherND(mask, idx)
        z = If(c) <
            then_branch = t () => (bool[?, ?, ?, ?] r) { r = GatherND(mask, idx) },
            else_branch = e () => (bool[?, ?, ?, ?] r) { r = Identity(y) }
        >""",
        )
    )
    before, m, rewrite = apply_pass(GatherNDOfIndexGridPass, body)
    assert rewrite.fired == {}, "one gather saves no node while the grid stays"
    assert rewrite.declined["removes no more nodes than it adds"] >= 1
    sizes = [{**s, "T": s["S"]} for s in SIZES]
    assert_equivalent(
        before, m, sizes, given={"mask": _bool_mask, "c": lambda s: np.array(s["B"] % 2 == 0)}
    )


# Found by a mutation audit: cases each of which a weakened check would rewrite wrongly.
AUDIT_DECLINES = {
    # A grid with a third axis of 2 (the grid's shape broadcasts with a [1, 2, 1, 1]
    # tensor) gathers every mask element twice; an Unsqueeze would give that axis 1.
    "a grid axis of 2 that no component spans": (
        _mask().replace(
            "grid = Shape(m)",
            """twice = Constant<value = int64[1, 2, 1, 1] {0, 0}>()
        wide = Add(m, twice)
        grid = Shape(wide)""",
        ),
        "the grid has other axes than size 1",
    ),
    # Range(0, B, 2) gathers every other row: not a prefix of the mask
    "a Range with step 2": (
        _mask().replace(
            "rb = Range(zero, b, one)",
            "two = Constant<value = int64 {2}>()\n        rb = Range(zero, b, two)",
        ),
        "a Range does not start at 0 with step 1",
    ),
    # limit = S - 2: an empty Range where S < 2, but a Slice end counted from the back
    "a limit proven but not >= 0": (
        _mask(mask_len="T", limit="short").replace(
            "total = Add(p, s)",
            """two = Constant<value = int64 {2}>()
        short = Sub(s, two)""",
        ),
        "a Range's limit is not proven >= 0",
    ),
    # The kv prefix of an empty batch needs a Reshape to the grid's shape, but neither
    # component's Expand target is that shape: each expands to the other's reshape.
    "no Expand target is the grid's shape": (
        _mask(mask_len="T", limit="total")
        .replace("eb = Expand(gb, grid)", "sgt = Shape(gt)\n        eb = Expand(gb, sgt)")
        .replace("et = Expand(gt, grid)", "sgb = Shape(gb)\n        et = Expand(gt, sgb)"),
        "a Range may run past its data axis while the grid is empty",
    ),
}


@pytest.mark.parametrize("case", AUDIT_DECLINES)
def test_gather_of_an_index_grid_declines_where_a_rewrite_would_differ(case):
    body, reason = AUDIT_DECLINES[case]
    before, m, rewrite = apply_pass(GatherNDOfIndexGridPass, body)
    assert not rewrite.fired
    assert rewrite.declined[reason] >= 1, rewrite.declined
    sizes = [*SIZES, {"B": 2, "S": 1, "P": 0, "T": 3}, {"B": 0, "S": 3, "P": 2, "T": 2}]
    if "bool[B, T] mask" not in body:
        sizes = [{**s, "T": s["S"]} for s in sizes]
    valid = []
    for s in sizes:  # the original must run (a grid past a short mask fails it)
        try:
            assert_equivalent(before, before, [s], given={"mask": _bool_mask})
        except Exception:
            continue
        valid.append(s)
    assert len(valid) >= 3
    assert_equivalent(before, m, valid, given={"mask": _bool_mask})


@pytest.mark.parametrize(
    ("opset", "body", "reason"),
    [
        # before 13 Unsqueeze takes its axes as an attribute
        (12, _mask(), "opset before 13 (Unsqueeze axes as an attribute)"),
        # before 14 Reshape has no allowzero (the kv prefix of an empty batch needs it)
        (
            13,
            _mask(mask_len="T", limit="total"),
            "a Range may run past its data axis while the grid is empty",
        ),
    ],
    ids=["opset12", "opset13"],
)
def test_gather_of_an_index_grid_declines_on_old_opsets(opset, body, reason):
    # Shape without start/end (opset 15), Unsqueeze with axes as an attribute before 13
    for name, source, axis in (("sb", "ids", 0), ("ss", "ids", 1), ("sp", "past", 2)):
        body = body.replace(
            f"{name} = Shape<start = {axis}, end = {axis + 1}>({source})",
            f"""{name}_all = Shape({source})
        {name}_at = Constant<value = int64[1] {{{axis}}}>()
        {name} = Gather({name}_all, {name}_at)""",
        )
    if opset < 13:
        body = body.replace("ub = Unsqueeze(eb, last)", "ub = Unsqueeze<axes = [-1]>(eb)")
        body = body.replace("ut = Unsqueeze(et, last)", "ut = Unsqueeze<axes = [-1]>(et)")
    m = model(body, opset=opset)
    before = proto(m)
    rewrite = GatherNDOfIndexGridPass(analyze(m))
    rewrite(m)
    assert not rewrite.fired
    assert rewrite.declined[reason] >= 1, rewrite.declined
    sizes = [{**s, "T": s["S"] + s["P"]} for s in SIZES]
    assert_equivalent(before, m, sizes, given={"mask": _bool_mask})


# The batch fixed at 1 (``optimize(symbol_ranges={"B": (1, 1)})``): the folder has made
# the batch component Range(0, 1) a constant 0, and the sequence component's Reshape,
# Expand and Unsqueeze one Reshape (every other grid axis has size 1).
ONE_ROW = """
    g (bool[1, S] mask, float[1, S] ids) => (bool[?, ?, ?, ?] y) {
        zero = Constant<value = int64 {0}>()
        one = Constant<value = int64 {1}>()
        ss = Shape<start = 1, end = 2>(ids)
        s = Squeeze(ss)
        rt = Range(zero, s, one)
        shape_t = Constant<value = int64[5] {1, 1, 1, -1, 1}>()
        ut = Reshape(rt, shape_t)
        gb = Constant<value = int64[1, 1, 1, 1] {ZERO}>()
        ones = Constant<value = int64[3] {1, 1, 1}>()
        grid = Concat<axis = 0>(ones, ss)
        eb = Expand(gb, grid)
        last = Constant<value = int64[1] {-1}>()
        ub = Unsqueeze(eb, last)
        idx = Concat<axis = -1>(ub, ut)
        y = GatherND(mask, idx)
    }
"""


def test_a_batch_fixed_at_one_gathers_as_a_slice():
    before, m, rewrite = apply_pass(GatherNDOfIndexGridPass, ONE_ROW.replace("ZERO", "0"))
    assert rewrite.fired == {"gather_nd_of_index_grid": 1}, rewrite.declined
    assert "GatherND" not in ops(m) and "Range" not in ops(m)
    sizes = [{"S": s} for s in (0, 1, 4)]
    assert_equivalent(before, m, sizes, given={"mask": lambda z: np.ones((1, z["S"]), bool)})


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        # A constant 1, not 0: mask[1, t] is past the end, not the mask.
        (ONE_ROW.replace("ZERO", "1"), "an index component is not a reshaped Range"),
        # The mask's first axis is B, not proven 1: a constant 0 reads its first row only.
        (
            ONE_ROW.replace("ZERO", "0").replace("bool[1, S] mask", "bool[B, S] mask"),
            "a constant index component on a data axis not proven of size 1",
        ),
    ],
    ids=["constant_one", "batch_not_one"],
)
def test_a_constant_component_declines_unless_it_is_zero_on_a_size_one_axis(body, reason):
    _, m, rewrite = apply_pass(GatherNDOfIndexGridPass, body)
    assert not rewrite.fired
    assert rewrite.declined[reason] == 1, rewrite.declined
    assert "GatherND" in ops(m)


# The batch fixed at 1 in a decoder with a sliding-window and a full layer (Cohere2 at
# opset 23): one constant-0 batch component ``ub`` stacked beside the full layer's kv
# positions and beside the window's shifted ones, two grids. Rewritten alone, neither
# gather pays (its kv Range also feeds the positions ``r``); rewritten together, the
# shared component dies too.
TWO_LAYERS = """
    g (bool[1, T] mask, float[1, S] ids, float[1, 2, P, 4] past)
        => (bool[?, ?, ?, ?] y, bool[?, ?, ?, ?] z, int64[?] r) {
        zero = Constant<value = int64 {0}>()
        one = Constant<value = int64 {1}>()
        two = Constant<value = int64 {2}>()
        ss = Shape<start = 1, end = 2>(ids)
        s = Squeeze(ss)
        sp = Shape<start = 2, end = 3>(past)
        p = Squeeze(sp)
        total = Add(p, s)
        r = Range(zero, total, one)
        shape_t = Constant<value = int64[5] {1, 1, 1, -1, 1}>()
        ut = Reshape(r, shape_t)
        over = Sub(p, two)
        shift = Max(over, zero)
        shifted = Add(r, shift)
        uw = Reshape(shifted, shape_t)
        gb = Constant<value = int64[1, 1, 1, 1] {0}>()
        ones = Constant<value = int64[3] {1, 1, 1}>()
        tv = Unsqueeze(total, zero)
        grid = Concat<axis = 0>(ones, tv)
        eb = Expand(gb, grid)
        last = Constant<value = int64[1] {-1}>()
        ub = Unsqueeze(eb, last)
        idx = Concat<axis = -1>(ub, ut)
        y = GatherND(mask, idx)
        idw = Concat<axis = -1>(ub, uw)
        z = GatherND(mask, idw)
    }
"""


def test_grids_sharing_a_component_go_together():
    before, m, rewrite = apply_pass(GatherNDOfIndexGridPass, TWO_LAYERS)
    assert rewrite.fired == {"gather_nd_of_index_grid": 2}, rewrite.declined
    assert "GatherND" not in ops(m) and "Expand" not in ops(m)
    sizes = [
        {"S": s, "P": p, "T": p + s + max(p - 2, 0) + more}
        for s, p, more in ((3, 0, 0), (1, 4, 0), (2, 5, 1), (0, 3, 2), (2, 1, 0))
    ]
    rows = {"mask": lambda z: np.random.default_rng(z["T"]).random((1, z["T"])) < 0.5}
    assert_equivalent(before, m, sizes, given=rows)
