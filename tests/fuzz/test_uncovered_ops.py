"""Inferred dims against onnxruntime for the ops the random generator does not draw.

``tests/fuzz/graph_gen.py`` builds exporter-like graphs from about 90 ONNX ops; the
registry has hooks for about 185. Each case here is a small graph of such an op (signal
windows and DFT, Col2Im, quantized matmul and conv, sequences and optionals, scatter,
unpooling, normalizations, bitwise ops, ...) whose sizes come from a symbolic input
``x[N, M]`` through ``Shape``/``Size`` arithmetic, checked by ``oracle.check_case`` on
sizes 0, 1 and more: every dim the engine writes must be the size onnxruntime computes,
in every binding that onnxruntime and the ONNX reference both run.
"""

from __future__ import annotations

import logging
import warnings

import pytest

from tests.fuzz import oracle

HEADER = '<ir_version: 10, opset_import: ["" : {opset}]>\n'
BINDINGS = [{"N": n, "M": m} for n in (0, 1, 3) for m in (1, 2, 4)]

#: (name, opset, graph): ``x`` is fed float data (``graph_gen.make_feed``); a graph
#: needing integers casts it.
CASES = [
    (
        "eyelike_k",
        21,
        """
        g (float[N,M] x) => (float[] y) { y = EyeLike<k=-1>(x) }
        """,
    ),
    (
        "eyelike_int",
        21,
        """
        g (float[N,M] x) => (int32[] y) { y = EyeLike<k=3, dtype=6>(x) }
        """,
    ),
    (
        "col2im",
        21,
        """
        g (float[N,M] x) => (float[] y) {
        _k1 = Constant<value = int64[3] {1, 1, -1}>()
        a = Reshape(x, _k1)
        t = Concat<axis=2>(a, a, a, a)
        _k2 = Constant<value = int64[3] {1, 4, -1}>()
        r = Reshape(t, _k2)
        s = Shape(x)
        l = ReduceProd<keepdims=1>(s)
        one = Constant<value=int64[1] {1}>()
        img = Concat<axis=0>(l, one)
        _k3 = Constant<value = int64[2] {1, 0}>()
        img2 = Add(img, _k3)
        blk = Constant<value=int64[2] {2, 1}>()
        y = Col2Im(r, img2, blk) }
        """,
    ),
    (
        "dft17",
        17,
        """
        g (float[N,M] x) => (float[] y) {
        _k1 = Constant<value = int64[1] {-1}>()
        a = Unsqueeze(x, _k1)
        y = DFT<axis=1, onesided=1>(a) }
        """,
    ),
    (
        "dft17_len",
        17,
        """
        g (float[N,M] x) => (float[] y) {
        _k1 = Constant<value = int64[1] {-1}>()
        a = Unsqueeze(x, _k1)
        s = Shape(x)
        _k2 = Constant<value = int64[1] {0}>()
        n = Gather<axis=0>(s, _k2)
        nn = Squeeze(n)
        y = DFT<axis=1, onesided=0>(a, nn) }
        """,
    ),
    (
        "dft20_axis",
        21,
        """
        g (float[N,M] x) => (float[] y) {
        _k1 = Constant<value = int64[1] {-1}>()
        a = Unsqueeze(x, _k1)
        ax = Constant<value=int64 {-2}>()
        y = DFT<onesided=1>(a, , ax) }
        """,
    ),
    (
        "dft20_len_inv",
        21,
        """
        g (float[N,M] x) => (float[] y) {
        _k1 = Constant<value = int64[1] {-1}>()
        a = Unsqueeze(x, _k1)
        z = Concat<axis=-1>(a, a)
        ax = Constant<value=int64 {0}>()
        s = Shape(x)
        _k2 = Constant<value = int64[1] {1}>()
        n = Gather<axis=0>(s, _k2)
        nn = Squeeze(n)
        y = DFT<inverse=1>(z, nn, ax) }
        """,
    ),
    (
        "hann",
        21,
        """
        g (float[N,M] x) => (float[] y) {
        s = Size(x)
        y = HannWindow<periodic=0>(s) }
        """,
    ),
    (
        "hamming_dt",
        21,
        """
        g (float[N,M] x) => (double[] y) {
        s = Shape(x)
        _k1 = Constant<value = int64[1] {0}>()
        n = Gather<axis=0>(s, _k1)
        nn = Squeeze(n)
        y = HammingWindow<output_datatype=11>(nn) }
        """,
    ),
    (
        "blackman",
        21,
        """
        g (float[N,M] x) => (float[] y) {
        s = Shape(x)
        n = ReduceSum<keepdims=0>(s)
        y = BlackmanWindow(n) }
        """,
    ),
    (
        "mel",
        21,
        """
        g (float[N,M] x) => (float[] y) {
        s = Shape(x)
        nb = ReduceSum<keepdims=0>(s)
        dl = Constant<value=int64 {16}>()
        sr = Constant<value=int64 {8000}>()
        lo = Constant<value=float {0.0}>()
        hi = Constant<value=float {4000.0}>()
        y = MelWeightMatrix(nb, dl, sr, lo, hi) }
        """,
    ),
    (
        "mel_dl",
        21,
        """
        g (float[N,M] x) => (float[] y) {
        s = Shape(x)
        dl = ReduceSum<keepdims=0>(s)
        nb = Constant<value=int64 {3}>()
        sr = Constant<value=int64 {8000}>()
        lo = Constant<value=float {0.0}>()
        hi = Constant<value=float {4000.0}>()
        y = MelWeightMatrix(nb, dl, sr, lo, hi) }
        """,
    ),
    (
        "reverse_seq",
        21,
        """
        g (float[N,M] x) => (float[] y) {
        s = Shape(x)
        _k1 = Constant<value = int64[1] {1}>()
        n = Gather<axis=0>(s, _k1)
        l = Expand(n, n)
        one = Constant<value=int64[1] {1}>()
        y = ReverseSequence<batch_axis=1, time_axis=0>(x, l) }
        """,
    ),
    (
        "scatternd",
        21,
        """
        g (float[N,M] x) => (float[] y) {
        i = Constant<value=int64[1,1] {0}>()
        _k1 = Constant<value = int64[1] {0}>()
        _k2 = Constant<value = int64[1] {1}>()
        _k3 = Constant<value = int64[1] {0}>()
        r = Slice(x, _k1, _k2, _k3)
        y = ScatterND(x, i, r) }
        """,
    ),
    (
        "scatter_elements",
        21,
        """
        g (float[N,M] x) => (float[] y) {
        _k1 = Constant<value = int64[1] {0}>()
        _k2 = Constant<value = int64[1] {1}>()
        _k3 = Constant<value = int64[1] {0}>()
        r = Slice(x, _k1, _k2, _k3)
        z = Mul(r, r)
        i = Cast<to=7>(z)
        y = ScatterElements<axis=0, reduction="add">(x, i, r) }
        """,
    ),
    (
        "maxunpool",
        21,
        """
        g (float[N,M] x) => (float[] y) {
        _k1 = Constant<value = int64[4] {1, 1, -1, 1}>()
        a = Reshape(x, _k1)
        p, i = MaxPool<kernel_shape=[2,1], strides=[2,1], pads=[0,0,1,0]>(a)
        y = MaxUnpool<kernel_shape=[2,1], strides=[2,1], pads=[0,0,1,0]>(p, i) }
        """,
    ),
    (
        "maxunpool_os",
        21,
        """
        g (float[N,M] x) => (float[] y) {
        _k1 = Constant<value = int64[4] {1, 1, -1, 1}>()
        a = Reshape(x, _k1)
        p, i = MaxPool<kernel_shape=[2,1], strides=[2,1]>(a)
        os = Shape(a)
        y = MaxUnpool<kernel_shape=[2,1], strides=[2,1]>(p, i, os) }
        """,
    ),
    (
        "roialign",
        21,
        """
        g (float[N,M] x) => (float[] y) {
        _k1 = Constant<value = int64[4] {1, 1, -1, 1}>()
        a = Reshape(x, _k1)
        a2 = Concat<axis=3>(a, a, a)
        _k2 = Constant<value = int64[1] {0}>()
        _k3 = Constant<value = int64[1] {4}>()
        _k4 = Constant<value = int64[1] {1}>()
        r = Slice(x, _k2, _k3, _k4)
        rr = Abs(r)
        s = Shape(rr)
        _k5 = Constant<value = int64[1] {0}>()
        n = Gather<axis=0>(s, _k5)
        bi = ConstantOfShape<value=int64[1] {0}>(n)
        y = RoiAlign<output_height=2, output_width=3>(a2, rr, bi) }
        """,
    ),
    (
        "lpnorm",
        21,
        """
        g (float[N,M] x) => (float[] y) { y = LpNormalization<axis=0, p=1>(x) }
        """,
    ),
    (
        "instnorm",
        21,
        """
        g (float[N,M] x) => (float[] y) {
        _k1 = Constant<value = int64[1] {0}>()
        a = Unsqueeze(x, _k1)
        _k2 = Constant<value = int64[1] {0}>()
        _k3 = Constant<value = int64[1] {1}>()
        _k4 = Constant<value = int64[1] {0}>()
        sc = Slice(x, _k2, _k3, _k4)
        _k5 = Constant<value = int64[1] {0}>()
        s2 = Squeeze(sc, _k5)
        y = InstanceNormalization(a, s2, s2) }
        """,
    ),
    (
        "bn_train",
        21,
        """
        g (float[N,M] x) => (float[] y, float[] m, float[] v) {
        _k1 = Constant<value = int64[1] {0}>()
        _k2 = Constant<value = int64[1] {1}>()
        _k3 = Constant<value = int64[1] {0}>()
        sc = Slice(x, _k1, _k2, _k3)
        _k4 = Constant<value = int64[1] {0}>()
        s2 = Squeeze(sc, _k4)
        a = Transpose<perm=[1,0]>(x)
        y, m, v = BatchNormalization<training_mode=1>(x, s2, s2, s2, s2) }
        """,
    ),
    (
        "lrn",
        21,
        """
        g (float[N,M] x) => (float[] y) {
        _k1 = Constant<value = int64[4] {0, 0, 1, 1}>()
        a = Reshape(x, _k1)
        y = LRN<size=3>(a) }
        """,
    ),
    (
        "mvn",
        21,
        """
        g (float[N,M] x) => (float[] y) {
        _k1 = Constant<value = int64[4] {0, 0, 1, 1}>()
        a = Reshape(x, _k1)
        y = MeanVarianceNormalization(a) }
        """,
    ),
    (
        "dropout_mask",
        21,
        """
        g (float[N,M] x) => (float[] y, bool[] m) {
        y, m = Dropout(x) }
        """,
    ),
    (
        "dropout_train0",
        21,
        """
        g (float[N,M] x) => (float[] y, bool[] m) {
        r = Constant<value=float {0.0}>()
        t = Constant<value=bool {1}>()
        y, m = Dropout(x, r, t) }
        """,
    ),
    (
        "dynq",
        21,
        """
        g (float[N,M] x) => (uint8[] y, float[] s, uint8[] z) {
        y, s, z = DynamicQuantizeLinear(x) }
        """,
    ),
    (
        "quant_block",
        21,
        """
        g (float[N,M] x) => (float[] y) {
        _k1 = Constant<value = int64[3] {0, -1, 2}>()
        a = Reshape(x, _k1)
        sc = Constant<value=float[1,1,1] {0.5}>()
        q = QuantizeLinear<axis=2, block_size=2>(a, sc)
        y = DequantizeLinear<axis=2, block_size=2>(q, sc) }
        """,
    ),
    (
        "matmulint",
        21,
        """
        g (float[N,M] x) => (int32[] y) {
        a = Cast<to=2>(x)
        t = Transpose<perm=[1,0]>(a)
        y = MatMulInteger(a, t) }
        """,
    ),
    (
        "matmulint_1d",
        21,
        """
        g (float[N,M] x) => (int32[] y) {
        a = Cast<to=2>(x)
        _k1 = Constant<value = int64[1] {0}>()
        _k2 = Constant<value = int64[1] {1}>()
        _k3 = Constant<value = int64[1] {0}>()
        s = Slice(a, _k1, _k2, _k3)
        _k4 = Constant<value = int64[1] {0}>()
        v = Squeeze(s, _k4)
        y = MatMulInteger(a, v) }
        """,
    ),
    (
        "qlinmatmul",
        21,
        """
        g (float[N,M] x) => (uint8[] y) {
        a = Cast<to=2>(x)
        t = Transpose<perm=[1,0]>(a)
        sc = Constant<value=float {0.5}>()
        zp = Constant<value=uint8 {1}>()
        y = QLinearMatMul(a, sc, zp, t, sc, zp, sc, zp) }
        """,
    ),
    (
        "convint",
        21,
        """
        g (float[N,M] x) => (int32[] y) {
        _k1 = Constant<value = int64[2] {0, 1}>()
        a = Unsqueeze(x, _k1)
        q = Cast<to=2>(a)
        w = Constant<value=uint8[2,1,2,1] {1,2,3,4}>()
        y = ConvInteger<pads=[1,0,0,0], strides=[2,1]>(q, w) }
        """,
    ),
    (
        "concat_from_seq",
        21,
        """
        g (float[N,M] x) => (float[] y) {
        s = SplitToSequence<axis=1, keepdims=0>(x)
        y = ConcatFromSequence<axis=0, new_axis=1>(s) }
        """,
    ),
    (
        "concat_from_seq2",
        21,
        """
        g (float[N,M] x) => (float[] y) {
        s = SplitToSequence<axis=1>(x)
        y = ConcatFromSequence<axis=-1, new_axis=1>(s) }
        """,
    ),
    (
        "split_to_seq_last",
        21,
        """
        g (float[N,M] x) => (float[] y) {
        two = Constant<value=int64 {2}>()
        s = SplitToSequence<axis=0>(x, two)
        m1 = Constant<value=int64 {-1}>()
        y = SequenceAt(s, m1) }
        """,
    ),
    (
        "seq_insert",
        21,
        """
        g (float[N,M] x) => (float[] y) {
        s = SequenceConstruct(x, x)
        t = Transpose<perm=[1,0]>(x)
        _k1 = Constant<value = int64[1] {0}>()
        _k2 = Constant<value = int64[1] {1}>()
        _k3 = Constant<value = int64[1] {0}>()
        z = Slice(x, _k1, _k2, _k3)
        s2 = SequenceInsert(s, z)
        y = ConcatFromSequence<axis=0>(s2) }
        """,
    ),
    (
        "seq_erase",
        21,
        """
        g (float[N,M] x) => (float[] y) {
        _k1 = Constant<value = int64[1] {0}>()
        _k2 = Constant<value = int64[1] {1}>()
        _k3 = Constant<value = int64[1] {0}>()
        z = Slice(x, _k1, _k2, _k3)
        s = SequenceConstruct(z, x, x)
        zero = Constant<value=int64 {0}>()
        s2 = SequenceErase(s, zero)
        y = ConcatFromSequence<axis=1>(s2) }
        """,
    ),
    (
        "optional",
        21,
        """
        g (float[N,M] x) => (float[] y, bool h) {
        o = Optional(x)
        h = OptionalHasElement(o)
        y = OptionalGetElement(o) }
        """,
    ),
    (
        "castlike",
        21,
        """
        g (float[N,M] x) => (int32[] y) {
        z = Constant<value=int32 {1}>()
        y = CastLike(x, z) }
        """,
    ),
    (
        "det",
        21,
        """
        g (float[N,M] x) => (float[] y) {
        _k1 = Constant<value = int64[2] {1, 2}>()
        a = Unsqueeze(x, _k1)
        y = Det(a) }
        """,
    ),
    (
        "det2",
        21,
        """
        g (float[N,M] x) => (float[] y) {
        t = Transpose<perm=[1,0]>(x)
        a = MatMul(x, t)
        y = Det(a) }
        """,
    ),
    (
        "bitshift",
        21,
        """
        g (float[N,M] x, float[M] z) => (uint8[] y) {
        a = Cast<to=2>(x)
        b = Cast<to=2>(z)
        y = BitShift<direction="LEFT">(a, b) }
        """,
    ),
    (
        "bitwise",
        21,
        """
        g (float[N,1] x, float[M] z) => (int32[] y) {
        a = Cast<to=6>(x)
        b = Cast<to=6>(z)
        c = BitwiseAnd(a, b)
        d = BitwiseNot(c)
        y = BitwiseXor(d, a) }
        """,
    ),
    (
        "prelu",
        21,
        """
        g (float[N,M] x, float[M] s) => (float[] y) { y = PRelu(x, s) }
        """,
    ),
    (
        "prelu_1",
        21,
        """
        g (float[N,M] x, float[1] s) => (float[] y) { y = PRelu(x, s) }
        """,
    ),
    (
        "xor_not",
        21,
        """
        g (float[N,1] x, float[M] z) => (bool[] y) {
        a = Cast<to=9>(x)
        b = Cast<to=9>(z)
        c = Xor(a, b)
        y = Not(c) }
        """,
    ),
    (
        "shrink_etc",
        21,
        """
        g (float[N,M] x) => (float[] y) {
        a = Shrink<lambd=1.0>(x)
        b = ThresholdedRelu(a)
        c = Softsign(b)
        d = Mish(c)
        e = HardSwish(d)
        y = Celu(e) }
        """,
    ),
    (
        "isinf_round",
        21,
        """
        g (float[N,M] x) => (bool[] y, float[] z) {
        y = IsInf(x)
        z = Round(x) }
        """,
    ),
]


@pytest.mark.parametrize(("name", "opset", "graph"), CASES, ids=[c[0] for c in CASES])
def test_uncovered_op_dims_match_onnxruntime(name: str, opset: int, graph: str) -> None:
    case = oracle.case_from_text(HEADER.format(opset=opset) + graph, BINDINGS)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        logging.disable(logging.ERROR)
        try:
            outcome = oracle.check_case(case)
        finally:
            logging.disable(logging.NOTSET)
    assert not outcome.findings, "\n\n".join(oracle.report(case, f) for f in outcome.findings)
    assert outcome.runs, f"{name}: no binding ran in onnxruntime: {outcome}"
