"""Build the small exported ONNX models that onnx-symdims ships and tests on.

Every model is a transformers model (or a small torch CNN) built from a tiny
config with random weights (``torch.manual_seed(0)``) and exported by torch,
either with the dynamo exporter (named dynamic dims) or with the legacy
TorchScript exporter (``dynamic_axes``). One export is also passed through
onnxruntime's transformer optimizer (com.microsoft fused ops). For each model
the script:

1. exports it and removes every intermediate ``value_info`` (graph inputs and
   outputs keep their declared shapes, which anchor shape inference), plus
   node metadata and doc strings (they carry the build machine's paths);
2. checks it with ``onnx.checker`` and runs it with onnxruntime, comparing the
   declared outputs with torch under every binding;
3. writes ``<name>.truth.json`` beside the test models: the concrete shape of
   every main-graph node output and graph output under 2-3 bindings of the
   input symbols, computed by onnxruntime (all graph optimisations disabled)
   with every intermediate added as an extra graph output.

Needs torch (CPU), transformers, onnx, onnxscript, onnx-ir and onnxruntime;
see tools/README.md for the separate build venv. Usage::

    HF_HUB_OFFLINE=1 /work/buildvenv/bin/python tools/build_models.py
    ... tools/build_models.py --list
    ... tools/build_models.py --only bloom_kv_dynamo
    ... tools/build_models.py --out /tmp/scratch   # everything flat in one folder
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import json
import logging
import os
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # configs only: nothing may be downloaded
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np
import onnx

logger = logging.getLogger(__name__)

REPO = Path(__file__).resolve().parent.parent
PACKAGE_DATA = REPO / "onnx_symdims" / "data"
TEST_DATA = REPO / "tests" / "data"

VOCAB = 256
FEED_SEED = 1234

# Bindings never use 1 (it hides broadcasting and squeeze mistakes); one KV binding has
# an empty cache (past_seq_len 0) since a first decoding step really runs that way.
KV_BINDINGS = (
    {"batch": 2, "seq_len": 5, "past_seq_len": 7},
    {"batch": 3, "seq_len": 4, "past_seq_len": 0},
    {"batch": 4, "seq_len": 3, "past_seq_len": 11},
)
for _binding in KV_BINDINGS:
    _binding["total_seq_len"] = _binding["seq_len"] + _binding["past_seq_len"]
SEQ_BINDINGS = (
    {"batch": 2, "seq_len": 7},
    {"batch": 3, "seq_len": 12},
    {"batch": 5, "seq_len": 3},
)
# Odd and even sizes so that stride-2 convs, floor pooling and ceil pooling all differ.
IMAGE_BINDINGS = (
    {"batch": 2, "height": 37, "width": 50},
    {"batch": 3, "height": 64, "width": 35},
    {"batch": 4, "height": 45, "width": 71},
)

Feeds = dict[str, dict[str, Any]]
Reference = Callable[[dict[str, np.ndarray]], list[np.ndarray]]


@dataclasses.dataclass(frozen=True)
class ModelSpec:
    """How to build one model and check it.

    Attributes:
        build: exports the model to the given path and returns a torch reference
            (numpy feeds by input name -> flat list of numpy outputs).
        bundled: True for the example shipped inside the package, else a test model.
        bindings: values of the input symbols used for the ground truth.
        feeds: how to fill each input (see ``make_feeds``); key ``*`` is the default.
        note: one line on what the model is and how it was made.
    """

    build: Callable[[Path], Reference]
    bundled: bool
    bindings: Sequence[dict[str, int]]
    feeds: Feeds
    note: str


# ---------------------------------------------------------------------------
# Export helpers
# ---------------------------------------------------------------------------
def _torch():
    import torch

    return torch


def new_model(cls, config, attn: str = "sdpa"):
    """Instantiates a transformers model with deterministic random weights."""
    torch = _torch()
    torch.manual_seed(0)
    config._attn_implementation = attn
    return cls(config).eval()


def export_dynamo(module, args, path: Path, input_names, output_names, dynamic_shapes) -> None:
    torch = _torch()
    with torch.no_grad():
        program = torch.onnx.export(
            module,
            tuple(args),
            dynamo=True,
            input_names=list(input_names),
            output_names=list(output_names),
            dynamic_shapes=dynamic_shapes,
        )
    program.save(str(path))


def export_legacy(module, args, path: Path, input_names, output_names, dynamic_axes) -> None:
    torch = _torch()
    with torch.no_grad():
        torch.onnx.export(
            module,
            tuple(args),
            str(path),
            dynamo=False,
            input_names=list(input_names),
            output_names=list(output_names),
            dynamic_axes=dynamic_axes,
            opset_version=17,
            do_constant_folding=True,
        )


def torch_reference(module, input_names: Sequence[str]) -> Reference:
    """Runs the torch module on numpy feeds and flattens its (nested) outputs."""
    torch = _torch()

    def run(feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        args = [torch.from_numpy(np.ascontiguousarray(feeds[n])) for n in input_names]
        with torch.no_grad():
            out = module(*args)
        flat: list[np.ndarray] = []

        def collect(value) -> None:
            if isinstance(value, (list, tuple)):
                for item in value:
                    collect(item)
            elif value is not None:
                flat.append(value.detach().numpy())

        collect(out)
        return flat

    return run


def keyword_wrapper(model, input_names: Sequence[str], output_fields: Sequence[str]):
    """Wraps a transformers model as ``forward(*tensors) -> tuple`` with keyword passing.

    torch.export matches ``dynamic_shapes`` by parameter name, so the dynamic dims
    of all inputs are given as one tuple under ``tensors``, in input order.
    """
    torch = _torch()
    names = list(input_names)
    fields = list(output_fields)

    class Wrapper(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, *tensors):
            output = self.inner(**dict(zip(names, tensors)))
            return tuple(getattr(output, field) for field in fields)

    return Wrapper(model).eval()


def cached_decoder_wrapper(model, n_layers: int, with_position_ids: bool):
    """Flat-tensor interface for a causal LM with a KV cache.

    ``forward(input_ids, attention_mask, *extra)`` where ``extra`` is
    ``[position_ids,] past.0.key, past.0.value, ...``; returns
    ``(logits, present.0.key, present.0.value, ...)``.
    """
    torch = _torch()
    from transformers import DynamicCache

    class Wrapper(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, input_ids, attention_mask, *extra):
            kwargs = {}
            if with_position_ids:
                kwargs["position_ids"], extra = extra[0], extra[1:]
            cache = DynamicCache(
                ddp_cache_data=[(extra[2 * i], extra[2 * i + 1]) for i in range(n_layers)]
            )
            out = self.inner(
                input_ids=input_ids,
                attention_mask=attention_mask,
                cache=cache,
                use_cache=True,
                **kwargs,
            )
            present = []
            for layer in out.cache.layers:
                present += [layer.keys, layer.values]
            return (out.logits, *present)

    return Wrapper(model).eval()


def export_cached_decoder(
    model,
    path: Path,
    *,
    n_layers: int,
    n_kv_heads: int,
    head_dim: int,
    with_position_ids: bool,
    exporter: str,
) -> Reference:
    """Exports a causal LM with inputs ids/mask/[positions]/past and outputs logits/present."""
    torch = _torch()
    wrapper = cached_decoder_wrapper(model, n_layers, with_position_ids)
    kv = [f"{i}.{part}" for i in range(n_layers) for part in ("key", "value")]
    input_names = ["input_ids", "attention_mask"]
    input_names += ["position_ids"] if with_position_ids else []
    input_names += [f"past_key_values.{k}" for k in kv]
    output_names = ["logits"] + [f"present.{k}" for k in kv]

    # Example sizes: distinct and never 0 or 1, which torch.export would specialise.
    batch, seq, past = 3, 4, 6
    args = [
        torch.randint(0, VOCAB, (batch, seq)),
        torch.ones(batch, past + seq, dtype=torch.int64),
    ]
    if with_position_ids:
        args.append(torch.arange(past, past + seq).expand(batch, seq).contiguous())
    args += [torch.randn(batch, n_kv_heads, past, head_dim) for _ in kv]

    token_dims = {0: "batch", 1: "seq_len"}
    mask_dims = {0: "batch", 1: "total_seq_len"}
    past_dims = {0: "batch", 2: "past_seq_len"}
    if exporter == "dynamo":
        extra = ([token_dims] if with_position_ids else []) + [past_dims for _ in kv]
        shapes = {"input_ids": token_dims, "attention_mask": mask_dims, "extra": tuple(extra)}
        export_dynamo(wrapper, args, path, input_names, output_names, shapes)
    else:
        axes = dict.fromkeys(input_names[-len(kv) :], past_dims)
        axes |= {"input_ids": token_dims, "attention_mask": mask_dims, "logits": token_dims}
        if with_position_ids:
            axes["position_ids"] = token_dims
        axes |= {f"present.{k}": {0: "batch", 2: "total_seq_len"} for k in kv}
        export_legacy(wrapper, args, path, input_names, output_names, axes)
    return torch_reference(wrapper, input_names)


def export_token_model(
    model, path: Path, input_names, output_fields, exporter: str, token_type_vocab: int = 0
) -> Reference:
    """Exports a model whose inputs are all ``[batch, seq_len]`` int64 tensors."""
    torch = _torch()
    wrapper = keyword_wrapper(model, input_names, output_fields)
    batch, seq = 3, 6
    args = []
    for name in input_names:
        if name == "input_ids":
            args.append(torch.randint(0, VOCAB, (batch, seq)))
        elif name == "token_type_ids":
            args.append(torch.randint(0, token_type_vocab, (batch, seq)))
        else:
            args.append(torch.ones(batch, seq, dtype=torch.int64))
    token_dims = {0: "batch", 1: "seq_len"}
    if exporter == "dynamo":
        shapes = {"tensors": tuple(token_dims for _ in input_names)}
        export_dynamo(wrapper, args, path, input_names, output_fields, shapes)
    else:
        axes = dict.fromkeys(input_names, token_dims)
        for field in output_fields:
            axes[field] = {0: "batch"} if field == "pooler_output" else token_dims
        export_legacy(wrapper, args, path, input_names, output_fields, axes)
    return torch_reference(wrapper, input_names)


# ---------------------------------------------------------------------------
# Model builders (one per registry entry)
# ---------------------------------------------------------------------------
def build_tiny_decoder(path: Path) -> Reference:
    """LlamaForCausalLM, 2 layers, hidden 32, GQA 4/2 heads, explicit position_ids, KV cache."""
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=8,
        max_position_embeddings=128,
        tie_word_embeddings=True,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
    )
    model = new_model(LlamaForCausalLM, config)
    return export_cached_decoder(
        model,
        path,
        n_layers=2,
        n_kv_heads=2,
        head_dim=8,
        with_position_ids=True,
        exporter="dynamo",
    )


def build_bloom_kv(path: Path) -> Reference:
    """BloomForCausalLM, 2 layers, hidden 32, 4 heads, ALiBi from the mask, KV cache."""
    from transformers import BloomConfig, BloomForCausalLM

    config = BloomConfig(
        vocab_size=VOCAB,
        hidden_size=32,
        n_layer=2,
        n_head=4,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
    )
    model = new_model(BloomForCausalLM, config, attn="eager")
    return export_cached_decoder(
        model,
        path,
        n_layers=2,
        n_kv_heads=4,
        head_dim=8,
        with_position_ids=False,
        exporter="dynamo",
    )


def build_gpt2_kv_legacy(path: Path) -> Reference:
    """GPT2LMHeadModel, 2 layers, n_embd 32, learned positions, KV cache, TorchScript export."""
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(
        vocab_size=VOCAB,
        n_embd=32,
        n_layer=2,
        n_head=4,
        n_inner=64,
        n_positions=64,
        bos_token_id=1,
        eos_token_id=2,
    )
    model = new_model(GPT2LMHeadModel, config, attn="eager")
    return export_cached_decoder(
        model,
        path,
        n_layers=2,
        n_kv_heads=4,
        head_dim=8,
        with_position_ids=True,
        exporter="legacy",
    )


def _bert(hidden: int, heads: int, attn: str):
    from transformers import BertConfig, BertModel

    config = BertConfig(
        vocab_size=VOCAB,
        hidden_size=hidden,
        num_hidden_layers=2,
        num_attention_heads=heads,
        intermediate_size=2 * hidden,
        max_position_embeddings=64,
        type_vocab_size=2,
    )
    return new_model(BertModel, config, attn=attn)


BERT_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
BERT_OUTPUTS = ("last_hidden_state", "pooler_output")


def build_bert_dynamo(path: Path) -> Reference:
    """BertModel, 2 layers, hidden 32, 4 heads, token types, pooler, sdpa, dynamo export."""
    model = _bert(32, 4, "sdpa")
    return export_token_model(
        model, path, BERT_INPUTS, BERT_OUTPUTS, "dynamo", token_type_vocab=2
    )


def build_bert_ortfused(path: Path) -> Reference:
    """BertModel (hidden 24, 2 heads) TorchScript export fused by onnxruntime's optimizer."""
    from onnxruntime.transformers.optimizer import optimize_model

    model = _bert(24, 2, "eager")
    raw = path.with_suffix(".raw.onnx")
    ref = export_token_model(
        model, raw, BERT_INPUTS, BERT_OUTPUTS, "legacy", token_type_vocab=2
    )
    fused = optimize_model(str(raw), model_type="bert", num_heads=2, hidden_size=24)
    logger.info("fused operators: %s", fused.get_fused_operator_statistics())
    fused.save_model_to_file(str(path))
    return ref


