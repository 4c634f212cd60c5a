"""Build quantized and offline-optimized variants of the test models with onnxruntime's tools.

Users hand onnx-symdims models that onnxruntime's own tools made: its quantizers
(``quantize_dynamic``, ``quantize_static`` in QOperator and QDQ format, the int4
``MatMulNBitsQuantizer``) and its offline graph optimizations
(``SessionOptions.optimized_model_filepath`` at ``ORT_ENABLE_EXTENDED`` / ``ORT_ENABLE_ALL``),
whose graphs hold ``com.microsoft`` and ``com.microsoft.nchwc`` ops. This script derives
such models from the committed ``tests/data/*.onnx`` exports and writes, for each,

* ``tests/data/ort_tools/<name>.onnx``: intermediate ``value_info`` removed (graph inputs
  and outputs keep their declared shapes), like the other test models;
* ``tests/data/ort_tools/<name>.truth.json``: the onnxruntime ground truth in the format
  of ``tests/data/*.truth.json`` (same bindings and feeds as the source model), made by
  ``tools/build_models.py``'s own ``ground_truth``.

Only onnxruntime, onnx and numpy are needed (the project venv has them); nothing is
downloaded. ``ORT_ENABLE_ALL`` graphs are machine specific (the NCHWc block size is the
build machine's: 16 with AVX-512, 8 with AVX2), so rebuild them on a similar CPU; their
node names may also differ between rebuilds (onnxruntime numbers its inserted nodes per
session), the shapes and truth do not. Usage::

    .venv/bin/python tools/build_ort_tool_models.py              # all models
    .venv/bin/python tools/build_ort_tool_models.py --list       # names + notes
    .venv/bin/python tools/build_ort_tool_models.py --only convnet_qdq
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import json
import logging
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import onnx

sys.path.insert(0, str(Path(__file__).resolve().parent))
import build_models

logger = logging.getLogger(__name__)

REPO = Path(__file__).resolve().parent.parent
SOURCE = REPO / "tests" / "data"
OUT = SOURCE / "ort_tools"
CALIBRATION_SAMPLES = 4
MAX_BYTES = 2 * 1024 * 1024

Transform = Callable[[Path, Path], None]


@dataclasses.dataclass(frozen=True)
class Variant:
    """One derived model: its source test model, how it is made, and a note."""

    source: str
    steps: tuple[Transform, ...]
    note: str


# ---------------------------------------------------------------------------
# Tools
# ---------------------------------------------------------------------------
# ---------------------------------------------------------------------------
# Sources: the committed test models, plus two tiny graphs written here with onnx.helper
# (channel counts that are multiples of 16 let the NCHWc pass convert pools and
# upsampling too; an LSTM is what quantize_dynamic turns into DynamicQuantizeLSTM).
# ---------------------------------------------------------------------------
def _weights(rng: np.random.Generator, name: str, *shape: int) -> onnx.TensorProto:
    array = (rng.standard_normal(shape) * 0.2).astype(np.float32)
    return onnx.numpy_helper.from_array(array, name)


def _cnn16() -> onnx.ModelProto:
    """Conv 3->16, MaxPool, Conv 16->32 + swish + LeakyRelu, AvgPool, x2 Resize, Conv, Gemm."""
    h = onnx.helper
    rng = np.random.default_rng(0)
    inits = [
        _weights(rng, "w1", 16, 3, 3, 3), _weights(rng, "b1", 16),
        _weights(rng, "w2", 32, 16, 3, 3), _weights(rng, "b2", 32),
        _weights(rng, "w3", 16, 32, 3, 3), _weights(rng, "b3", 16),
        _weights(rng, "fc_w", 10, 16), _weights(rng, "fc_b", 10),
        onnx.numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales"),
    ]  # fmt: skip
    nodes = [
        h.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        h.make_node("Relu", ["c1"], ["r1"]),
        h.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
        h.make_node("Conv", ["p1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1], strides=[2, 2]),
        h.make_node("Sigmoid", ["c2"], ["gate"]),
        h.make_node("Mul", ["c2", "gate"], ["swish"]),
        h.make_node("LeakyRelu", ["swish"], ["r2"], alpha=0.1),
        h.make_node("AveragePool", ["r2"], ["p2"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        h.make_node(
            "Resize",
            ["p2", "", "scales"],
            ["up"],
            mode="nearest",
            coordinate_transformation_mode="asymmetric",
            nearest_mode="floor",
        ),
        h.make_node("Conv", ["up", "w3", "b3"], ["features"], pads=[1, 1, 1, 1]),
        h.make_node("GlobalAveragePool", ["features"], ["g"]),
        h.make_node("Flatten", ["g"], ["flat"]),
        h.make_node("Gemm", ["flat", "fc_w", "fc_b"], ["scores"], transB=1),
        h.make_node("Softmax", ["scores"], ["logits"], axis=-1),
    ]
    graph = h.make_graph(
        nodes,
        "cnn16",
        [
            h.make_tensor_value_info(
                "x", onnx.TensorProto.FLOAT, ["batch", 3, "height", "width"]
            )
        ],
        # Only logits is an output: the quantizers would declare another, rank-only
        # output with onnxruntime's placeholder names (unk__8), which anchor as given.
        [h.make_tensor_value_info("logits", onnx.TensorProto.FLOAT, ["batch", 10])],
        inits,
    )
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 17)], ir_version=9)


def _lstm() -> onnx.ModelProto:
    """A bidirectional LSTM over ``(seq_len, batch, 8)`` and a projection of its output."""
    h = onnx.helper
    rng = np.random.default_rng(0)
    hidden = 16
    inits = [
        _weights(rng, "W", 2, 4 * hidden, 8), _weights(rng, "R", 2, 4 * hidden, hidden),
        _weights(rng, "B", 2, 8 * hidden), _weights(rng, "proj", 2 * hidden, 4),
        onnx.numpy_helper.from_array(np.array([0, 0, -1], np.int64), "flat_shape"),
    ]  # fmt: skip
    nodes = [
        h.make_node(
            "LSTM",
            ["x", "W", "R", "B"],
            ["y", "y_h", "y_c"],
            hidden_size=hidden,
            direction="bidirectional",
        ),
        h.make_node("Transpose", ["y"], ["y_t"], perm=[0, 2, 1, 3]),
        h.make_node("Reshape", ["y_t", "flat_shape"], ["y_flat"]),
        h.make_node("MatMul", ["y_flat", "proj"], ["out"]),
    ]
    graph = h.make_graph(
        nodes,
        "lstm",
        [h.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["seq_len", "batch", 8])],
        [
            h.make_tensor_value_info("out", onnx.TensorProto.FLOAT, ["seq_len", "batch", 4]),
            h.make_tensor_value_info("y_h", onnx.TensorProto.FLOAT, [2, "batch", hidden]),
        ],
        inits,
    )
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 17)], ir_version=9)


SYNTHETIC = {
    "cnn16": (_cnn16, build_models.IMAGE_BINDINGS, {"*": {"kind": "normal"}}),
    "lstm": (_lstm, build_models.SEQ_BINDINGS, {"*": {"kind": "normal"}}),
}


def _source_truth(source: str) -> dict:
    """The bindings and feeds of a source (its truth file, or the synthetic entry)."""
    if source in SYNTHETIC:
        _, bindings, feeds = SYNTHETIC[source]
        return {"bindings": [dict(b) for b in bindings], "feeds": feeds}
    return json.loads((SOURCE / f"{source}.truth.json").read_text())


def _source_path(source: str, tmp: Path) -> Path:
    if source not in SYNTHETIC:
        return SOURCE / f"{source}.onnx"
    path = tmp / f"{source}.onnx"
    onnx.save(SYNTHETIC[source][0](), str(path))
    return path


class _Calibration:
    """A tiny calibration reader: a few random feeds at the source's first binding."""

    def __init__(self, model_path: Path, source: str) -> None:
        model = onnx.load(str(model_path))
        truth = _source_truth(source)
        rng = np.random.default_rng(build_models.FEED_SEED)
        feeds = {k: v for k, v in truth["feeds"].items() if v is not None}
        self._samples = iter(
            [
                build_models.make_feeds(model, feeds, truth["bindings"][0], rng)
                for _ in range(CALIBRATION_SAMPLES)
            ]
        )

    def get_next(self):
        return next(self._samples, None)

    def rewind(self) -> None:  # onnxruntime's reader protocol; one pass is enough here
        pass


