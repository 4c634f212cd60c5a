"""How ``--verify`` finds input sizes that run: relations between input dims, validated.

Each model reproduces, without torch, a kind of exported model on which independent
random sizes never run: a KV-cache decoder whose mask is sliced to the key length (any
``total_seq_len >= past_seq_len + seq_len`` runs, so a wrong relation such as
``total_seq_len = batch*(past_seq_len+seq_len)`` runs too), a vision transformer that
cuts images into 16x16 patches with a Reshape, a Swin-style 8x8 window partition after a
stride-4 patch embedding (sizes multiples of 32), and a vision transformer with a fixed
position embedding (one image size).
"""

from __future__ import annotations

import json
import random

import onnx_ir as ir
import pytest

from onnx_symdims import cli, expr, infer_symbolic_shapes
from onnx_symdims._verify_sizes import (
    Guess,
    SizePlan,
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
