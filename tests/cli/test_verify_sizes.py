"""How ``--verify`` finds input sizes that run: relations between input dims, validated.

Each model reproduces, without torch, a kind of exported model on which independent
random sizes never run: a KV-cache decoder whose mask is sliced to the key length (any
``total_seq_len >= past_seq_len + seq_len`` runs, so a wrong relation such as
``total_seq_len = batch*(past_seq_len+seq_len)`` runs too), a sliding-window decoder
(keys past a window of 8 broadcast against all keys: ``past_seq_len <= 8``), a vision
transformer that cuts images into 16x16 patches with a Reshape, a Swin-style 8x8 window
partition after a stride-4 patch embedding (sizes multiples of 32), and a vision
transformer with a fixed position embedding (one image size).
"""

from __future__ import annotations

import json
import random

import onnx.parser
import onnx_ir as ir
import pytest

from onnx_symdims import cli, expr, infer_symbolic_shapes
from onnx_symdims._verify_sizes import (
    Guess,
    SizePlan,
    _solve,
    candidate_relations,
    find_sizes,
    model_facts,
)
from tests.cli._cli_testing import model_from_text

pytest.importorskip("onnxruntime")

from onnx_symdims._verify_ort import short_error
from onnx_symdims.verify import compare_models, verify_model


def _floats(n: int, value: float = 0.01) -> str:
    return ",".join([str(value)] * n)


# A decoder layer as TorchScript exports Llama/MPT: the mask [batch, total_seq_len] is
# sliced to the key length (past + current keys), then added to the scores; the flat
# [batch*(past_seq_len+seq_len)] values make that product the dims' most used expression.
DECODER = f"""g (int64[batch, seq_len] input_ids, int64[batch, total_seq_len] attention_mask,
       float[batch, 2, past_seq_len, 4] past_key) => (float[?] probs, float[?] present,
       float[?] f4)
    <float[10, 8] emb = {{{_floats(80)}}}, int64[4] s4 = {{0, 0, 2, 4}},
     int64[2] ax12 = {{1, 2}}, int64[1] zero = {{0}}, int64[1] two = {{2}},
     int64[1] three = {{3}}, int64[1] m1 = {{-1}}, int64[2] ax13 = {{1, 3}}> {{
    x = Gather(emb, input_ids)
    xr = Reshape(x, s4)
    q = Transpose<perm=[0, 2, 1, 3]>(xr)
    present = Concat<axis=2>(past_key, q)
    kt = Transpose<perm=[0, 1, 3, 2]>(present)
    scores = MatMul(q, kt)
    m = Unsqueeze(attention_mask, ax12)
    mf = Cast<to=1>(m)
    ps = Shape(present)
    keylen = Slice(ps, two, three)
    ms = Slice(mf, zero, keylen, three)
    s = Add(scores, ms)
    probs = Softmax<axis=-1>(s)
    r = ReduceSum<keepdims=0>(present, ax13)
    flat = Reshape(r, m1)
    f1 = Mul(flat, flat)
    f2 = Relu(f1)
    f3 = Neg(f2)
    f4 = Abs(f3)
}}"""

# A sliding-window decoder as mistral/qwen2 export it (window of 8): the last 8 past keys
# plus the current ones ([seq_len+min(8,past_seq_len)]) are added to all of them
# ([past_seq_len+seq_len]), which broadcasts only for past_seq_len <= 8; the mask is
# sliced to all the keys (total_seq_len >= past_seq_len+seq_len runs).
SLIDING = """g (float[batch, 2, seq_len, 4] k, float[batch, 2, past_seq_len, 4] past_key,
       float[batch, total_seq_len] attention_mask) => (float[batch, 2, seq_len, 4] out,
       float[?] masked)
    <int64[1] start = {-8}, int64[1] end = {9223372036854775807}, int64[1] zero = {0},
     int64[1] two = {2}, int64[1] three = {3}, int64[2] ax12 = {1, 2}> {
    full = Concat<axis=2>(past_key, k)
    win = Slice(past_key, start, end, two)
    kw = Concat<axis=2>(win, k)
    both = Add(full, kw)
    kt = Transpose<perm=[0, 1, 3, 2]>(both)
    scores = MatMul(k, kt)
    out = MatMul(scores, kw)
    m = Unsqueeze(attention_mask, ax12)
    ps = Shape(full)
    keylen = Slice(ps, two, three)
    ms = Slice(m, zero, keylen, three)
    ft = Transpose<perm=[0, 1, 3, 2]>(full)
    fs = MatMul(k, ft)
    masked = Add(fs, ms)
}"""