def _reader(source: str):
    from onnxruntime.quantization import CalibrationDataReader

    class Reader(_Calibration, CalibrationDataReader):
        pass

    return lambda path: Reader(path, source)


def quantize_dynamic(**options) -> Transform:
    def step(src: Path, dst: Path) -> None:
        from onnxruntime.quantization import QuantType
        from onnxruntime.quantization import quantize_dynamic as run

        # Contrib producers (Attention, ...) have no ONNX type inference: say float.
        extra = {"DefaultTensorType": onnx.TensorProto.FLOAT, **options}
        run(str(src), str(dst), weight_type=QuantType.QInt8, extra_options=extra)

    return step


def quantize_static(source: str, fmt: str, **extra) -> Transform:
    def step(src: Path, dst: Path) -> None:
        from onnxruntime.quantization import QuantFormat, QuantType
        from onnxruntime.quantization import quantize_static as run

        run(
            str(src),
            str(dst),
            _reader(source)(src),
            quant_format=QuantFormat.QDQ if fmt == "QDQ" else QuantFormat.QOperator,
            activation_type=QuantType.QUInt8,
            weight_type=QuantType.QInt8,
            extra_options=extra or None,
        )

    return step


def matmul_nbits(bits: int = 4, block_size: int = 16, accuracy_level: int | None = None,
                 op_types: tuple[str, ...] = ("MatMul",)) -> Transform:  # fmt: skip
    def step(src: Path, dst: Path) -> None:
        from onnxruntime.quantization.matmul_nbits_quantizer import (
            DefaultWeightOnlyQuantConfig,
            MatMulNBitsQuantizer,
        )

        config = DefaultWeightOnlyQuantConfig(
            block_size=block_size,
            is_symmetric=True,
            accuracy_level=accuracy_level,
            op_types_to_quantize=op_types,
            quant_axes=(("MatMul", 0), ("Gather", 1)),
            bits=bits,
        )
        quantizer = MatMulNBitsQuantizer(
            onnx.load(str(src)), bits=bits, block_size=block_size, algo_config=config
        )
        quantizer.process()
        quantizer.model.save_model_to_file(str(dst), use_external_data_format=False)

    return step