def build_t5_encoder_legacy(path: Path) -> Reference:
    """T5EncoderModel, 2 layers, d_model 32, relative position buckets, TorchScript export."""
    from transformers import T5Config, T5EncoderModel

    config = T5Config(
        vocab_size=VOCAB,
        d_model=32,
        d_kv=8,
        d_ff=64,
        num_layers=2,
        num_heads=4,
        relative_attention_num_buckets=16,
        relative_attention_max_distance=32,
        feed_forward_proj="gated-gelu",
        dropout_rate=0.0,
    )
    model = new_model(T5EncoderModel, config, attn="eager")
    return export_token_model(
        model, path, ("input_ids", "attention_mask"), ("last_hidden_state",), "legacy"
    )


def _tiny_convnet():
    torch = _torch()
    nn = torch.nn
    functional = torch.nn.functional

    class TinyConvNet(nn.Module):
        """Stride/padding/dilation convs, floor and ceil pooling, a resized skip join."""

        def __init__(self):
            super().__init__()
            self.stem = nn.Conv2d(3, 8, kernel_size=5, stride=2, padding=2)
            self.norm = nn.BatchNorm2d(8)
            self.pool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
            self.down = nn.Conv2d(8, 16, kernel_size=3, stride=2, dilation=2)
            self.depthwise = nn.Conv2d(16, 16, kernel_size=3, padding=1, groups=16)
            self.ceil_pool = nn.AvgPool2d(kernel_size=2, stride=2, ceil_mode=True)
            self.fuse = nn.Conv2d(24, 8, kernel_size=(1, 3), padding=(0, 1))
            self.head = nn.Linear(16, 10)

        def forward(self, pixel_values):
            x = functional.relu(self.norm(self.stem(pixel_values)))
            skip = self.pool(x)
            y = functional.relu(self.down(skip))
            y = y + self.depthwise(y)
            y = self.ceil_pool(y)
            up = functional.interpolate(y, size=skip.shape[-2:], mode="nearest")
            features = self.fuse(torch.cat([skip, up], dim=1))
            logits = self.head(torch.flatten(functional.adaptive_avg_pool2d(y, 1), 1))
            return features, logits

    torch.manual_seed(0)
    net = TinyConvNet()
    # Non-trivial running statistics, so that BatchNormalization is not an identity.
    with torch.no_grad():
        net.norm.running_mean.uniform_(-0.5, 0.5)
        net.norm.running_var.uniform_(0.5, 1.5)
    return net.eval()