# Patches cut by a Reshape to [batch, 3, height/16, 16, width/16, 16]: only sizes
# divisible by 16 run.
PATCHES = """g (float[batch, 3, height, width] pixel_values) => (float[?] pooled)
    <int64[1] zero = {0}, int64[1] one = {1}, int64[1] two = {2}, int64[1] four = {4},
     int64[1] c3 = {3}, int64[1] p = {16}, int64[1] m1 = {-1}, int64[1] d = {768},
     int64[1] ax1 = {1}> {
    s = Shape(pixel_values)
    b = Slice(s, zero, one)
    hw = Slice(s, two, four)
    n = Div(hw, p)
    nh = Slice(n, zero, one)
    nw = Slice(n, one, two)
    shape6 = Concat<axis=0>(b, c3, nh, p, nw, p)
    patches = Reshape(pixel_values, shape6)
    t = Transpose<perm=[0, 2, 4, 1, 3, 5]>(patches)
    shape3 = Concat<axis=0>(b, m1, d)
    tokens = Reshape(t, shape3)
    pooled = ReduceMean<keepdims=0>(tokens, ax1)
}"""

# A stride-4 patch embedding, then 8x8 windows: (height//4) % 8 == 0, same for width.
WINDOWS = f"""g (float[batch, 3, height, width] pixel_values) => (float[?] windows)
    <float[4, 3, 4, 4] w = {{{_floats(192)}}}, int64[1] zero = {{0}}, int64[1] one = {{1}},
     int64[1] two = {{2}}, int64[1] three = {{3}}, int64[1] c4 = {{4}}, int64[1] win = {{8}},
     int64[1] m1 = {{-1}}> {{
    e = Conv<strides=[4, 4], kernel_shape=[4, 4]>(pixel_values, w)
    nhwc = Transpose<perm=[0, 2, 3, 1]>(e)
    s = Shape(nhwc)
    b = Slice(s, zero, one)
    hh = Slice(s, one, two)
    ww = Slice(s, two, three)
    nh = Div(hh, win)
    nw = Div(ww, win)
    shape6 = Concat<axis=0>(b, nh, win, nw, win, c4)
    x = Reshape(nhwc, shape6)
    t = Transpose<perm=[0, 1, 3, 2, 4, 5]>(x)
    shape4 = Concat<axis=0>(m1, win, win, c4)
    windows = Reshape(t, shape4)
}}"""

# 16x16 patches, a class token and a position embedding for 16 patches: 64x64 images
# (the size the model was exported at) are the ones that run as squares.
FIXED = f"""g (float[batch, 3, height, width] pixel_values) => (float[?] h)
    <float[8, 3, 16, 16] w = {{{_floats(8 * 3 * 16 * 16)}}},
     float[1, 17, 8] pos = {{{_floats(17 * 8, 0.5)}}}, float[1, 1, 8] cls = {{{_floats(8)}}},
     int64[3] s3 = {{0, 8, -1}}, int64[1] zero = {{0}}, int64[1] one = {{1}}> {{
    e = Conv<strides=[16, 16], kernel_shape=[16, 16]>(pixel_values, w)
    f = Reshape(e, s3)
    t = Transpose<perm=[0, 2, 1]>(f)
    s = Shape(pixel_values)
    b = Slice(s, zero, one)
    cs = Concat<axis=0>(b, one, one)
    c = Expand(cls, cs)
    x = Concat<axis=1>(c, t)
    h = Add(x, pos)
}}"""

# Runs only for N*M == 35: nothing in the dims says so.
NOTHING = """g (float[N, M] x) => (y) <int64[2] s = {5, 7}> { y = Reshape(x, s) }"""


def _inferred(text: str) -> ir.Model:
    return infer_symbolic_shapes(model_from_text(text))


