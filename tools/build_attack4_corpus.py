#!/usr/bin/env python
"""Build the *attack4* corpus: models after another tool, new architectures, odd shape ops.

A fifth bug-hunting corpus (after the probe, attack, attack2 and attack3 corpora). The others
hold models as torch.onnx.export writes them, run at sizes that are never 1; users chain
other tools after the exporter and run decoders at ``seq_len 1`` with an empty past. So this
corpus holds:

* models after another tool: small exports (a Llama decoder with a KV cache by dynamo, a GPT-2
  decoder with a KV cache by TorchScript, a BERT by dynamo and by TorchScript, a ResNet with a
  dynamic height/width) passed through ``onnxscript.optimizer.optimize``, onnxruntime's
  transformers optimizer (``model_type`` bert / gpt2: com.microsoft Attention,
  SkipLayerNormalization, FastGelu, ...), ``quantize_dynamic`` and a QDQ ``quantize_static``,
  ``onnx.version_converter`` (older and newer opsets), ``convert_float_to_float16`` (with and
  without ``keep_io_types``), onnxslim and onnxsim (run in the project venv, where they are
  installed, on the exported file), and a few chains of them;
* architectures found in no other corpus (see the registry below);
* hand-written torch modules with shape logic not in attack3's (fold, stft, searchsorted,
  diff, view_as_real, index_put by a boolean mask, scatter_reduce, flips of slices, odd
  chunks, meshgrids over derived sizes, non-integer interpolation scales, SAME convolutions).

Every model is scored under bindings that include size 1 (``batch 1``, ``seq_len 1``) and,
for decoders, an empty past (``past_seq_len 0``). Same truth format and scorer as the check
corpus: the attack3 builder (and through it all the others) is imported by path and its
factories reused. Usage, from the repo root, in the build venv of ``tools/README.md``::

    HF_HUB_OFFLINE=1 /work/buildvenv/bin/python tools/build_attack4_corpus.py --out /work/attack4_corpus
    /work/buildvenv/bin/python tools/build_attack4_corpus.py --only llama_kv_onnxslim --out DIR

Layout written: as ``build_probe_corpus.py`` (``OUT/models/<name>/{model.onnx,truth.json}``).

Models (71): Llama (dynamo, KV cache), GPT-2 (TorchScript, KV cache), BERT (dynamo and
TorchScript) and ResNet (dynamic height/width) as exported and after onnxscript's
optimizer, onnxruntime's transformers optimizer (also + fp16), quantize_dynamic,
quantize_static QDQ, version_converter (Llama to 18 and 23, GPT-2 to 20, BERT to 21, ResNet
to 23 after onnxscript), fp16, onnxslim, onnxsim (also onnxslim then int8), onnxruntime's
offline optimizer (EXTENDED, ALL), ``make_dim_param_fixed`` (batch 1, seq_len 1); models
that keep the value_info another tool wrote (``*_vi``: onnxruntime's
SymbolicShapeInference, onnx's infer_shapes, onnxslim, onnxsim) and *stale* value_info
(``*_stale_*_vi``: inferred with a dim fixed, the inputs made dynamic again); OPT with a KV
cache (dynamo and TorchScript), the dev corpus's Gemma2 (soft-capping, sliding window),
GPT-NeoX and Mistral (cropping sliding-window cache) at batch 1 / seq_len 1 / empty past;
Swin2SR (window-padded, pixel_shuffle); CLIP text by TorchScript and at opset 23, OwlViT text
(argmax pooling); Pix2Struct vision (flattened patches); Perceiver masked LM (latent
cross-attention, fixed query count); VITS (data-dependent waveform length from predicted
durations, dynamo and TorchScript); SpeechT5 speech encoder (dynamo and TorchScript);
hand-written sequence ops (stft + view_as_real, fold, diff, flips of slices, odd chunks,
dilated SAME conv1d, complex products) and mask/image ops (index_put by a boolean mask,
masked_select (TorchScript), scatter_reduce/scatter_add, meshgrid over derived sizes,
interpolate with non-integer scales and recompute_scale_factor, SAME conv2d, pixel_unshuffle
after padding to even, unfold/fold), each by dynamo (``Dim`` bounds from 1) and by
TorchScript, with height or width 1 in the bindings.

torch and onnxruntime disagree (the truth is onnxruntime's): signal_ops_legacy (TorchScript
bakes ``torch.chunk``'s chunk size at the example's 9: at seq_len 1 the last chunk is empty
in onnxruntime, one row in torch).

Export or tool failures (torch 2.13, transformers 5.24, onnxruntime 1.32), registered as
extras (``--only NAME`` reproduces them):

* llama_kv_opset17, resnet_opset14: ``version_converter`` keeps ReduceMean's
  ``noop_with_empty_axes`` (opset 18) below 18 (the checker refuses it);
  gpt2_kv_legacy_opset13: "No Previous Version of LayerNormalization exists";
  resnet_opset13: "No Adapter From Version $14 for Relu".
* bert_legacy_ortopt_int8: ``quantize_dynamic`` after the transformers optimizer fails
  ("Unable to find data type for weight_name=...").
* swin2sr_pad_dynamo: exported at 14 x 18 torch.export fails (a view of the padded tensor);
  at 16 x 20 it exports, but onnxruntime fails at sizes that are not window multiples, so
  swin2sr_dynamo is scored at multiples of 4 only. swin2sr_legacy: TorchScript bakes the
  padded size.

Left out of the hand-written modules: ``searchsorted`` (neither exporter), ``masked_select``
(dynamo); ``stft``, ``col2im``/``fold`` (opset 17), ``diff``, ``torch.complex`` and a dilated
``padding="same"`` Conv (onnxruntime: "Dilation not supported" for ``auto_pad``) by
TorchScript. Swin2SR was also tried at a ``padding="same"`` stride > 1: torch refuses it.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

HERE = os.path.dirname(os.path.abspath(__file__))
#: The venv where onnxslim and onnxsim are installed (the project's).
TOOL_PYTHON = os.environ.get(
    "ATTACK4_TOOL_PYTHON",
    os.path.join(os.path.dirname(HERE), "..", "main", ".venv", "bin", "python"),
)


def _load(name):
    spec = importlib.util.spec_from_file_location(name, os.path.join(HERE, f"{name}.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


a3 = _load("build_attack3_corpus")  # loads attack2, attack, probe, check and dev builders
a2, ab, pc, cc, dc = a3.a2, a3.ab, a3.pc, a3.cc, a3.dc
HF, seq, image, kv = cc.HF, cc.seq, cc.image, cc.kv
TOKENS = pc.TOKENS

# ----------------------------------------------------------------------------
# Bindings with size 1 and an empty past
# ----------------------------------------------------------------------------
KV1_BINDINGS = [
    {"batch": 1, "seq_len": 1, "past_seq_len": 0},
    {"batch": 3, "seq_len": 7, "past_seq_len": 4},
    {"batch": 1, "seq_len": 1, "past_seq_len": 9},
    {"batch": 3, "seq_len": 5, "past_seq_len": 0},
]
for _b in KV1_BINDINGS:
    _b["total_seq_len"] = _b["seq_len"] + _b["past_seq_len"]
SEQ1_BINDINGS = [
    {"batch": 1, "seq_len": 1},
    {"batch": 3, "seq_len": 7},
    {"batch": 1, "seq_len": 13},
    {"batch": 3, "seq_len": 1},
]
IMAGE1_BINDINGS = [
    {"batch": 1, "height": 64, "width": 97},
    {"batch": 3, "height": 113, "width": 67},
    {"batch": 1, "height": 33, "width": 40},
]


def with_bindings(builder, bindings, note=None):
    """The same builder, its truth taken under ``bindings``."""

    def build(tmp):
        spec = builder(tmp)
        spec["bindings"] = bindings
        if note:
            spec["note"] += f"; {note}"
        return spec

    return build


# ----------------------------------------------------------------------------
# Tools run on an exported model
# ----------------------------------------------------------------------------
def _onnxscript_opt(src, dst, spec):
    import onnx
    import onnxscript.optimizer

    model = onnx.load(src)
    model = onnxscript.optimizer.optimize(model)
    onnx.save(model, dst)
    return "onnxscript.optimizer.optimize"


def _ort_opt(model_type, num_heads, hidden_size, fp16=False):
    def run(src, dst, spec):
        from onnxruntime.transformers.optimizer import optimize_model

        opt = optimize_model(
            src, model_type=model_type, num_heads=num_heads, hidden_size=hidden_size
        )
        stats = opt.get_fused_operator_statistics()
        if fp16:
            opt.convert_float_to_float16(keep_io_types=True)
        opt.save_model_to_file(dst)
        fused = {k: v for k, v in stats.items() if v}
        return (
            f"onnxruntime.transformers.optimizer.optimize_model(model_type='{model_type}', "
            f"num_heads={num_heads}, hidden_size={hidden_size}){' + fp16' if fp16 else ''}: {fused}"
        )

    return run


def _version(opset):
    def run(src, dst, spec):
        import onnx
        from onnx import version_converter

        model = version_converter.convert_version(onnx.load(src), opset)
        onnx.checker.check_model(model)
        onnx.save(model, dst)
        return f"onnx.version_converter.convert_version(..., {opset})"

    return run


def _fp16(keep_io_types):
    def run(src, dst, spec):
        import onnx
        from onnxruntime.transformers.float16 import convert_float_to_float16

        model = convert_float_to_float16(onnx.load(src), keep_io_types=keep_io_types)
        onnx.save(model, dst)
        spec["ref"] = None
        return f"onnxruntime float16.convert_float_to_float16(keep_io_types={keep_io_types})"

    return run


def _int8(src, dst, spec):
    from onnxruntime.quantization import QuantType, quantize_dynamic

    quantize_dynamic(src, dst, weight_type=QuantType.QInt8)
    spec["ref"] = None
    return "onnxruntime.quantization.quantize_dynamic(QInt8)"


def _qdq(src, dst, spec):
    import numpy as np
    import onnx
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, quantize_static

    model = onnx.load(src)
    feeds = [
        dc.make_feeds(
            model,
            spec["gens"],
            spec["bindings"][i % len(spec["bindings"])],
            np.random.default_rng(i),
        )
        for i in range(2)
    ]

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.it = iter(feeds)

        def get_next(self):
            return next(self.it, None)

    quantize_static(src, dst, Reader(), quant_format=QuantFormat.QDQ)
    spec["ref"] = None
    return "onnxruntime.quantization.quantize_static(QDQ, 2 calibration inputs)"


_SLIM = "import onnxslim, sys; onnxslim.slim(sys.argv[1], sys.argv[2])"
_SIM = (
    "import onnx, onnxsim, sys; m, ok = onnxsim.simplify(onnx.load(sys.argv[1])); "
    "assert ok, 'onnxsim check failed'; onnx.save(m, sys.argv[2])"
)


def _external(name, code):
    def run(src, dst, spec):
        subprocess.run(
            [TOOL_PYTHON, "-c", code, src, dst], check=True, capture_output=True, timeout=300
        )
        return name

    return run


_onnxslim = _external("onnxslim.slim (project venv)", _SLIM)
_onnxsim = _external("onnxsim.simplify (project venv)", _SIM)


def _ort_symbolic(src, dst, spec):
    import onnx
    from onnxruntime.tools.symbolic_shape_infer import SymbolicShapeInference

    onnx.save(SymbolicShapeInference.infer_shapes(onnx.load(src), auto_merge=True), dst)
    return "onnxruntime SymbolicShapeInference.infer_shapes(auto_merge=True)"


def _onnx_infer(src, dst, spec):
    import onnx

    onnx.save(onnx.shape_inference.infer_shapes(onnx.load(src), data_prop=True), dst)
    return "onnx.shape_inference.infer_shapes(data_prop=True)"


def _fixed(dim_param, value):
    def run(src, dst, spec):
        import onnx
        from onnxruntime.tools.onnx_model_utils import fix_output_shapes, make_dim_param_fixed

        model = onnx.load(src)
        make_dim_param_fixed(model.graph, dim_param, value)
        fix_output_shapes(model)
        onnx.save(model, dst)
        return f"onnxruntime.tools make_dim_param_fixed({dim_param!r}, {value}) + fix_output_shapes"

    return run


def _ort_offline(level):
    def run(src, dst, spec):
        import onnxruntime as ort

        so = ort.SessionOptions()
        so.graph_optimization_level = getattr(ort.GraphOptimizationLevel, level)
        so.optimized_model_filepath = dst
        ort.InferenceSession(src, so, providers=["CPUExecutionProvider"])
        return f"onnxruntime offline optimization ({level}, optimized_model_filepath)"

    return run


def _stale_value_info(dim_param, value):
    """value_info inferred with ``dim_param`` fixed to ``value``, then the inputs made dynamic again.

    What a user gets by shape-inferring a model exported at a fixed size and editing its
    inputs back to a named dim: every intermediate value_info still says ``value``.
    """

    def run(src, dst, spec):
        import onnx
        from onnxruntime.tools.onnx_model_utils import make_dim_param_fixed

        model = onnx.load(src)
        inputs = [
            onnx.ValueInfoProto.FromString(v.SerializeToString()) for v in model.graph.input
        ]
        outputs = [
            onnx.ValueInfoProto.FromString(v.SerializeToString()) for v in model.graph.output
        ]
        make_dim_param_fixed(model.graph, dim_param, value)
        model = onnx.shape_inference.infer_shapes(model, data_prop=True)
        del model.graph.input[:]
        model.graph.input.extend(inputs)
        del model.graph.output[:]
        model.graph.output.extend(outputs)
        onnx.save(model, dst)
        _KEEP_VALUE_INFO.add(os.path.abspath(dst))
        return (
            f"value_info inferred with {dim_param} = {value} (onnx infer_shapes), inputs and outputs "
            f"dynamic again: a stale value_info kept"
        )

    return run


def _keep_value_info(src, dst, spec):
    """Not a tool: asks the driver to keep the intermediate value_info the tools wrote."""
    import shutil

    shutil.copyfile(src, dst)
    _KEEP_VALUE_INFO.add(os.path.abspath(dst))
    return "value_info of the tools kept"


#: Files whose intermediate value_info the driver keeps (``dc.strip_value_info`` is wrapped:
#: it reads the file name from ``_CURRENT``, set by ``after``).
_KEEP_VALUE_INFO = set()
_CURRENT = {"path": None}
_strip_value_info = dc.strip_value_info


def _strip_unless_kept(graph):
    if _CURRENT["path"] in _KEEP_VALUE_INFO:
        for node in graph.node:  # as dc.strip_value_info, but value_info stays
            del node.metadata_props[:]
            node.doc_string = ""
        return
    _strip_value_info(graph)


dc.strip_value_info = _strip_unless_kept

_EXPORTS = {}


def _exported_once(builder, tmp):
    """``builder(tmp)``, exported once per process: later calls copy the first export."""
    import shutil
    import tempfile

    if builder not in _EXPORTS:
        keep = tempfile.mkdtemp(prefix="attack4_base_")
        spec = builder(keep)
        _EXPORTS[builder] = spec
    spec = dict(_EXPORTS[builder])
    path = os.path.join(tmp, "base.onnx")
    shutil.copyfile(spec["path"], path)  # exports here carry no external data (tiny models)
    spec["path"] = path
    return spec


def after(builder, *tools, bindings=None):
    """The same builder, its ONNX file passed through ``tools`` in order.

    Each tool is ``run(src, dst, spec) -> note``; lossy tools drop the torch reference
    (``spec["ref"] = None``). ``bindings`` replaces the truth's bindings. The base model is
    exported once per process and shared by every chain that starts from it.
    """

    def build(tmp):
        spec = _exported_once(builder, tmp)
        if bindings is not None:
            spec["bindings"] = bindings
        src = spec["path"]
        for i, tool in enumerate(tools):
            dst = os.path.join(tmp, f"after{i}.onnx")
            spec["note"] += f"; then {tool(src, dst, spec)}"
            src = dst
        spec["path"] = src
        _CURRENT["path"] = os.path.abspath(src)
        return spec

    return build


# ----------------------------------------------------------------------------
# Base models for the tool chains (small: hidden 32, 2 layers)
# ----------------------------------------------------------------------------
b_llama_kv = with_bindings(pc.b_llama_kv, KV1_BINDINGS)
GPT2 = HF(
    "GPT2LMHeadModel",
    "GPT2Config",
    vocab_size=420,
    n_embd=32,
    n_layer=2,
    n_head=4,
    n_positions=64,
    n_inner=64,
    **TOKENS,
)


def b_gpt2_kv_legacy(tmp):
    m, _ = GPT2.new("eager")
    path = cc._path(tmp)
    ref = dc.build_decoder_kv(m, 2, 4, 8, False, path, "legacy")
    return cc._spec(
        path,
        ref,
        KV1_BINDINGS,
        cc.kv_gens(GPT2.vocab, False),
        "GPT2LMHeadModel 2 layers, hidden 32, 4 heads, KV cache, eager (TorchScript opset 17)",
    )


BERT = HF(
    "BertModel",
    "BertConfig",
    vocab_size=400,
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=4,
    intermediate_size=64,
    max_position_embeddings=64,
    type_vocab_size=2,
    pad_token_id=0,
)
_bert_dynamo = seq(
    BERT,
    ["last_hidden_state", "pooler_output"],
    "BertModel 2 layers, hidden 32, 4 heads (dynamo)",
    attn="eager",
)
_bert_legacy = seq(
    BERT,
    ["last_hidden_state", "pooler_output"],
    "BertModel 2 layers, hidden 32, 4 heads (TorchScript opset 17)",
    attn="eager",
    exporter="legacy",
    out_dyn={"last_hidden_state": {0: "batch", 1: "seq_len"}, "pooler_output": {0: "batch"}},
)
b_bert = with_bindings(_bert_dynamo, SEQ1_BINDINGS)
b_bert_legacy = with_bindings(_bert_legacy, SEQ1_BINDINGS)
RESNET = HF(
    "ResNetModel",
    "ResNetConfig",
    num_channels=3,
    embedding_size=16,
    hidden_sizes=[16, 32],
    depths=[1, 1],
    layer_type="basic",
    hidden_act="relu",
    downsample_in_first_stage=False,
)
b_resnet = image(
    RESNET,
    ["last_hidden_state", "pooler_output"],
    (64, 80),
    "ResNetModel basic blocks [16, 32], dynamic height/width (dynamo)",
    attn="eager",
    bindings=IMAGE1_BINDINGS,
)

TOOL_CHAINS = [
    # decoders with a KV cache
    ("llama_kv", b_llama_kv, []),
    ("llama_kv_onnxscript", b_llama_kv, [_onnxscript_opt]),
    ("llama_kv_onnxslim", b_llama_kv, [_onnxslim]),
    ("llama_kv_onnxsim", b_llama_kv, [_onnxsim]),
    ("llama_kv_fp16", b_llama_kv, [_fp16(False)]),
    ("llama_kv_int8", b_llama_kv, [_int8]),
    ("llama_kv_opset23", b_llama_kv, [_version(23)]),
    ("llama_kv_opset18", b_llama_kv, [_version(18)]),
    ("llama_kv_ortsym_vi", b_llama_kv, [_ort_symbolic, _keep_value_info]),
    ("llama_kv_onnxinfer_vi", b_llama_kv, [_onnx_infer, _keep_value_info]),
    ("llama_kv_onnxslim_vi", b_llama_kv, [_onnxslim, _keep_value_info]),
    ("llama_kv_batch1", b_llama_kv, [_fixed("batch", 1)]),
    ("llama_kv_stale_batch3_vi", b_llama_kv, [_stale_value_info("batch", 3)]),
    ("llama_kv_stale_past1_vi", b_llama_kv, [_stale_value_info("past_seq_len", 1)]),
    ("llama_kv_stale_past0_vi", b_llama_kv, [_stale_value_info("past_seq_len", 0)]),
    ("llama_kv_ort_extended", b_llama_kv, [_ort_offline("ORT_ENABLE_EXTENDED")]),
    ("gpt2_kv_legacy", b_gpt2_kv_legacy, []),
    (
        "gpt2_kv_legacy_ortopt_vi",
        b_gpt2_kv_legacy,
        [_ort_opt("gpt2", 4, 32), _ort_symbolic, _keep_value_info],
    ),
    ("gpt2_kv_legacy_ort_all", b_gpt2_kv_legacy, [_ort_offline("ORT_ENABLE_ALL")]),
    ("gpt2_kv_legacy_stale_seq1_vi", b_gpt2_kv_legacy, [_stale_value_info("seq_len", 1)]),
    (
        "gpt2_kv_legacy_stale_past0_vi",
        b_gpt2_kv_legacy,
        [_stale_value_info("past_seq_len", 0)],
    ),
    ("gpt2_kv_legacy_ortopt", b_gpt2_kv_legacy, [_ort_opt("gpt2", 4, 32)]),
    ("gpt2_kv_legacy_ortopt_fp16", b_gpt2_kv_legacy, [_ort_opt("gpt2", 4, 32, fp16=True)]),
    ("gpt2_kv_legacy_onnxsim", b_gpt2_kv_legacy, [_onnxsim]),
    ("gpt2_kv_legacy_onnxslim_int8", b_gpt2_kv_legacy, [_onnxslim, _int8]),
    ("gpt2_kv_legacy_opset20", b_gpt2_kv_legacy, [_version(20)]),
    # encoders
    ("bert", b_bert, []),
    ("bert_onnxscript", b_bert, [_onnxscript_opt]),
    ("bert_ortopt", b_bert, [_ort_opt("bert", 4, 32)]),
    ("bert_onnxslim", b_bert, [_onnxslim]),
    ("bert_qdq", b_bert, [_qdq]),
    ("bert_stale_batch1_vi", b_bert, [_stale_value_info("batch", 1)]),
    ("bert_legacy_ortopt", b_bert_legacy, [_ort_opt("bert", 4, 32)]),
    ("bert_legacy_onnxsim", b_bert_legacy, [_onnxsim]),
    ("bert_legacy_fp16", b_bert_legacy, [_fp16(True)]),
    ("bert_legacy_onnxsim_vi", b_bert_legacy, [_onnxsim, _onnx_infer, _keep_value_info]),
    ("bert_legacy_seq1", b_bert_legacy, [_fixed("seq_len", 1)]),
    ("bert_legacy_stale_seq1_vi", b_bert_legacy, [_stale_value_info("seq_len", 1)]),
    ("bert_legacy_opset21", b_bert_legacy, [_version(21)]),
    # CNN with a dynamic height/width
    ("resnet", b_resnet, []),
    ("resnet_onnxslim", b_resnet, [_onnxslim]),
    ("resnet_onnxsim", b_resnet, [_onnxsim]),
    ("resnet_qdq", b_resnet, [_qdq]),
    ("resnet_int8", b_resnet, [_int8]),
    ("resnet_fp16", b_resnet, [_fp16(False)]),
    ("resnet_ort_all", b_resnet, [_ort_offline("ORT_ENABLE_ALL")]),
    ("resnet_ortsym_vi", b_resnet, [_ort_symbolic, _keep_value_info]),
    ("resnet_stale_height64_vi", b_resnet, [_stale_value_info("height", 64)]),
    ("resnet_onnxscript_opset23", b_resnet, [_onnxscript_opt, _version(23)]),
]

#: Chains whose tool fails (kept as extras: ``--only NAME`` reproduces the failure).
FAILED_CHAINS = [
    # ValidationError: Unrecognized attribute noop_with_empty_axes for operator ReduceMean
    ("llama_kv_opset17", b_llama_kv, [_version(17)]),
    # No Previous Version of LayerNormalization exists
    ("gpt2_kv_legacy_opset13", b_gpt2_kv_legacy, [_version(13)]),
    # quantize_dynamic after the fusion: "Unable to find data type for weight_name=..."
    ("bert_legacy_ortopt_int8", b_bert_legacy, [_ort_opt("bert", 4, 32), _int8]),
    # No Adapter From Version $14 for Relu (to 13); to 14: ReduceMean's noop_with_empty_axes
    ("resnet_opset13", b_resnet, [_version(13)]),
    ("resnet_opset14", b_resnet, [_version(14)]),
]


# ----------------------------------------------------------------------------
# Architectures found in no other corpus
# ----------------------------------------------------------------------------
OPT = HF(
    "OPTForCausalLM",
    "OPTConfig",
    vocab_size=400,
    hidden_size=32,
    ffn_dim=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    max_position_embeddings=64,
    word_embed_proj_dim=32,
    **TOKENS,
)
b_opt_kv = with_bindings(
    kv(
        OPT,
        4,
        8,
        "OPTForCausalLM 2 layers, hidden 32, learned positions from the mask's cumsum, "
        "KV cache ({exporter})",
        pos=False,
    ),
    KV1_BINDINGS,
)
b_opt_kv_legacy = with_bindings(
    kv(
        OPT,
        4,
        8,
        "OPTForCausalLM 2 layers, hidden 32, KV cache ({exporter} opset 17)",
        pos=False,
        attn="eager",
        exporter="legacy",
    ),
    KV1_BINDINGS,
)
b_gemma2_kv1 = with_bindings(
    dc.b_gemma2_kv, KV1_BINDINGS, "bindings with batch 1, seq_len 1, empty past"
)
b_gptneox_kv1 = with_bindings(
    dc.b_gptneox_kv, KV1_BINDINGS, "bindings with batch 1, seq_len 1, empty past"
)
_MISTRAL_KV1 = [dict(b, past_seq_len=min(b["past_seq_len"], 8)) for b in KV1_BINDINGS]
for _b in _MISTRAL_KV1:
    _b["total_seq_len"] = _b["seq_len"] + _b["past_seq_len"]
b_mistral_kv1 = with_bindings(
    dc.b_mistral_kv, _MISTRAL_KV1, "bindings with batch 1, seq_len 1, empty past (past <= 8)"
)

SWIN2SR = HF(
    "Swin2SRForImageSuperResolution",
    "Swin2SRConfig",
    image_size=32,
    patch_size=1,
    num_channels=3,
    embed_dim=16,
    depths=[2],
    num_heads=[2],
    window_size=4,
    mlp_ratio=2.0,
    upscale=2,
    upsampler="pixelshuffle",
)
# multiples of the window: exported at 16 x 20, torch.export assumes the pad (4 - h % 4) % 4 is 0
# (onnxruntime fails a Reshape at 13 x 22, see the extra swin2sr_pad_dynamo)
SR_BINDINGS = [
    {"batch": 1, "height": 12, "width": 20},
    {"batch": 3, "height": 16, "width": 8},
    {"batch": 1, "height": 4, "width": 28},
]


def b_swin2sr_legacy(tmp):
    torch = dc._torch()
    m, _ = SWIN2SR.new("eager")
    w = dc._wrap_named(m, ["pixel_values"], ["reconstruction"])
    dyn = {
        "pixel_values": {0: "batch", 2: "height", 3: "width"},
        "reconstruction": {0: "batch", 2: "out_height", 3: "out_width"},
    }
    dc.export_legacy(
        w,
        [torch.randn(3, 3, 14, 18)],
        cc._path(tmp),
        ["pixel_values"],
        ["reconstruction"],
        dyn,
    )
    return cc._spec(
        cc._path(tmp),
        dc.torch_ref(w, ["pixel_values"]),
        SR_BINDINGS,
        {"*": ("randn",)},
        "Swin2SRForImageSuperResolution embed 16, window 4 (padded to a window multiple), "
        "pixel_shuffle x2 (TorchScript opset 17; out_height/out_width are the exporter's own "
        "names)",
    )


b_swin2sr = image(
    SWIN2SR,
    ["reconstruction"],
    (16, 20),
    "Swin2SRForImageSuperResolution embed 16, 1 stage of 2 blocks, window 4 (input padded "
    "to a window multiple, cropped back after), pixel_shuffle x2 (dynamo)",
    attn="eager",
    bindings=SR_BINDINGS,
)


def _token_model(hf, outs, note, exporter="dynamo", lo=3, out_dyn=None):
    """A text model fed input_ids in [lo, vocab) and attention_mask."""

    def build(tmp):
        m, _ = hf.new("eager")
        names = ["input_ids", "attention_mask"]
        gens = {"input_ids": ("int", lo, hf.vocab), "attention_mask": ("ones",)}
        path, ref = dc._seq_model(tmp, m, names, list(outs), exporter, gens, out_dyn=out_dyn)
        return cc._spec(path, ref, SEQ1_BINDINGS, gens, note)

    return build


CLIP_TEXT = HF(
    "CLIPTextModel",
    "CLIPTextConfig",
    vocab_size=400,
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    max_position_embeddings=16,
    pad_token_id=1,
    bos_token_id=0,
    eos_token_id=2,
)
OWLVIT_TEXT = HF(
    "OwlViTTextModel",
    "OwlViTTextConfig",
    vocab_size=400,
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    max_position_embeddings=16,
    pad_token_id=0,
    bos_token_id=1,
    eos_token_id=2,
)
_TEXT_DYN = {"last_hidden_state": {0: "batch", 1: "seq_len"}, "pooler_output": {0: "batch"}}
b_clip_text_legacy = _token_model(
    CLIP_TEXT,
    ["last_hidden_state", "pooler_output"],
    "CLIPTextModel 2 layers, causal mask, pooled at argmax(input_ids == eos) (TorchScript opset 17)",
    exporter="legacy",
    out_dyn=_TEXT_DYN,
)
b_clip_text_op23 = pc.at_opset(
    _token_model(
        CLIP_TEXT,
        ["last_hidden_state", "pooler_output"],
        "CLIPTextModel 2 layers, causal mask, pooled at argmax(input_ids == eos) (dynamo)",
    ),
    23,
)
b_owlvit_text = _token_model(
    OWLVIT_TEXT,
    ["last_hidden_state", "pooler_output"],
    "OwlViTTextModel 2 layers, pooled at argmax(input_ids) (dynamo)",
)
b_owlvit_text_legacy = _token_model(
    OWLVIT_TEXT,
    ["last_hidden_state", "pooler_output"],
    "OwlViTTextModel 2 layers, pooled at argmax(input_ids) (TorchScript opset 17)",
    exporter="legacy",
    out_dyn=_TEXT_DYN,
)

PIX2STRUCT = HF(
    "Pix2StructVisionModel",
    "Pix2StructVisionConfig",
    hidden_size=32,
    patch_embed_hidden_size=48,
    d_ff=64,
    d_kv=8,
    num_hidden_layers=2,
    num_attention_heads=4,
    seq_len=64,
)


def _pix2struct(exporter):
    def build(tmp):
        torch = dc._torch()
        m, _ = PIX2STRUCT.new("eager")
        names = ["flattened_patches", "attention_mask"]
        w = dc._wrap_named(m, names, ["last_hidden_state"])
        args = [torch.rand(3, 9, 50), torch.ones(3, 9)]
        axes = {
            "flattened_patches": {0: "batch", 1: "seq_len"},
            "attention_mask": {0: "batch", 1: "seq_len"},
        }
        path = cc._path(tmp)
        if exporter == "dynamo":
            dc.export_dynamo(w, args, path, names, ["last_hidden_state"], axes)
        else:
            dc.export_legacy(
                w,
                args,
                path,
                names,
                ["last_hidden_state"],
                {**axes, "last_hidden_state": {0: "batch", 1: "seq_len"}},
            )
        return cc._spec(
            path,
            dc.torch_ref(w, names),
            SEQ1_BINDINGS,
            {"flattened_patches": ("rand",), "attention_mask": ("ones",)},
            "Pix2StructVisionModel 2 layers: flattened patches [batch, seq_len, 2 + 48] (row/col "
            f"ids in the first two columns), T5-style layer norm ({exporter})",
        )

    return build


PERCEIVER = HF(
    "PerceiverForMaskedLM",
    "PerceiverConfig",
    num_latents=8,
    d_latents=32,
    d_model=24,
    num_blocks=1,
    num_self_attends_per_block=1,
    num_self_attention_heads=2,
    num_cross_attention_heads=1,
    vocab_size=262,
    max_position_embeddings=32,
)
b_perceiver = _token_model(
    PERCEIVER,
    ["logits"],
    "PerceiverForMaskedLM: byte embeddings cross-attended by 8 latents, decoded by max_position_embeddings "
    "queries then cut to seq_len (dynamo)",
    lo=0,
)
b_perceiver_legacy = _token_model(
    PERCEIVER,
    ["logits"],
    "PerceiverForMaskedLM (TorchScript opset 17)",
    lo=0,
    exporter="legacy",
    out_dyn={"logits": {0: "batch"}},
)

VITS = HF(
    "VitsModel",
    "VitsConfig",
    vocab_size=40,
    hidden_size=16,
    num_hidden_layers=1,
    num_attention_heads=2,
    window_size=2,
    ffn_dim=32,
    flow_size=16,
    spectrogram_bins=17,
    upsample_initial_channel=16,
    upsample_rates=[2, 2],
    upsample_kernel_sizes=[4, 4],
    resblock_kernel_sizes=[3],
    resblock_dilation_sizes=[[1]],
    use_stochastic_duration_prediction=False,
    depth_separable_num_layers=1,
    prior_encoder_num_flows=1,
    prior_encoder_num_wavenet_layers=1,
    posterior_encoder_num_wavenet_layers=1,
    wavenet_kernel_size=3,
    duration_predictor_filter_channels=16,
)


def _vits(exporter):
    def build(tmp):
        torch = dc._torch()
        m, _ = VITS.new("eager")
        m.noise_scale = 0.0  # no sampling noise: the waveform is a function of the ids

        class W(torch.nn.Module):
            def __init__(self, m):
                super().__init__()
                self.m = m

            def forward(self, input_ids, attention_mask):
                o = self.m(input_ids=input_ids, attention_mask=attention_mask)
                return o.waveform, o.sequence_lengths

        w = W(m).eval()
        names, outs = ["input_ids", "attention_mask"], ["waveform", "sequence_lengths"]
        args = [torch.randint(0, 40, (3, 9)), torch.ones(3, 9, dtype=torch.int64)]
        axes = {
            "input_ids": {0: "batch", 1: "seq_len"},
            "attention_mask": {0: "batch", 1: "seq_len"},
        }
        path = cc._path(tmp)
        if exporter == "dynamo":
            dc.export_dynamo(w, args, path, names, outs, axes)
        else:
            dc.export_legacy(w, args, path, names, outs, axes)
        gens = {"input_ids": ("int", 0, 40), "attention_mask": ("ones",)}
        return cc._spec(
            path,
            dc.torch_ref(w, names),
            SEQ1_BINDINGS,
            gens,
            "VitsModel 1 layer, deterministic duration predictor: the waveform length is "
            "256 / 64 * ... the sum of ceil(exp(log durations)) over the ids, data-dependent, "
            f"noise_scale 0 ({exporter}; TorchScript names the output dims itself)",
        )

    return build


SPEECHT5 = HF(
    "SpeechT5ForSpeechToText",
    "SpeechT5Config",
    vocab_size=80,
    hidden_size=32,
    encoder_layers=2,
    encoder_attention_heads=4,
    encoder_ffn_dim=64,
    decoder_layers=1,
    decoder_attention_heads=4,
    decoder_ffn_dim=64,
    conv_dim=(16, 16),
    conv_stride=(5, 2),
    conv_kernel=(10, 3),
    num_conv_pos_embeddings=16,
    num_conv_pos_embedding_groups=4,
    apply_spec_augment=False,
    max_speech_positions=512,
    encoder_max_relative_position=16,
)
SPEECH1_BINDINGS = [
    {"batch": 1, "audio_len": 333},
    {"batch": 3, "audio_len": 650},
    {"batch": 1, "audio_len": 25},
]


def _speecht5(exporter):
    def build(tmp):
        torch = dc._torch()
        m, _ = SPEECHT5.new("eager")
        w = dc._wrap_named(m.get_encoder(), ["input_values"], ["last_hidden_state"])
        args = [torch.randn(3, 520)]
        axes = {"input_values": {0: "batch", 1: "audio_len"}}
        path = cc._path(tmp)
        if exporter == "dynamo":
            dc.export_dynamo(w, args, path, ["input_values"], ["last_hidden_state"], axes)
        else:
            dc.export_legacy(
                w,
                args,
                path,
                ["input_values"],
                ["last_hidden_state"],
                {**axes, "last_hidden_state": {0: "batch", 1: "frames"}},
            )
        return cc._spec(
            path,
            dc.torch_ref(w, ["input_values"]),
            SPEECH1_BINDINGS,
            {"*": ("randn",)},
            "SpeechT5 speech encoder (conv feature extractor k10/s5, k3/s2; conv positions; "
            f"relative position bias up to 16), 2 layers ({exporter})",
        )

    return build


# ----------------------------------------------------------------------------
# Hand-written torch modules (shape logic not in attack3's)
# ----------------------------------------------------------------------------
def signal_module(torch, ops):
    """Sequence ops over x [B, L, 8] and a wave w [B, T]."""
    functional = torch.nn.functional

    class SignalOps(torch.nn.Module):
        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.lin = torch.nn.Linear(8, 8)
            self.same = torch.nn.Conv1d(8, 8, 4, padding="same", dilation=2)
            self.register_buffer("edges", torch.tensor([-1.0, -0.25, 0.0, 0.5, 1.5]))

        def forward(self, x, w):
            h = self.lin(x)
            _b, n, _d = h.shape
            outs = [w[:, 1:] - w[:, :-1]]
            if "stft" in ops:
                spec = torch.stft(
                    w,
                    n_fft=16,
                    hop_length=5,
                    win_length=12,
                    window=torch.hann_window(12),
                    center=True,
                    return_complex=True,
                )
                outs.append(torch.view_as_real(spec))
                outs.append(spec.abs())
            if "fold" in ops:  # [B, 2*2*2, L] columns: L blocks of 2x2 fill a [2, L + 1] plane
                outs.append(
                    functional.fold(
                        h.transpose(1, 2), output_size=(2, n + 1), kernel_size=(2, 2)
                    )
                )
            if "diff" in ops:
                outs.append(torch.diff(h, dim=1))
                outs.append(torch.diff(h, n=2, dim=1, prepend=h[:, :1]))
            if "searchsorted" in ops:
                outs.append(torch.searchsorted(self.edges, h[..., 0].contiguous()))
                outs.append(torch.bucketize(h[..., 1], self.edges, right=True))
            if "flip_slice" in ops:
                outs.append(h[:, 1:].flip(1) * h[:, :-1])
                outs.append(h[:, n // 3 :].flip(1, 2))
            if "chunk_odd" in ops:
                parts = torch.chunk(h, 2, dim=1)  # 1 chunk when n == 1
                outs.append(parts[0])
                outs.append(parts[-1])
                outs.append(torch.chunk(h[:, :, :7], 2, dim=2)[1])
            if "same_conv" in ops:
                outs.append(self.same(h.transpose(1, 2)))
                outs.append(
                    functional.conv1d(h.transpose(1, 2), self.same.weight, stride=2, padding=3)
                )
            if "view_as_real" in ops:
                c = torch.complex(h[..., :4], h[..., 4:])
                outs.append(torch.view_as_real(c * c).flatten(2))
            return tuple(outs)

    return SignalOps().eval()


def mask_module(torch, ops):
    """Boolean-mask and image ops over x [B, 4, H, W]."""
    functional = torch.nn.functional

    class MaskOps(torch.nn.Module):
        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.conv = torch.nn.Conv2d(4, 4, 3, padding=1)
            self.same = torch.nn.Conv2d(4, 4, (3, 4), padding="same")

        def forward(self, x):
            h = self.conv(x)
            b, c, hh, ww = h.shape
            outs = []
            if "index_put_mask" in ops:
                h2 = h.clone()
                h2[h2 > 0.5] = 0.0
                outs.append(h2)
                h3 = h.clone()
                h3[:, :, hh // 2 :] = 1.0
                outs.append(h3)
            if "masked_select" in ops:
                outs.append(torch.masked_select(h, h > 0.3))
            if "scatter_reduce" in ops:
                idx = (torch.arange(ww) % 3).view(1, 1, 1, ww).expand(b, c, hh, ww)
                dst = torch.zeros(b, c, hh, 3)
                outs.append(dst.scatter_reduce(3, idx, h, reduce="sum", include_self=True))
                outs.append(torch.zeros(b, c, hh, 3).scatter_add(3, idx, h))
            if "meshgrid" in ops:
                ys, xs = torch.meshgrid(
                    torch.arange(hh // 2 + 1), torch.arange(2 * ww - 1), indexing="xy"
                )
                outs.append(ys * 100 + xs)
            if "interpolate" in ops:
                outs.append(
                    functional.interpolate(
                        h, scale_factor=1.7, mode="nearest", recompute_scale_factor=True
                    )
                )
                outs.append(
                    functional.interpolate(
                        h,
                        scale_factor=(1.6, 1.3),
                        mode="bilinear",
                        align_corners=False,
                        recompute_scale_factor=False,
                    )
                )
                padded = functional.pad(
                    h, (0, ww % 2, 0, hh % 2)
                )  # >= 2: a halved size is >= 1
                outs.append(functional.interpolate(padded, scale_factor=0.5, mode="bicubic"))
                outs.append(
                    functional.interpolate(
                        padded,
                        scale_factor=(0.7, 0.6),
                        mode="bilinear",
                        recompute_scale_factor=True,
                    )
                )
            if "same_conv" in ops:
                outs.append(self.same(h))
                outs.append(
                    functional.conv2d(h, self.same.weight, stride=(2, 3), padding=(1, 2))
                )
            if "pixel_unshuffle_pad" in ops:
                padded = functional.pad(h, (0, ww % 2, 0, hh % 2))
                outs.append(functional.pixel_unshuffle(padded, 2))
            if "fold_image" in ops:
                padded = functional.pad(h, (0, ww % 2, 0, hh % 2))
                cols = functional.unfold(padded, kernel_size=2, stride=2)
                outs.append(
                    functional.fold(
                        cols, output_size=(hh + hh % 2, ww + ww % 2), kernel_size=2, stride=2
                    )
                )
            return tuple(outs)

    return MaskOps().eval()


SIGNAL_OPS = [
    "stft",
    "fold",
    "diff",
    "searchsorted",
    "flip_slice",
    "chunk_odd",
    "same_conv",
    "view_as_real",
]
MASK_OPS = [
    "index_put_mask",
    "masked_select",
    "scatter_reduce",
    "meshgrid",
    "interpolate",
    "same_conv",
    "pixel_unshuffle_pad",
    "fold_image",
]
SIGNAL_SKIP = {
    "dynamo": {"searchsorted"},
    "legacy": {"stft", "fold", "diff", "searchsorted", "same_conv", "view_as_real"},
}
MASK_SKIP = {"dynamo": {"masked_select"}, "legacy": {"fold_image"}}
SIGNAL_BINDINGS = [
    {"batch": 1, "seq_len": 1, "wave_len": 40},
    {"batch": 3, "seq_len": 7, "wave_len": 23},
    {"batch": 2, "seq_len": 12, "wave_len": 64},
]
MASK_BINDINGS = [
    {"batch": 1, "height": 1, "width": 9},
    {"batch": 3, "height": 10, "width": 13},
    {"batch": 2, "height": 7, "width": 1},
]


def _hand4(module_fn, all_ops, skip, bindings, what, arg_shapes, axes, dims):
    def factory(exporter):
        def build(tmp):
            torch = dc._torch()
            ops = [o for o in all_ops if o not in skip[exporter]]
            w = module_fn(torch, set(ops))
            names = list(arg_shapes)
            args = [torch.randn(*shape) for shape in arg_shapes.values()]
            ds = {n: {k: dims(torch)[v] for k, v in a.items()} for n, a in axes.items()}
            path = a3._export_hand(tmp, torch, w, args, names, ds, axes, exporter)
            return cc._spec(
                path,
                dc.torch_ref(w, names),
                bindings,
                {"*": ("randn",)},
                f"hand-written {what}: {', '.join(ops)} "
                + (
                    "(dynamo, optimize=False, Dim bounds)"
                    if exporter == "dynamo"
                    else "(TorchScript opset 17)"
                ),
            )

        return build

    return factory


def _signal_dims(torch):
    return {
        "batch": torch.export.Dim("batch", min=1, max=16),
        "seq_len": torch.export.Dim("seq_len", min=1, max=64),
        "wave_len": torch.export.Dim("wave_len", min=9, max=256),
    }


def _mask_dims(torch):
    return {
        "batch": torch.export.Dim("batch", min=1, max=16),
        "height": torch.export.Dim("height", min=1, max=64),
        "width": torch.export.Dim("width", min=1, max=64),
    }


_signal = _hand4(
    signal_module,
    SIGNAL_OPS,
    SIGNAL_SKIP,
    SIGNAL_BINDINGS,
    "sequence ops over x [batch, seq_len, 8] and w [batch, wave_len]",
    {"x": (3, 9, 8), "w": (3, 30)},
    {"x": {0: "batch", 1: "seq_len"}, "w": {0: "batch", 1: "wave_len"}},
    _signal_dims,
)
_mask = _hand4(
    mask_module,
    MASK_OPS,
    MASK_SKIP,
    MASK_BINDINGS,
    "mask and image ops over x [batch, 4, height, width]",
    {"x": (2, 4, 10, 13)},
    {"x": {0: "batch", 2: "height", 3: "width"}},
    _mask_dims,
)

# ----------------------------------------------------------------------------
# Registry
# ----------------------------------------------------------------------------
ATTACK4 = [(name, after(b, *tools)) for name, b, tools in TOOL_CHAINS] + [
    ("opt_kv_dynamo", b_opt_kv),
    ("opt_kv_legacy", b_opt_kv_legacy),
    ("gemma2_kv1_dynamo", b_gemma2_kv1),
    ("gptneox_kv1_dynamo", b_gptneox_kv1),
    ("mistral_swa_kv1_dynamo", b_mistral_kv1),
    ("swin2sr_dynamo", b_swin2sr),
    ("clip_text_legacy", b_clip_text_legacy),
    ("clip_text_op23_dynamo", b_clip_text_op23),
    ("owlvit_text_dynamo", b_owlvit_text),
    ("owlvit_text_legacy", b_owlvit_text_legacy),
    ("pix2struct_vision_dynamo", _pix2struct("dynamo")),
    ("pix2struct_vision_legacy", _pix2struct("legacy")),
    ("perceiver_mlm_dynamo", b_perceiver),
    ("perceiver_mlm_legacy", b_perceiver_legacy),
    ("vits_dynamo", _vits("dynamo")),
    ("vits_legacy", _vits("legacy")),
    ("speecht5_encoder_dynamo", _speecht5("dynamo")),
    ("speecht5_encoder_legacy", _speecht5("legacy")),
    ("signal_ops_dynamo", _signal("dynamo")),
    ("signal_ops_legacy", _signal("legacy")),
    ("mask_ops_dynamo", _mask("dynamo")),
    ("mask_ops_legacy", _mask("legacy")),
]
EXTRA = [(name, after(b, *tools)) for name, b, tools in FAILED_CHAINS] + [
    # exported at 14 x 18: torch.export fails (view of the padded tensor); at 16 x 20 it exports
    # but onnxruntime fails at sizes that are not window multiples
    (
        "swin2sr_pad_dynamo",
        with_bindings(b_swin2sr, [*SR_BINDINGS, {"batch": 1, "height": 13, "width": 22}]),
    ),
    # TorchScript bakes the padded size: "shape '[3, 16, 14, 18]' is invalid" at other sizes
    ("swin2sr_legacy", b_swin2sr_legacy),
]

dc.MODELS.clear()
dc.EXTRAS.clear()
for _name, _fn in ATTACK4:
    dc.MODELS[_name] = (_fn, {})
for _name, _fn in EXTRA:
    dc.EXTRAS[_name] = (_fn, {})


def main(argv=None):
    return cc.corpus_main(argv, "/work/attack4_corpus", __doc__)


if __name__ == "__main__":
    sys.exit(main())