def build_convnet_dynamo(path: Path) -> Reference:
    """Small torch CNN with dynamic batch, height and width, dynamo export."""
    torch = _torch()
    net = _tiny_convnet()
    args = [torch.randn(3, 3, 48, 40)]
    shapes = {"pixel_values": {0: "batch", 2: "height", 3: "width"}}
    export_dynamo(net, args, path, ["pixel_values"], ["features", "logits"], shapes)
    return torch_reference(net, ["pixel_values"])


# ---------------------------------------------------------------------------
# Registry
# ---------------------------------------------------------------------------
def _lm_feeds(with_position_ids: bool) -> Feeds:
    feeds: Feeds = {
        "input_ids": {"kind": "ids", "high": VOCAB},
        "attention_mask": {"kind": "ones"},
        "*": {"kind": "normal"},
    }
    if with_position_ids:
        feeds["position_ids"] = {"kind": "positions", "start": "past_seq_len"}
    return feeds


TOKEN_FEEDS: Feeds = {
    "input_ids": {"kind": "ids", "high": VOCAB},
    "attention_mask": {"kind": "ones"},
    "token_type_ids": {"kind": "ids", "high": 2},
}

MODELS: dict[str, ModelSpec] = {
    "tiny_decoder": ModelSpec(
        build_tiny_decoder,
        bundled=True,
        bindings=KV_BINDINGS,
        feeds=_lm_feeds(with_position_ids=True),
        note="LlamaForCausalLM 2 layers, hidden 32, GQA 4/2 heads (head_dim 8), tied "
        "embeddings, explicit position_ids, KV cache; dynamo export",
    ),
    "bert_dynamo": ModelSpec(
        build_bert_dynamo,
        bundled=False,
        bindings=SEQ_BINDINGS,
        feeds=TOKEN_FEEDS,
        note="BertModel 2 layers, hidden 32, 4 heads, token_type_ids, pooler, sdpa; dynamo export",
    ),
    "bloom_kv_dynamo": ModelSpec(
        build_bloom_kv,
        bundled=False,
        bindings=KV_BINDINGS,
        feeds=_lm_feeds(with_position_ids=False),
        note="BloomForCausalLM 2 layers, hidden 32, 4 heads (head_dim 8), fused query_key_value, "
        "ALiBi bias built from cumsum(attention_mask) over total_seq_len, no position ids, "
        "KV cache, eager attention; dynamo export",
    ),
    "convnet_dynamo": ModelSpec(
        build_convnet_dynamo,
        bundled=False,
        bindings=IMAGE_BINDINGS,
        feeds={"*": {"kind": "normal"}},
        note="torch CNN: conv k5 s2 p2, BatchNorm, MaxPool k3 s2 p1, conv k3 s2 dilation 2 (no "
        "padding), depthwise conv, AvgPool ceil_mode, nearest resize back to the skip's size, "
        "concat, conv k(1,3), global pool + Linear; dynamic batch/height/width; dynamo export",
    ),
    "t5_encoder_legacy": ModelSpec(
        build_t5_encoder_legacy,
        bundled=False,
        bindings=SEQ_BINDINGS,
        feeds=TOKEN_FEEDS,
        note="T5EncoderModel 2 layers, d_model 32, 4 heads, gated-gelu FFN, relative position "
        "buckets computed from the sequence length; TorchScript export (opset 17)",
    ),
    "gpt2_kv_legacy": ModelSpec(
        build_gpt2_kv_legacy,
        bundled=False,
        bindings=KV_BINDINGS,
        feeds=_lm_feeds(with_position_ids=True),
        note="GPT2LMHeadModel 2 layers, n_embd 32, 4 heads, learned positions from position_ids, "
        "KV cache, eager attention; TorchScript export (opset 17)",
    ),
    "bert_ortfused": ModelSpec(
        build_bert_ortfused,
        bundled=False,
        bindings=SEQ_BINDINGS,
        feeds=TOKEN_FEEDS,
        note="BertModel 2 layers, hidden 24, 2 heads, eager; TorchScript export fused by "
        "onnxruntime.transformers.optimizer.optimize_model(model_type='bert') into com.microsoft ops",
    ),
}


