"""``analyze(model, previous)``: between rounds only the nodes created since are inferred.

The facts of a node the earlier analysis saw are kept (every rewrite keeps the meaning
of the values it leaves), new nodes get facts on top of them, and the pipeline's result
is the same as with a full analysis every round.
"""

from __future__ import annotations

import pathlib

import onnx
import onnx_ir as ir
import pytest

import onnx_symdims
from onnx_symdims.passes import SymbolicShapeInferencePass
from onnx_symdims.rewrite import OptimizePass, analyze
from onnx_symdims.rewrite import _pipeline as pipeline
from onnx_symdims.shapes import ShapesContext
from tests.rewrite._rewrite_testing import model

DATA = pathlib.Path(__file__).resolve().parents[1] / "data"
BUNDLED = pathlib.Path(onnx_symdims.__file__).parent / "data"


def _text(shape) -> list[str]:
    return [str(d) for d in shape]


def test_new_nodes_get_facts_and_known_nodes_keep_theirs():
    m = model("""
        g (float[N, 4] x) => (float[4, N] t) {
            t = Transpose <perm = [1, 0]> (x)
        }
    """)
    facts = analyze(m)
    transpose = next(iter(m.graph))
    t = transpose.outputs[0]
    assert _text(facts.shape(t)) == ["4", "N"]
    # A rewrite adds a node; the old one is changed in place against the contract
    # (same perm as identity), which shows its facts are not inferred again.
    transpose.attributes["perm"] = ir.AttrInt64s("perm", [0, 1])
    neg = ir.node("Neg", [t])
    m.graph.append(neg)
    again = analyze(m, facts)
    assert again.context is facts.context
    assert _text(again.shape(t)) == ["4", "N"]  # kept, not re-inferred
    assert _text(again.shape(neg.outputs[0])) == ["4", "N"]  # new: inferred
    assert neg in again.nodes and transpose in again.nodes
    fresh = analyze(m)
    assert _text(fresh.shape(t)) == ["N", "4"]  # a full analysis sees the change


def test_what_a_rewrite_wrote_on_a_new_value_is_not_taken_as_proven():
    m = model("""
        g (float[N, 4] x) => (float[N, 4] y) {
            y = Relu(x)
        }
    """)
    facts = analyze(m)
    relu = next(iter(m.graph))
    neg = ir.node("Neg", [relu.outputs[0]])
    neg.outputs[0].shape = ir.Shape([7, 4])  # wrong on purpose
    m.graph.append(neg)
    again = analyze(m, facts)
    assert _text(again.shape(neg.outputs[0])) == ["N", "4"]
    assert str(neg.outputs[0].shape) == "[N,4]"


def test_a_known_node_whose_branch_has_a_new_node_is_inferred_again():
    m = model("""
        g (bool c, float[N, 4] x) => (float[N, 4] y) {
            y = If (c) <
                then_branch = t () => (float[N, 4] a) { a = Relu(x) },
                else_branch = e () => (float[N, 4] b) { b = Neg(x) }
            >
        }
    """)
    facts = analyze(m)
    if_node = next(iter(m.graph))
    then_branch = if_node.attributes["then_branch"].as_graph()
    relu = next(iter(then_branch))
    added = ir.node("Abs", [relu.outputs[0]])
    then_branch.append(added)
    then_branch.outputs[0] = added.outputs[0]
    again = analyze(m, facts)
    assert str(added.outputs[0].shape) == "[N,4]"
    assert added in again.nodes


def test_known_nodes_need_their_context():
    with pytest.raises(ValueError, match="known_nodes needs the context"):
        SymbolicShapeInferencePass(known_nodes=set())
    SymbolicShapeInferencePass(context=ShapesContext(), known_nodes=set())


@pytest.mark.parametrize("name", ["tiny_decoder"])
def test_optimize_gives_the_same_model_as_with_full_analyses(name, monkeypatch):
    incremental, full = _optimized_both_ways(name, monkeypatch)
    assert onnx.printer.to_text(ir.serde.serialize_model(incremental)) == onnx.printer.to_text(
        ir.serde.serialize_model(full)
    )


@pytest.mark.parametrize("name", ["gpt2_kv_legacy", "t5_encoder_legacy"])
def test_incremental_facts_may_know_more_than_a_full_analysis(name, monkeypatch):
    """Facts of the original model kept across rounds can prove what the rewritten one no
    longer shows: in GPT-2's MLP, ``Reshape(Gemm(...), [-1, s, 32])`` of an empty batch
    reads as a case split in the rewritten model, while the original proved ``seq_len``
    (they hold on every run of the original, which is what a rewrite must preserve;
    tests/integration/test_optimize_models.py runs the result in onnxruntime). So
    ReuseEqualValues finds more equal values with them, never fewer. (In T5 the original's
    ``seq_len >= 1`` once let the padding mask's ``Unsqueeze`` and ``Reshape`` collapse
    with a ``-1``; DropLeadingOnesBeforeBroadcast now drops that view in both ways.)"""
    incremental, full = _optimized_both_ways(name, monkeypatch)
    assert len(list(incremental.graph)) <= len(list(full.graph))
    if name == "gpt2_kv_legacy":
        assert len(list(incremental.graph)) < len(list(full.graph))


def _optimized_both_ways(name: str, monkeypatch) -> tuple[ir.Model, ir.Model]:
    path = DATA / f"{name}.onnx"
    if not path.exists():
        path = BUNDLED / f"{name}.onnx"
    incremental = ir.load(path)
    OptimizePass()(incremental)
    monkeypatch.setattr(pipeline, "analyze", lambda m, previous=None: analyze(m))
    full = ir.load(path)
    OptimizePass()(full)
    return incremental, full


def test_dead_nodes_go_and_nodes_used_by_outputs_or_subgraphs_stay():
    m = model("""
        g (bool c, float[N] x) => (float[N] y, float[N] z) {
            dead1 = Neg(x)
            dead2 = Abs(dead1)
            outer = Relu(x)
            z = Sigmoid(x)
            y = If (c) <
                then_branch = t () => (float[N] a) { unused = Exp(x)  a = Identity(outer) },
                else_branch = e () => (float[N] b) { b = Neg(x) }
            >
        }
    """)
    removed = pipeline.remove_dead_nodes(m.graph)
    assert removed == 3
    assert [n.op_type for n in m.graph] == ["Relu", "Sigmoid", "If"]
    then_branch = m.graph.node(2).attributes["then_branch"].as_graph()
    assert [n.op_type for n in then_branch] == ["Identity"]


def test_a_dead_branch_node_frees_the_outer_value_it_alone_read():
    """The branch is swept when its If is reached, before the producers before it."""
    m = model("""
        g (bool c, float[N] x) => (float[N] y) {
            only_for_dead = Exp(x)
            y = If (c) <
                then_branch = t () => (float[N] a) { unused = Neg(only_for_dead)  a = Identity(x) },
                else_branch = e () => (float[N] b) { b = Neg(x) }
            >
        }
    """)
    assert pipeline.remove_dead_nodes(m.graph) == 2
    assert [n.op_type for n in m.graph] == ["If"]