def ort_optimize(level: str) -> Transform:
    """Saves the graph onnxruntime runs after its ``level`` optimizations."""

    def step(src: Path, dst: Path) -> None:
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.graph_optimization_level = getattr(ort.GraphOptimizationLevel, level)
        options.optimized_model_filepath = str(dst)
        options.log_severity_level = 3
        ort.InferenceSession(str(src), options, providers=["CPUExecutionProvider"])

    return step


# ---------------------------------------------------------------------------
# The variants
# ---------------------------------------------------------------------------
VARIANTS: dict[str, Variant] = {
    "convnet_ortopt_extended": Variant(
        "convnet_dynamo",
        (ort_optimize("ORT_ENABLE_EXTENDED"),),
        "convnet_dynamo after onnxruntime ORT_ENABLE_EXTENDED (FusedConv)",
    ),
    "convnet_ortopt_all": Variant(
        "convnet_dynamo",
        (ort_optimize("ORT_ENABLE_ALL"),),
        "convnet_dynamo after onnxruntime ORT_ENABLE_ALL (com.microsoft.nchwc layout)",
    ),
    "convnet_qdq": Variant(
        "convnet_dynamo",
        (quantize_static("convnet_dynamo", "QDQ"),),
        "convnet_dynamo, quantize_static QDQ u8/s8 (ai.onnx Q/DQ)",
    ),
    "convnet_qdq_contrib": Variant(
        "convnet_dynamo",
        (quantize_static("convnet_dynamo", "QDQ", UseQDQContribOps=True),),
        "convnet_dynamo, quantize_static QDQ with UseQDQContribOps (com.microsoft Q/DQ)",
    ),
    "convnet_qoperator": Variant(
        "convnet_dynamo",
        (quantize_static("convnet_dynamo", "QOperator"),),
        "convnet_dynamo, quantize_static QOperator (QLinearConv, QLinearAdd, ...)",
    ),
    "convnet_qdq_ortopt_all": Variant(
        "convnet_dynamo",
        (quantize_static("convnet_dynamo", "QDQ"), ort_optimize("ORT_ENABLE_ALL")),
        "convnet_qdq after ORT_ENABLE_ALL (QDQ fused to QLinear ops, NHWC layout)",
    ),
    "bert_ortopt_extended": Variant(
        "bert_dynamo",
        (ort_optimize("ORT_ENABLE_EXTENDED"),),
        "bert_dynamo after ORT_ENABLE_EXTENDED (FusedMatMul, BiasGelu, FusedGemm)",
    ),
    "bert_dynamic_quant": Variant(
        "bert_dynamo",
        (quantize_dynamic(),),
        "bert_dynamo, quantize_dynamic s8 weights (DynamicQuantizeLinear, MatMulInteger)",
    ),
    "bert_dynamic_quant_ortopt": Variant(
        "bert_dynamo",
        (quantize_dynamic(), ort_optimize("ORT_ENABLE_EXTENDED")),
        "bert_dynamic_quant after ORT_ENABLE_EXTENDED (DynamicQuantizeMatMul, "
        "MatMulIntegerToFloat)",
    ),
    "bert_ortfused_dynamic_quant": Variant(
        "bert_ortfused",
        (quantize_dynamic(),),
        "bert_ortfused (transformer optimizer), quantize_dynamic (QAttention, "
        "QEmbedLayerNormalization, DynamicQuantizeMatMul)",
    ),
    "bert_int4": Variant(
        "bert_dynamo",
        (matmul_nbits(4, 16, op_types=("MatMul", "Gather")),),
        "bert_dynamo, MatMulNBitsQuantizer 4 bits, block 16 (MatMulNBits, "
        "GatherBlockQuantized)",
    ),
    "gpt2_int8_acc4": Variant(
        "gpt2_kv_legacy",
        (matmul_nbits(8, 32, accuracy_level=4),),
        "gpt2_kv_legacy, MatMulNBitsQuantizer 8 bits, block 32, accuracy_level 4",
    ),
    "cnn16_ortopt_all": Variant(
        "cnn16",
        (ort_optimize("ORT_ENABLE_ALL"),),
        "16/32-channel CNN (onnx.helper) after ORT_ENABLE_ALL (nchwc Conv, pools, Upsample)",
    ),
    "cnn16_qdq_ortopt_all": Variant(
        "cnn16",
        (quantize_static("cnn16", "QDQ"), ort_optimize("ORT_ENABLE_ALL")),
        "16/32-channel CNN, quantize_static QDQ, then ORT_ENABLE_ALL (channels-last QLinear)",
    ),
    "cnn16_qoperator": Variant(
        "cnn16",
        (quantize_static("cnn16", "QOperator"),),
        "16/32-channel CNN, quantize_static QOperator",
    ),
    "lstm_dynamic_quant": Variant(
        "lstm",
        (quantize_dynamic(),),
        "bidirectional LSTM (onnx.helper), quantize_dynamic (DynamicQuantizeLSTM)",
    ),
    "t5_dynamic_quant_ortopt": Variant(
        "t5_encoder_legacy",
        (quantize_dynamic(), ort_optimize("ORT_ENABLE_EXTENDED")),
        "t5_encoder_legacy, quantize_dynamic then ORT_ENABLE_EXTENDED",
    ),
}