# ---------------------------------------------------------------------------
# Post-processing and ground truth
# ---------------------------------------------------------------------------
def strip_graph(graph: onnx.GraphProto) -> None:
    """Removes intermediate value_info, node metadata and doc strings, in subgraphs too."""
    del graph.value_info[:]
    graph.doc_string = ""
    for value in [*graph.input, *graph.output]:
        del value.metadata_props[:]
        value.doc_string = ""
    for node in graph.node:
        del node.metadata_props[:]
        node.doc_string = ""
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                strip_graph(attr.g)
            for sub in attr.graphs:
                strip_graph(sub)


def dims_of(value: onnx.ValueInfoProto) -> list[int | str | None]:
    dims: list[int | str | None] = []
    for dim in value.type.tensor_type.shape.dim:
        if dim.HasField("dim_value"):
            dims.append(int(dim.dim_value))
        elif dim.HasField("dim_param"):
            dims.append(dim.dim_param)
        else:
            dims.append(None)
    return dims


def graph_inputs(graph: onnx.GraphProto) -> list[onnx.ValueInfoProto]:
    initializers = {init.name for init in graph.initializer}
    return [value for value in graph.input if value.name not in initializers]


def make_feeds(
    model: onnx.ModelProto, feeds: Feeds, binding: dict[str, int], rng: np.random.Generator
) -> dict[str, np.ndarray]:
    """Builds input arrays for one binding; input dims must be plain symbols or ints."""
    arrays = {}
    for value in graph_inputs(model.graph):
        shape = [d if isinstance(d, int) else binding[d] for d in dims_of(value)]
        dtype = onnx.helper.tensor_dtype_to_np_dtype(value.type.tensor_type.elem_type)
        spec = feeds.get(value.name, feeds.get("*", {"kind": "normal"}))
        kind = spec["kind"]
        if kind == "ids":
            array = rng.integers(0, spec["high"], size=shape)
        elif kind == "ones":
            array = np.ones(shape)
        elif kind == "positions":
            start = binding[spec["start"]]
            array = np.broadcast_to(np.arange(start, start + shape[-1]), shape)
        else:
            array = rng.standard_normal(size=shape)
        arrays[value.name] = np.ascontiguousarray(array.astype(dtype))
    return arrays