def _ran(report) -> list[dict[str, int]]:
    """The sizes of the runs that succeeded (not the edges)."""
    failed = {str(b) for b in report.bindings if any(str(b) in e for e in report.errors)}
    edges = [dict(e.binding) for e in report.edges]
    return [b for b in report.bindings if str(b) not in failed and b not in edges]


# ----------------------------------------------------------------------------------------
# The decoder: a sum of two dims before a product, and the edges
# ----------------------------------------------------------------------------------------
def test_decoder_sizes_follow_the_sum_not_the_product_the_dims_use_most():
    m = _inferred(DECODER)
    plan = SizePlan.of(m.graph)
    texts = [g.text for g in candidate_relations([m], plan)]
    sum_ = texts.index("total_seq_len = past_seq_len+seq_len")
    assert sum_ < texts.index("total_seq_len = batch*(past_seq_len+seq_len)")
    assert sum_ == 0
    # The product runs too (the mask is sliced to the keys): only the order avoids it.
    product = plan.with_relation(
        "total_seq_len", expr.parse_dim("batch*(past_seq_len+seq_len)"), "test"
    )
    assert verify_model(m, runs=0, bindings=[product.draw(random.Random(0), (2, 8))]).ok

    report = verify_model(m, runs=3, edges=True)
    assert report.ok, report.errors
    assert report.relations == [
        "total_seq_len = past_seq_len+seq_len (a min term compares them)"
    ]
    ran = _ran(report)
    assert len(ran) >= 3
    for b in ran:
        assert b["total_seq_len"] == b["past_seq_len"] + b["seq_len"]
        assert all(v >= 2 for v in b.values())
    # The guarantee: the edge sizes always run (under the relation).
    edges = {e.label: e for e in report.edges}
    assert {"all sizes 1", "past_seq_len=0", "seq_len=1", "batch=1"} <= edges.keys()
    for label in ("all sizes 1", "past_seq_len=0", "seq_len=1", "batch=1"):
        assert not edges[label].error, edges[label]
        sizes = edges[label].binding
        assert sizes["total_seq_len"] == sizes["past_seq_len"] + sizes["seq_len"]


def test_compare_models_follows_the_same_relation():
    report = compare_models(_inferred(DECODER), model_from_text(DECODER), runs=3)
    assert report.ok, report.errors
    assert report.relations == [
        "total_seq_len = past_seq_len+seq_len (a min term compares them)"
    ]
    assert all(b["total_seq_len"] == b["past_seq_len"] + b["seq_len"] for b in report.bindings)
    assert any(b["past_seq_len"] == 0 for b in report.bindings)  # prefill edge


def test_a_proven_equality_is_the_first_guess_on_a_real_export():
    # gpt2_kv_legacy's dims name total_seq_len only (anchors renamed past+seq to it);
    # optimize --verify used to adopt total_seq_len = batch*seq_len, which fitted one draw.
    path = "tests/data/gpt2_kv_legacy.onnx"
    original = infer_symbolic_shapes(path)
    facts = model_facts(original)
    assert [(str(a), str(b)) for a, b in facts] == [("past_seq_len+seq_len", "total_seq_len")]
    report = compare_models(original, ir.load(path), runs=3)
    assert report.ok, report.errors
    assert report.relations == ["total_seq_len = past_seq_len+seq_len (proven by inference)"]
    assert all(b["total_seq_len"] == b["past_seq_len"] + b["seq_len"] for b in report.bindings)


def test_a_past_pinned_at_zero_by_a_range_still_finds_the_relation():
    # --symbol-range past_seq_len=0:0 (prefill only): every draw has an empty cache, which
    # is what was asked for, not a degenerate draw that cannot validate a guess.
    pinned = {"past_seq_len": (0, 0)}
    report = compare_models(
        _inferred(DECODER), model_from_text(DECODER), runs=3, symbol_ranges=pinned
    )
    assert report.ok, report.errors
    assert report.runs >= 3
    assert report.relations == [
        "total_seq_len = past_seq_len+seq_len (a min term compares them)"
    ]
    for b in report.bindings:
        assert b["past_seq_len"] == 0 and b["total_seq_len"] == b["seq_len"]
    # Unpinned symbols still avoid degenerate sizes.
    plan = SizePlan.of(_inferred(DECODER).graph, ranges=pinned).with_relation(
        "total_seq_len", expr.parse_dim("past_seq_len+seq_len"), "test"
    )
    drawn = plan.draw(random.Random(0), (2, 8), degenerate=False)
    assert drawn["past_seq_len"] == 0
    assert min(drawn["batch"], drawn["seq_len"], drawn["total_seq_len"]) >= 2