# ---------------------------------------------------------------------------
# Driver
# ---------------------------------------------------------------------------
def build_one(name: str) -> dict:
    variant = VARIANTS[name]
    truth_src = _source_truth(variant.source)
    with tempfile.TemporaryDirectory(prefix=f"ort_tools_{name}_") as tmp:
        current = _source_path(variant.source, Path(tmp))
        for k, step in enumerate(variant.steps):
            target = Path(tmp) / f"step{k}.onnx"
            step(current, target)
            current = target
        model = onnx.load(str(current))
    build_models.strip_graph(model.graph)
    OUT.mkdir(parents=True, exist_ok=True)
    model_path = OUT / f"{name}.onnx"
    onnx.save(model, str(model_path))
    spec = build_models.ModelSpec(
        build=lambda path: None,  # type: ignore[arg-type,return-value]
        bundled=False,
        bindings=truth_src["bindings"],
        feeds={k: v for k, v in truth_src["feeds"].items() if v is not None},
        note=variant.note,
    )
    truth, problems = build_models.ground_truth(model, spec, None)
    problems += build_models.check_declared_outputs(model, truth)
    (OUT / f"{name}.truth.json").write_text(build_models.dump_truth(truth))
    size = model_path.stat().st_size
    if size > MAX_BYTES:
        problems.append(f"{size} bytes is over the {MAX_BYTES} limit")
    histogram = collections.Counter(
        (f"{n.domain}::" if n.domain not in ("", "ai.onnx") else "") + n.op_type
        for n in model.graph.node
    )
    return {"name": name, "bytes": size, "nodes": len(model.graph.node), "ops": histogram,
            "problems": problems}  # fmt: skip