def _probe_session(model: onnx.ModelProto):
    """Session over a copy of the model whose every node output is a graph output."""
    import onnxruntime as ort

    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    names = {value.name for value in probe.graph.output}
    for node in probe.graph.node:
        for name in node.output:
            if name and name not in names:
                probe.graph.output.append(onnx.ValueInfoProto(name=name))  # ORT fills the type
                names.add(name)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 3
    return ort.InferenceSession(
        probe.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )


def ground_truth(
    model: onnx.ModelProto, spec: ModelSpec, reference: Reference | None
) -> tuple[dict[str, Any], list[str]]:
    """Runs every binding; returns the truth document and torch-vs-ORT discrepancies."""
    session = _probe_session(model)
    out_names = [o.name for o in session.get_outputs()]
    declared = [o.name for o in model.graph.output]
    # Node order (then any output no node makes), so the truth reads like the graph.
    ordered = [name for node in model.graph.node for name in node.output if name]
    ordered += [name for name in declared if name not in set(ordered)]
    shapes: dict[str, list[list[int]]] = {name: [] for name in dict.fromkeys(ordered)}
    elem_types: dict[str, int] = {}
    problems: list[str] = []
    rng = np.random.default_rng(FEED_SEED)
    for index, binding in enumerate(spec.bindings):
        feeds = make_feeds(model, spec.feeds, binding, rng)
        results = dict(zip(out_names, session.run(None, feeds)))
        for name, array in results.items():
            shapes[name].append([int(d) for d in array.shape])
            elem_types[name] = int(onnx.helper.np_dtype_to_tensor_dtype(array.dtype))
        if reference is None:
            continue
        expected = reference(feeds)
        for name, want in zip(declared, expected):
            got = results[name]
            if got.shape != want.shape:
                problems.append(
                    f"binding {index}: {name} ORT {got.shape} != torch {want.shape}"
                )
            elif not np.allclose(got, want, rtol=1e-3, atol=1e-4):
                error = float(np.max(np.abs(got.astype(np.float64) - want)))
                problems.append(f"binding {index}: {name} differs from torch by {error:.3g}")
    inputs = graph_inputs(model.graph)
    truth = {
        "note": spec.note,
        "bindings": [dict(b) for b in spec.bindings],
        "inputs": {
            v.name: {"dims": dims_of(v), "elem_type": v.type.tensor_type.elem_type}
            for v in inputs
        },
        "outputs": {
            v.name: {"dims": dims_of(v), "elem_type": v.type.tensor_type.elem_type}
            for v in model.graph.output
        },
        "feeds": {v.name: spec.feeds.get(v.name, spec.feeds.get("*")) for v in inputs},
        "feed_seed": FEED_SEED,
        "shapes": shapes,
        "elem_types": elem_types,
    }
    return truth, problems