# An audio encoder's first convolution: a 100-sample window, stride 10; no size drawn
# first (up to 64) runs.
LONG_WINDOW = f"""g (float[batch, 1, samples] audio) => (float[batch, 1, frames] y)
    <float[1, 1, 100] w = {{{_floats(100)}}}> {{
    c = Conv<strides=[10]>(audio, w)
    y = Relu(c)
}}"""


def test_a_window_longer_than_the_sizes_drawn_gives_the_least_size_that_runs():
    m = _inferred(LONG_WINDOW)
    plan = SizePlan.of(m.graph)
    texts = [g.text for g in candidate_relations([m], plan)]
    assert "samples >= 100" in texts
    report = verify_model(m, runs=2)
    assert report.ok, report.errors
    assert report.relations == ["samples >= 100 (the inferred dims subtract windows)"]
    assert all(b["samples"] >= 100 for b in _ran(report))


# ----------------------------------------------------------------------------------------
# A sliding window: a range of past_seq_len, not one fixed size
# ----------------------------------------------------------------------------------------
WINDOW_FACT = (
    expr.parse_dim("broadcast(past_seq_len+seq_len,seq_len+min(8,past_seq_len))"),
    expr.parse_dim("seq_len+min(8,past_seq_len)"),
)


def test_a_sliding_window_fact_bounds_the_past_before_fixing_sizes():
    # It holds for past_seq_len <= 8 whatever seq_len is (0 and 1 included), never for
    # past_seq_len = seq_len = 13: no symbol to solve for, no equal sizes.
    guesses = _solve(*WINDOW_FACT, "proven by inference", {}, True)
    assert [str(g) for g in guesses] == [
        "past_seq_len <= 8 (proven by inference)",
        "past_seq_len = seq_len = 2 (proven by inference)",  # the fallback, after
    ]
    bound = guesses[0]
    assert bound.ranges == (("past_seq_len", (None, 8)),) and not bound.defines
    assert bound.rank < guesses[1].rank
    # A proven definition still comes first.
    total = _solve(
        expr.parse_dim("total_seq_len"), expr.parse_dim("past_seq_len+seq_len"), "p", {}, True
    )
    assert total[0].rank < bound.rank
    # A lower bound: max(n, 4) == n holds from 4 on.
    n = expr.parse_dim("n")
    assert [g.text for g in _solve(expr.dmax(n, 4), n, "t", {}, True)] == ["n >= 4", "n = 4"]


def test_an_equality_that_always_holds_gives_no_guess():
    # mistral's other window facts hold for any sizes (min(8, ...) on both sides).
    a = expr.parse_dim("max(0,min(past_seq_len+seq_len,seq_len+8,8))")
    b = expr.parse_dim("min(seq_len+min(8,past_seq_len),8)")
    assert _solve(a, b, "proven by inference", {}, True) == []
    # whisper's dec_seq_len == max(dec_seq_len+min(1,dec_seq_len)-1,0): not "= 2".
    d = expr.parse_dim("dec_seq_len")
    e = expr.parse_dim("max(dec_seq_len+min(1,dec_seq_len)-1,0)")
    assert _solve(d, e, "Sub needs them equal", {}, False) == []
    # Sizes all equal still apply where only they make it hold.
    h4, w4 = expr.parse_dim("h//4"), expr.parse_dim("w//4")
    assert [g.text for g in _solve(h4, w4, "t", {}, True)] == ["h = w"]