README = """# Models made by onnxruntime's tools

Generated by `tools/build_ort_tool_models.py` (do not edit by hand: rerun the script).
Each is a quantized or offline-optimized variant of a `tests/data` model (or of a tiny
graph the script writes with `onnx.helper`: `cnn16`, `lstm`); intermediate `value_info`
is removed. `<name>.truth.json` has the format of `tests/data/*.truth.json` (see
`tests/data/README.md`), with the source's bindings and feeds. `ORT_ENABLE_ALL` graphs
were made on an AVX-512 CPU (NCHWc block size 16).

| model | made from / how | nodes | size | contrib ops |
|---|---|---|---|---|
"""


def write_readme(reports: Sequence[dict]) -> None:
    rows = []
    for report in reports:
        variant = VARIANTS[report["name"]]
        contrib = ", ".join(
            f"{op.split('::')[0].replace('com.microsoft', 'ms')}::{op.split('::')[1]} {n}"
            for op, n in sorted(report["ops"].items())
            if "::" in op
        )
        rows.append(
            f"| `{report['name']}` | {variant.note} | {report['nodes']} | "
            f"{report['bytes'] // 1024} KB | {contrib or '-'} |"
        )
    (OUT / "README.md").write_text(README + "\n".join(rows) + "\n")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", action="append", choices=sorted(VARIANTS))
    parser.add_argument("--list", action="store_true", help="print names and notes")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    if args.list:
        for name, variant in VARIANTS.items():
            print(f"{name}: {variant.note}")
        return 0
    failed = False
    reports = []
    for name in args.only or list(VARIANTS):
        report = build_one(name)
        reports.append(report)
        contrib = {op: n for op, n in report["ops"].items() if "::" in op}
        print(f"{name}: {report['nodes']} nodes, {report['bytes'] // 1024} KB, {contrib}")
        for problem in report["problems"]:
            failed = True
            print(f"  PROBLEM: {problem}")
    if not args.only:
        write_readme(reports)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