def dump_truth(truth: dict[str, Any]) -> str:
    """JSON with one line per top-level entry and per value, so diffs stay readable."""
    parts = []
    for key, value in truth.items():
        if isinstance(value, dict) and value:
            items = ",\n".join(f"  {json.dumps(k)}: {json.dumps(v)}" for k, v in value.items())
            parts.append(f" {json.dumps(key)}: {{\n{items}\n }}")
        else:
            parts.append(f" {json.dumps(key)}: {json.dumps(value)}")
    return "{\n" + ",\n".join(parts) + "\n}\n"


def check_declared_outputs(model: onnx.ModelProto, truth: dict[str, Any]) -> list[str]:
    """Declared output dims that are ints or input symbols must match the truth."""
    problems = []
    for value in model.graph.output:
        for index, binding in enumerate(truth["bindings"]):
            actual = truth["shapes"][value.name][index]
            dims = dims_of(value)
            if len(dims) != len(actual):
                problems.append(
                    f"{value.name}: declared rank {len(dims)}, actual {len(actual)}"
                )
                break
            for dim, size in zip(dims, actual):
                want = dim if isinstance(dim, int) else binding.get(dim)  # expressions skipped
                if want is not None and want != size:
                    problems.append(
                        f"{value.name}: declared {dim} but {size} in binding {index}"
                    )
    return problems