def test_an_equality_with_a_common_factor_defines_the_symbol_not_the_multiple():
    # A decoder whose dim_params are "past_seq_len*2", "seq_len*2", "total_seq_len*2":
    # the proven 2*total == 2*(past+seq) gave no guess, and the guess read from the
    # dims, total = 2*(past+seq), ran (the mask is sliced) with false mismatches.
    a, b = expr.parse_dim("2*(past_seq_len+seq_len)"), expr.parse_dim("2*total_seq_len")
    guesses = _solve(a, b, "proven by inference", {}, True)
    assert [g.text for g in guesses][:1] == ["total_seq_len = past_seq_len+seq_len"]
    c, d = expr.parse_dim("2*(a//3)+4"), expr.parse_dim("2*b")
    assert [g.text for g in _solve(c, d, "t", {}, True)][:1] == ["b = a//3+2"]


def test_a_bound_keeps_draws_in_range_and_the_edges():
    bound = _solve(*WINDOW_FACT, "proven by inference", {}, True)[0]
    plan = _plan("past_seq_len", "seq_len").with_guess(bound)
    assert plan.ranges == {"past_seq_len": (None, 8)}
    assert plan.relations == ["past_seq_len <= 8 (proven by inference)"]
    rng = random.Random(0)
    for size_range in ((2, 8), (8, 32), (32, 64)):
        draws = [plan.draw(rng, size_range) for _ in range(20)]
        assert all(d["past_seq_len"] <= 8 for d in draws)
        assert all(d["seq_len"] >= size_range[0] for d in draws)
    assert len({plan.draw(rng, (2, 8))["past_seq_len"] for _ in range(30)}) >= 4
    # The edges all stay: 0 and 1 are within the range.
    edges = dict(plan.edges(rng, (2, 8)))
    assert list(edges) == [
        "all sizes 1", "past_seq_len=0", "seq_len=0", "past_seq_len=1", "seq_len=1"
    ]  # fmt: skip
    assert all(e["past_seq_len"] <= 8 for e in edges.values())
    # A lower bound drops the edges below it.
    lower = plan.with_guess(Guess("seq_len >= 4", "t", ranges=(("seq_len", (4, None)),)))
    assert list(dict(lower.edges(rng, (2, 8)))) == ["past_seq_len=0", "past_seq_len=1"]
    assert all(lower.draw(rng, (2, 8))["seq_len"] >= 4 for _ in range(20))


def test_guess_ranges_intersect_and_count_in_the_key():
    plan = _plan("a", "b")
    plan.ranges = {"a": (1, 20)}
    upper = Guess("a <= 8", "t", ranges=(("a", (None, 8)),))
    assert plan.with_guess(upper).ranges == {"a": (1, 8)}
    four = Guess("a <= 4", "t", ranges=(("a", (None, 4)),))
    assert plan.with_guess(upper).with_guess(four).ranges == {"a": (1, 4)}
    assert plan.with_guess(Guess("a >= 30", "t", ranges=(("a", (30, None)),))) is None
    assert plan.with_guess(Guess("c <= 4", "t", ranges=(("c", (None, 4)),))) is None
    # A size outside the range is refused, one inside kept.
    both = ("a", (None, 8))
    assert plan.with_guess(Guess("a = 12", "t", (("a", 12),), ranges=(both,))) is None
    six = plan.with_guess(Guess("a = 6", "t", (("a", 6),), ranges=(both,)))
    assert six.derived == {"a": 6}
    b_is_a = Guess("b = a", "t", (("b", expr.sym("a")),))
    assert b_is_a.key != Guess("b = a", "t", b_is_a.defines, ranges=(both,)).key


