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


#: Attribute and opset variants of ops the generator draws in one form only: negative
#: axes, ``Shape`` bounds beyond the rank, ``Split`` by ``num_outputs``, ``Resize`` with
#: ``axes``, ``Pad`` ``wrap``, ``ceil_mode`` with dilations, ``ConvTranspose`` output
#: padding, empty ``Concat`` inputs, ``Einsum`` ellipses, reductions over empty axes, ...
CASES += [
    (
        "center_crop_pad_axes",
        18,
        """
        g (float[N,M] x) => (float[] y) {
        s = Constant<value=int64[1] {3}>()
        y = CenterCropPad<axes=[-1]>(x, s) }
        """,
    ),
    (
        "center_crop_pad_sym",
        18,
        """
        g (float[N,M] x) => (float[] y) {
        s = Shape(x)
        _k1 = Constant<value = int64[2] {1, -1}>()
        t = Add(s, _k1)
        y = CenterCropPad(x, t) }
        """,
    ),
    (
        "shape_start_end",
        15,
        """
        g (float[N,M] x) => (int64[] y, int64[] z, int64[] w) {
        y = Shape<start=-1>(x)
        z = Shape<start=-5, end=10>(x)
        w = Shape<start=1, end=-1>(x) }
        """,
    ),
    (
        "split_num_outputs",
        18,
        """
        g (float[N,M] x) => (float[] a, float[] b, float[] c) {
        a, b, c = Split<axis=0, num_outputs=3>(x) }
        """,
    ),
    (
        "split_num_outputs_neg",
        18,
        """
        g (float[N,M] x) => (float[] a, float[] b) {
        a, b = Split<axis=-1, num_outputs=2>(x) }
        """,
    ),
    (
        "split11_attr",
        11,
        """
        g (float[N,M] x) => (float[] a, float[] b) {
        c = Concat<axis=1>(x, x, x)
        a, b = Split<axis=1, split=[1, 2]>(c) }
        """,
    ),
    (
        "squeeze_neg",
        13,
        """
        g (float[N,M] x) => (float[] y) {
        _k1 = Constant<value = int64[2] {-1, 1}>()
        a = Unsqueeze(x, _k1)
        _k2 = Constant<value = int64[2] {-1, -3}>()
        y = Squeeze(a, _k2) }
        """,
    ),
    (
        "squeeze11",
        11,
        """
        g (float[N,M] x) => (float[] y) {
        a = Unsqueeze<axes=[-1, 0]>(x)
        y = Squeeze<axes=[0]>(a) }
        """,
    ),
    (
        "resize18_axes",
        18,
        """
        g (float[N,M] x) => (float[] y) {
        _k1 = Constant<value = int64[2] {0, 1}>()
        a = Unsqueeze(x, _k1)
        sc = Constant<value=float[2] {2.0, 0.5}>()
        y = Resize<axes=[2, 3], mode="nearest">(a, , sc) }
        """,
    ),
    (
        "resize11_scales",
        11,
        """
        g (float[N,M] x) => (float[] y) {
        a = Unsqueeze<axes=[0, 1]>(x)
        r = Constant<value=float[0] {}>()
        sc = Constant<value=float[4] {1.0, 1.0, 1.5, 2.5}>()
        y = Resize<mode="linear", coordinate_transformation_mode="align_corners">(a, r, sc) }
        """,
    ),
    (
        "grid_sample",
        20,
        """
        g (float[N,M] x) => (float[] y) {
        _k1 = Constant<value = int64[2] {0, 1}>()
        a = Unsqueeze(x, _k1)
        g0 = Constant<value=float[1,2,3,2] {0,0, 0.5,0.5, -1,1, 1,-1, 0.2,0.3, 0.9,0.1}>()
        y = GridSample(a, g0) }
        """,
    ),
    (
        "affine_grid",
        20,
        """
        g (float[N,M] x) => (float[] y) {
        th = Constant<value=float[1,2,3] {1,0,0, 0,1,0}>()
        s = Shape(x)
        one = Constant<value=int64[2] {1, 1}>()
        sz = Concat<axis=0>(one, s)
        y = AffineGrid(th, sz) }
        """,
    ),
    (
        "pad_wrap",
        19,
        """
        g (float[N,M] x) => (float[] y) {
        p = Constant<value=int64[4] {0, 1, 0, 2}>()
        y = Pad<mode="wrap">(x, p) }
        """,
    ),
    (
        "slice_neg_axes_steps",
        13,
        """
        g (float[N,M] x) => (float[] y) {
        _k1 = Constant<value = int64[2] {-1, 5}>()
        _k2 = Constant<value = int64[2] {-1000, -7}>()
        _k3 = Constant<value = int64[2] {-2, 1}>()
        _k4 = Constant<value = int64[2] {-2, -3}>()
        y = Slice(x, _k1, _k2, _k3, _k4) }
        """,
    ),
    (
        "tile_zero",
        13,
        """
        g (float[N,M] x) => (float[] y) {
        _k1 = Constant<value = int64[2] {0, 3}>()
        y = Tile(x, _k1) }
        """,
    ),
    (
        "onehot_neg_axis",
        11,
        """
        g (float[N,M] x) => (float[] y) {
        i = Cast<to=7>(x)
        d = Constant<value=int64 {4}>()
        v = Constant<value=float[2] {0.0, 1.0}>()
        y = OneHot<axis=-2>(i, d, v) }
        """,
    ),
    (
        "gather_elements_neg",
        13,
        """
        g (float[N,M] x) => (float[] y) {
        i = Constant<value=int64[1,1] {0}>()
        y = GatherElements<axis=-1>(x, i) }
        """,
    ),
    (
        "compress_noaxis",
        13,
        """
        g (float[N,M] x) => (float[] y) {
        c = Cast<to=9>(x)
        f = Flatten<axis=0>(c)
        _k1 = Constant<value = int64[1] {0}>()
        g0 = Squeeze(f, _k1)
        y = Compress(x, g0) }
        """,
    ),
    (
        "depth_to_space",
        13,
        """
        g (float[N,M] x) => (float[] y) {
        _k1 = Constant<value = int64[2] {2, 3}>()
        a = Unsqueeze(x, _k1)
        b = Concat<axis=1>(a, a, a, a)
        y = DepthToSpace<blocksize=2, mode="CRD">(b) }
        """,
    ),
    (
        "space_to_depth",
        13,
        """
        g (float[N,M] x) => (float[] y) {
        _k1 = Constant<value = int64[2] {0, 1}>()
        a = Unsqueeze(x, _k1)
        b = Concat<axis=2>(a, a)
        c = Concat<axis=3>(b, b)
        y = SpaceToDepth<blocksize=2>(c) }
        """,
    ),
    (
        "layernorm_stash",
        17,
        """
        g (float[N,M] x) => (float[] y, float[] m, float[] r) {
        sc = Constant<value=float {1.0}>()
        y, m, r = LayerNormalization<axis=-1>(x, sc) }
        """,
    ),
    (
        "layernorm_axis0",
        17,
        """
        g (float[N,M] x) => (float[] y, float[] m, float[] r) {
        sc = Constant<value=float {1.0}>()
        y, m, r = LayerNormalization<axis=0>(x, sc) }
        """,
    ),
    (
        "unique_axis",
        11,
        """
        g (float[N,M] x) => (float[] y, int64[] i, int64[] v, int64[] c) {
        y, i, v, c = Unique<axis=-1>(x) }
        """,
    ),
    (
        "reduce_noop_empty",
        18,
        """
        g (float[N,M] x) => (float[] y) {
        e = Constant<value=int64[0] {}>()
        y = ReduceSum<noop_with_empty_axes=1, keepdims=0>(x, e) }
        """,
    ),
    (
        "reduce_empty_all",
        18,
        """
        g (float[N,M] x) => (float[] y) {
        e = Constant<value=int64[0] {}>()
        y = ReduceMax<keepdims=1>(x, e) }
        """,
    ),
    (
        "argmax_last",
        13,
        """
        g (float[N,M] x) => (int64[] y) {
        y = ArgMax<axis=-1, keepdims=0, select_last_index=1>(x) }
        """,
    ),
    (
        "einsum_ellipsis",
        12,
        """
        g (float[N,M] x) => (float[] y) {
        y = Einsum<equation="...i,...i->...">(x, x) }
        """,
    ),
    (
        "einsum_bcast",
        12,
        """
        g (float[N,M] x) => (float[] y) {
        _k1 = Constant<value = int64[1] {0}>()
        _k2 = Constant<value = int64[1] {1}>()
        _k3 = Constant<value = int64[1] {0}>()
        a = Slice(x, _k1, _k2, _k3)
        y = Einsum<equation="...j,ij->...i">(a, x) }
        """,
    ),
    (
        "matmul_1d",
        13,
        """
        g (float[N,M] x) => (float[] y, float[] z) {
        _k1 = Constant<value = int64[1] {0}>()
        v = ReduceSum<keepdims=0>(x, _k1)
        y = MatMul(x, v)
        _k2 = Constant<value = int64[1] {1}>()
        w = ReduceSum<keepdims=0>(x, _k2)
        z = MatMul(w, x) }
        """,
    ),
    (
        "gemm_trans_bcast",
        13,
        """
        g (float[N,M] x) => (float[] y) {
        c = Constant<value=float[1] {1.0}>()
        y = Gemm<transA=1, transB=0, alpha=2.0>(x, x, c) }
        """,
    ),
    (
        "convT_output_shape",
        13,
        """
        g (float[N,M] x) => (float[] y) {
        _k1 = Constant<value = int64[2] {0, 1}>()
        a = Unsqueeze(x, _k1)
        w = Constant<value=float[1,1,2,2] {1,2,3,4}>()
        y = ConvTranspose<strides=[2,2], output_padding=[1,0]>(a, w) }
        """,
    ),
    (
        "convT_autopad",
        13,
        """
        g (float[N,M] x) => (float[] y) {
        _k1 = Constant<value = int64[2] {0, 1}>()
        a = Unsqueeze(x, _k1)
        w = Constant<value=float[1,1,3,2] {1,2,3,4,5,6}>()
        y = ConvTranspose<strides=[2,3], auto_pad="SAME_LOWER">(a, w) }
        """,
    ),
    (
        "maxpool_ceil_dil",
        13,
        """
        g (float[N,M] x) => (float[] y) {
        _k1 = Constant<value = int64[2] {0, 1}>()
        a = Unsqueeze(x, _k1)
        y = MaxPool<kernel_shape=[2,2], strides=[2,1], dilations=[1,2], ceil_mode=1>(a) }
        """,
    ),
    (
        "avgpool_ceil_pads",
        19,
        """
        g (float[N,M] x) => (float[] y) {
        _k1 = Constant<value = int64[2] {0, 1}>()
        a = Unsqueeze(x, _k1)
        y = AveragePool<kernel_shape=[3,1], strides=[2,1], pads=[1,0,1,0], ceil_mode=1>(a) }
        """,
    ),
    (
        "lppool",
        18,
        """
        g (float[N,M] x) => (float[] y) {
        _k1 = Constant<value = int64[2] {0, 1}>()
        a = Unsqueeze(x, _k1)
        y = LpPool<kernel_shape=[2,1], strides=[1,1], ceil_mode=1>(a) }
        """,
    ),
    (
        "flatten_neg",
        13,
        """
        g (float[N,M] x) => (float[] y) {
        _k1 = Constant<value = int64[1] {0}>()
        a = Unsqueeze(x, _k1)
        y = Flatten<axis=-1>(a) }
        """,
    ),
    (
        "concat_zero",
        13,
        """
        g (float[N,M] x) => (float[] y) {
        _k1 = Constant<value = int64[1] {0}>()
        _k2 = Constant<value = int64[1] {0}>()
        _k3 = Constant<value = int64[1] {0}>()
        e = Slice(x, _k1, _k2, _k3)
        y = Concat<axis=-2>(e, x, e) }
        """,
    ),
    (
        "expand_lower_rank",
        13,
        """
        g (float[N,M] x) => (float[] y) {
        s = Constant<value=int64[1] {1}>()
        y = Expand(x, s) }
        """,
    ),
    (
        "stft",
        17,
        """
        g (float[N,M] x) => (float[] y) {
        f = Flatten<axis=0>(x)
        _k1 = Constant<value = int64[1] {-1}>()
        a = Unsqueeze(f, _k1)
        st = Constant<value=int64 {2}>()
        fl = Constant<value=int64 {4}>()
        y = STFT<onesided=1>(a, st, , fl) }
        """,
    ),
    (
        "trilu",
        14,
        """
        g (float[N,M] x) => (float[] y) {
        k = Constant<value=int64 {-1}>()
        y = Trilu<upper=0>(x, k) }
        """,
    ),
    (
        "cumsum_rev",
        14,
        """
        g (float[N,M] x) => (float[] y) {
        ax = Constant<value=int32 {-1}>()
        y = CumSum<exclusive=1, reverse=1>(x, ax) }
        """,
    ),
    (
        "nonzero_where",
        13,
        """
        g (float[N,M] x) => (int64[] y, float[] z) {
        y = NonZero(x)
        c = Cast<to=9>(x)
        t = Transpose<perm=[1,0]>(x)
        z = Where(c, x, x) }
        """,
    ),
    (
        "topk_smallest",
        11,
        """
        g (float[N,M] x) => (float[] v, int64[] i) {
        k = Constant<value=int64[1] {1}>()
        v, i = TopK<axis=-1, largest=0, sorted=0>(x, k) }
        """,
    ),
    (
        "scatter_elements_neg_red",
        18,
        """
        g (float[N,M] x) => (float[] y) {
        i = Constant<value=int64[1,1] {-1}>()
        u = Constant<value=float[1,1] {5.0}>()
        y = ScatterElements<axis=-1, reduction="max">(x, i, u) }
        """,
    ),
    (
        "mod_fmod",
        13,
        """
        g (float[N,M] x, float[M] z) => (float[] y) {
        y = Mod<fmod=1>(x, z) }
        """,
    ),
    (
        "range_float",
        11,
        """
        g (float[N,M] x) => (float[] y) {
        s = Size(x)
        f = Cast<to=1>(s)
        z = Constant<value=float {0.5}>()
        d = Constant<value=float {0.7}>()
        y = Range(z, f, d) }
        """,
    ),
]


@pytest.mark.parametrize(("name", "opset", "graph"), CASES, ids=[c[0] for c in CASES])
def test_uncovered_op_dims_match_onnxruntime(name: str, opset: int, graph: str) -> None:
    case = oracle.case_from_text(HEADER.format(opset=opset) + graph, BINDINGS)
    outcome = oracle.check_case_quietly(case)
    assert not outcome.findings, "\n\n".join(oracle.report(case, f) for f in outcome.findings)
    assert outcome.runs, f"{name}: no binding ran in onnxruntime: {outcome}"