def op_histogram(model: onnx.ModelProto) -> collections.Counter:
    return collections.Counter(
        (f"{n.domain}::" if n.domain not in ("", "ai.onnx") else "") + n.op_type
        for n in model.graph.node
    )


def input_symbols(model: onnx.ModelProto) -> list[str]:
    symbols: list[str] = []
    for value in graph_inputs(model.graph):
        for dim in dims_of(value):
            if isinstance(dim, str) and dim not in symbols:
                symbols.append(dim)
    return symbols


# ---------------------------------------------------------------------------
# Driver
# ---------------------------------------------------------------------------
def destinations(name: str, spec: ModelSpec, out: Path | None) -> tuple[Path, Path]:
    """Model path and truth path (truth files always sit with the test data)."""
    if out is not None:
        return out / f"{name}.onnx", out / f"{name}.truth.json"
    model_dir = PACKAGE_DATA if spec.bundled else TEST_DATA
    return model_dir / f"{name}.onnx", TEST_DATA / f"{name}.truth.json"


def build_one(name: str, out: Path | None) -> dict[str, Any]:
    spec = MODELS[name]
    model_path, truth_path = destinations(name, spec, out)
    with tempfile.TemporaryDirectory(prefix=f"build_{name}_") as tmp:
        exported = Path(tmp) / "model.onnx"
        reference = spec.build(exported)
        model = onnx.load(str(exported))  # also pulls in external data, if any
    strip_graph(model.graph)
    onnx.checker.check_model(model, full_check=True)
    model_path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(model_path))
    truth, problems = ground_truth(model, spec, reference)
    problems += check_declared_outputs(model, truth)
    truth_path.parent.mkdir(parents=True, exist_ok=True)
    truth_path.write_text(dump_truth(truth))
    histogram = op_histogram(model)
    return {
        "name": name,
        "path": model_path,
        "bytes": model_path.stat().st_size,
        "nodes": len(model.graph.node),
        "ops": histogram,
        "symbols": input_symbols(model),
        "problems": problems,
    }