def test_a_sliding_window_decoder_runs_past_sizes_up_to_the_window(tmp_path, capsys):
    m = _inferred(SLIDING)
    facts = model_facts(m)
    assert [(str(a), str(b)) for a, b in facts] == [tuple(str(d) for d in WINDOW_FACT)]
    texts = [g.text for g in candidate_relations([m], SizePlan.of(m.graph), facts)]
    # The range alone, then with each other guess; the fixed sizes after.
    assert texts[:2] == [
        "past_seq_len <= 8",
        "past_seq_len <= 8, total_seq_len = past_seq_len+seq_len",
    ]
    assert texts.index("past_seq_len = seq_len = 2") > 2

    report = verify_model(m, runs=3, edges=True)
    assert report.ok, report.errors
    relation = "past_seq_len <= 8, total_seq_len = past_seq_len+seq_len"
    assert report.relations == [f"{relation} (proven by inference; a min term compares them)"]
    ran = _ran(report)
    assert len(ran) >= 3
    assert all(b["past_seq_len"] <= 8 for b in ran)
    assert all(b["total_seq_len"] == b["past_seq_len"] + b["seq_len"] for b in ran)
    assert len({b["past_seq_len"] for b in ran}) >= 2  # not one fixed size
    edges = {e.label: e for e in report.edges}
    labels = ("all sizes 1", "past_seq_len=0", "seq_len=0", "past_seq_len=1", "seq_len=1")
    assert set(labels) <= edges.keys()
    assert all(not edges[label].error for label in labels)

    path = tmp_path / "sliding.onnx"
    ir.save(model_from_text(SLIDING), path)
    assert cli.main(["optimize", str(path), "--verify"]) == 0
    out = capsys.readouterr().out
    assert f"sizes follow {relation}" in out
    assert "0 differences" in out


# ----------------------------------------------------------------------------------------
# Images: divisibility of the image sizes, never a relation between batch and them
# ----------------------------------------------------------------------------------------
def test_patches_need_multiples_of_16():
    m = _inferred(PATCHES)
    guesses = candidate_relations([m], SizePlan.of(m.graph))
    assert guesses[0].text == "height, width multiples of 16"
    texts = [g.text for g in guesses]
    batch = [i for i, t in enumerate(texts) if t.startswith("batch = ")]
    multiples = [i for i, t in enumerate(texts) if "multiples of" in t]
    assert max(multiples) < min(batch)  # batch = (height//16)*(width//16) comes last
    report = verify_model(m, runs=3, edges=True)
    assert report.ok, report.errors
    assert report.relations == [
        "height, width multiples of 16 (the inferred dims divide by 16)"
    ]
    ran = _ran(report)
    assert len(ran) >= 3
    assert all(b["height"] % 16 == 0 and b["width"] % 16 == 0 and b["batch"] >= 2 for b in ran)
    assert len({(b["height"], b["width"]) for b in ran}) >= 3  # independent draws
    assert {"all sizes 1", "batch=0", "height=0", "width=0", "batch=1"} <= {
        e.label for e in report.edges
    }


def test_windows_need_multiples_of_32_and_the_cli_finds_them(tmp_path, capsys):
    path = tmp_path / "windows.onnx"
    ir.save(model_from_text(WINDOWS), path)
    report = tmp_path / "r.json"
    assert cli.main(["infer", str(path), "--verify", "--json", str(report)]) == 0
    out = capsys.readouterr().out
    assert "sizes follow height, width multiples of 32" in out
    verify = json.loads(report.read_text())["verify"]
    assert verify["mismatches"] == [] and verify["runs"] >= 3
    assert [e["label"] for e in verify["edges"]][:2] == ["all sizes 1", "batch=0"]
    # Multiples of 4 (the stride, also divided by) come first and fail on 4, 8, 12.
    m = _inferred(WINDOWS)
    texts = [g.text for g in candidate_relations([m], SizePlan.of(m.graph))]
    assert texts.index("height, width multiples of 4") < texts.index(
        "height, width multiples of 32"
    )
    assert cli.main(["optimize", str(path), "--verify"]) == 0
    assert "sizes follow height, width multiples of 32" in capsys.readouterr().out


def test_a_fixed_position_embedding_gives_the_one_square_size():
    report = verify_model(_inferred(FIXED), runs=3, edges=True)
    assert report.ok, report.errors
    assert report.relations == ["height = width = 64 (Add needs them equal)"]
    ran = _ran(report)
    assert len({b["batch"] for b in ran}) >= 3
    assert all(b["height"] == b["width"] == 64 for b in ran)


def test_a_kv_cache_is_not_an_image():
    m = _inferred(DECODER)
    assert not any(
        "multiple" in g.text for g in candidate_relations([m], SizePlan.of(m.graph))
    )


# ----------------------------------------------------------------------------------------
# The search itself: validation, degenerate sizes
# ----------------------------------------------------------------------------------------
def _plan(*names: str) -> SizePlan:
    text = ", ".join(f"float[{n}] {n.lower()}_in" for n in names)
    graph = model_from_text(f"g ({text}) => (y) {{ y = Identity({names[0].lower()}_in) }}")
    return SizePlan.of(graph.graph)


def test_a_guess_that_fits_one_draw_by_chance_is_not_adopted():
    plan = _plan("a", "b", "c")
    lucky = Guess("c = a*b", "test", (("c", expr.parse_dim("a*b")),))
    right = Guess("c = a+b", "test", (("c", expr.parse_dim("a+b")),))
    calls: list[tuple[str, dict]] = []

    def attempt(sizes: dict[str, int], record: bool) -> str:
        # The lucky guess fits its first draw only; the right one fits every draw.
        under = "lucky" if sizes["c"] == sizes["a"] * sizes["b"] else "right"
        calls.append((under, sizes))
        if sizes["c"] == sizes["a"] + sizes["b"]:
            return ""
        if under == "lucky" and sum(1 for u, _ in calls if u == "lucky") == 1:
            return ""
        return "refused"

    search = find_sizes(plan, attempt, random.Random(0), lambda p: [lucky, right])
    assert search.found and search.adopted == right
    assert plan.relations == [] and search.plan.relations == ["c = a+b (test)"]
    assert any(what == "c = a*b" for what, _, _ in search.tried)
    # Three draws with distinct sizes validated the right guess.
    validated = [s for u, s in calls if s["c"] == s["a"] + s["b"]]
    assert len({tuple(sorted(s.items())) for s in validated}) >= 3


def test_sizes_that_collapse_to_zero_do_not_validate_a_guess():
    # b = a//16 is 0 for every a in 2..8: an empty tensor runs anywhere, proves nothing.
    plan = _plan("a", "b")
    collapse = Guess("b = a//16", "test", (("b", expr.parse_dim("a//16")),))
    guessed = plan.with_guess(collapse)
    assert guessed.draw(random.Random(0), (2, 8), degenerate=False) is None
    assert guessed.draw(random.Random(0), (2, 8))["b"] == 0  # the lenient fallback
    ran = []

    def attempt(sizes: dict[str, int], record: bool) -> str:
        ran.append(sizes)
        return "" if 0 in sizes.values() else "refused"

    search = find_sizes(plan, attempt, random.Random(0), lambda p: [collapse])
    assert not search.found and search.adopted is None
    assert all(s["b"] >= 2 for s in ran[3:])  # the guess's draws never collapsed


def test_validation_draws_take_consecutive_multiples():
    plan = _plan("h", "w").with_guess(
        Guess("h, w multiples of 16", "t", (), (("h", 16), ("w", 16)))
    )
    rng = random.Random(0)
    assert [plan.draw(rng, (2, 8), variant=i)["h"] for i in range(3)] == [16, 32, 48]
    assert [plan.draw(rng, (32, 64), variant=i)["w"] for i in range(3)] == [32, 48, 64]
    assert all(plan.draw(rng, (2, 8))["h"] % 16 == 0 for _ in range(20))
    # Edges keep their fixed sizes (h = 1 is tried though no multiple); the rest follows.
    edges = dict(plan.edges(rng, (2, 8)))
    assert list(edges) == ["all sizes 1", "h=0", "w=0", "h=1", "w=1"]
    assert edges["all sizes 1"] == {"h": 1, "w": 1}
    assert edges["h=1"]["h"] == 1 and edges["h=1"]["w"] % 16 == 0