def describe(model_path: Path, note: str) -> str:
    """One README table row for a model file on disk."""
    model = onnx.load(str(model_path))
    histogram = op_histogram(model)
    ops = ", ".join(f"{op} {n}" for op, n in histogram.most_common(8))
    opsets = ", ".join(f"{o.domain or 'ai.onnx'} {o.version}" for o in model.opset_import)
    return (
        f"| `{model_path.relative_to(REPO)}` | {note} | {', '.join(input_symbols(model))} | "
        f"{len(model.graph.node)} | {opsets} | {model_path.stat().st_size // 1024} KB | {ops} |"
    )


README_HEAD = """# Test models

Generated by `tools/build_models.py` (do not edit by hand: rerun the script, see
`tools/README.md`). Weights are random (`torch.manual_seed(0)`); configs are tiny.
Every model has had its intermediate `value_info` removed; graph inputs and outputs
keep the shapes the exporter declared.

Each `<name>.truth.json` holds the ground truth computed by onnxruntime (all graph
optimisations disabled, every node output added as a graph output):

- `bindings`: list of `{symbol: int}`; no binding uses 1; KV models have an empty
  cache (`past_seq_len` 0) in one binding; `total_seq_len = seq_len + past_seq_len`.
- `inputs` / `outputs`: declared `dims` (int, symbol string or null) and `elem_type`.
- `feeds`: how to fill each input so that a test can rebuild it: `ids` (uniform ints
  in `[0, high)`), `ones`, `positions` (`arange(start, start + last dim)` broadcast,
  `start` names the binding symbol), `normal` (standard normal). Shapes do not
  depend on the values; `feed_seed` is the numpy seed the builder used.
- `shapes`: value name -> one shape per binding, for every main-graph node output
  and graph output; `elem_types`: value name -> ONNX element type.

`tiny_decoder.truth.json` describes the example bundled in the package,
`onnx_symdims/data/tiny_decoder.onnx`.

| file | what / how made | input symbols | nodes | opsets | size | top op types |
|---|---|---|---|---|---|---|
"""


def write_readme() -> None:
    rows = []
    for name, spec in MODELS.items():
        model_path, _ = destinations(name, spec, None)
        if model_path.exists():
            rows.append(describe(model_path, spec.note))
    (TEST_DATA / "README.md").write_text(README_HEAD + "\n".join(rows) + "\n")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--out",
        type=Path,
        help="write every model and truth file flat into this folder "
        "(default: the bundled example into onnx_symdims/data, the rest into tests/data)",
    )
    parser.add_argument("--only", action="append", choices=list(MODELS), metavar="NAME")
    parser.add_argument("--list", action="store_true", help="list the model names and exit")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    logger.setLevel(logging.INFO)  # the exporters' own INFO chatter stays hidden
    if args.list:
        for name, spec in MODELS.items():
            print(f"{name}: {spec.note}")
        return 0
    failed = 0
    for name in args.only or list(MODELS):
        logger.info("building %s", name)
        report = build_one(name, args.out)
        ops = ", ".join(f"{op} {n}" for op, n in sorted(report["ops"].items()))
        logger.info(
            "%s: %d nodes, %d bytes, symbols %s\n  ops: %s",
            name,
            report["nodes"],
            report["bytes"],
            report["symbols"],
            ops,
        )
        for problem in report["problems"]:
            logger.error("%s: %s", name, problem)
        failed += bool(report["problems"])
    if args.out is None:
        write_readme()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