# ----------------------------------------------------------------------------------------
# When nothing runs
# ----------------------------------------------------------------------------------------
def test_nothing_runs_says_which_sizes_were_tried_and_what_onnxruntime_said(tmp_path, capsys):
    report = verify_model(_inferred(NOTHING), runs=3)
    assert report.runs == 0
    summary = report.errors[0]
    assert len(summary) <= 300
    assert summary.startswith("no size assignment ran: tried independent sizes M=")
    assert "guessed relation" in summary and "M = N" in summary
    assert "onnxruntime said: Reshape node '': The input tensor cannot be reshaped" in summary
    assert summary.endswith("--verify-sizes M=...,N=...")
    assert any(e.startswith("guess M = N: onnxruntime failed under {") for e in report.errors)

    path = tmp_path / "nothing.onnx"
    ir.save(model_from_text(NOTHING), path)
    assert cli.main(["infer", str(path), "--verify", "-q"]) == 1
    err = capsys.readouterr().err
    assert "run failed: no size assignment ran: tried independent sizes" in err
    assert "--verify-sizes M=...,N=..." in err
    assert (
        cli.main(["infer", str(path), "--verify-runs", "0", "--verify-sizes", "N=5,M=7"]) == 0
    )


def test_onnxruntime_errors_lose_their_boilerplate():
    raw = (
        "[ONNXRuntimeError] : 1 : FAIL : Non-zero status code returned while running Add "
        "node. Name:'/model/Add_3' Status Message: /onnxruntime_src/onnxruntime/core/"
        "providers/cpu/math/element_wise_ops.h:563 void onnxruntime::BroadcastIterator::"
        "Init(ptrdiff_t, ptrdiff_t) axis == 1 || axis == largest was false. Attempting to "
        "broadcast an axis by a dimension other than 1. 5 by 13\n"
    )
    assert short_error(raw) == (
        "Add node '/model/Add_3': Attempting to broadcast an axis by a dimension other "
        "than 1. 5 by 13"
    )
    assert short_error("plain") == "plain"


@pytest.mark.parametrize("text", ["-1", "?"])
def test_an_input_dim_that_names_no_dim_is_drawn_like_an_unnamed_one(text, capsys):
    # A dim_param "-1" (some converters write it for "any size") was read as the size -1:
    # "no assignment of the input symbols gives valid input dims", nothing ran.
    model = model_from_text(
        """
        g (float[N, 4] x, float[M, 4] y) => (float[N, 4] a, float[M, 4] b) {
            a = Relu(x)
            b = Neg(y)
        }"""
    )
    for value in model.graph.inputs:
        value.shape = ir.Shape([text, 4])
    infer_symbolic_shapes(model)
    report = verify_model(model, runs=2, edges=True)
    assert report.runs >= 2 and not report.mismatches
    assert compare_models(model, model, runs=2).runs >= 2


def test_facts_and_runs_of_a_graph_whose_nodes_are_not_sorted():
    # convert_float_to_float16(keep_io_types=True) appends the input casts after their
    # users; Model.clone refused such a graph and --verify failed with an internal error.
    proto = onnx.parser.parse_model(
        """
        <ir_version: 10, opset_import: ["" : 18]>
        g (float[N, 4] x, float[M, 4] y) => (float[N, 4] z) {
            z = Add(a, b)
            a = Neg(x)
            b = Relu(y)
        }"""
    )
    model = ir.serde.deserialize_model(proto)
    assert [n.op_type for n in model.graph] == ["Add", "Neg", "Relu"]
    assert model_facts(model)  # N == M, from the Add
    report = verify_model(model, runs=2)
    assert report.runs >= 2 and not report.mismatches


def test_facts_on_opaque_dim_params_speak_of_the_texts_the_sizes_are_drawn_for():
    # A decoder whose dim_params are not expressions ("past len"): inference proves
    # total = past + seq under readable names (total_len), the sizes are drawn for the
    # texts, so the fact never applied and --verify reported false mismatches.
    model = model_from_text(
        """
        g (float[B, "seq len", 4] k, float[B, "past len", 4] past,
           float[B, "total len"] mask) => (float[B, "total len", 4] present, float[?, ?] s) {
            present = Concat<axis=1>(past, k)
            ax = Constant<value=int64[1] {2}>()
            r = ReduceSum<keepdims=0>(present, ax)
            s = Add(r, mask)
        }"""
    )
    facts = model_facts(model)
    assert facts
    names = {
        n for a, b in facts for d in (a, b) if isinstance(d, expr.DimExpr) for n in d.symbols()
    }
    assert names <= {"B", "seq len", "past len", "total len"}, names
    report = verify_model(infer_symbolic_shapes(model), runs=3)
    assert report.runs >= 3 and not report.mismatches, report.mismatches
