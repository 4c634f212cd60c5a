#!/usr/bin/env python
"""Build a fresh *check* corpus: exported models the project was never tuned on.

Same method, truth format and scorer as the public dev corpus (``../shared/dev_corpus``),
with architectures that appear neither there nor in ``tests/data``. The dev corpus
builder's generic helpers (export, strip, onnxruntime ground truth, torch check, manifest)
are imported from its file by path, not copied; this file only adds model builders and
bindings. Usage (in a build venv with torch CPU, transformers, onnx, onnxruntime,
onnxscript, onnx-ir; see the dev corpus README for exact versions)::

    HF_HUB_OFFLINE=1 python tools/build_check_corpus.py [--out /work/check_corpus] [--only NAME ...] [--list]

Layout written (what ``benchmarks/score_dev_corpus.py --corpus OUT`` expects)::

    OUT/score.py                       copy of the dev corpus scorer
    OUT/models/<name>/model.onnx       stripped model (no intermediate value_info)
    OUT/models/<name>/truth.json       shapes of every value under 3 bindings (no 1, all distinct)
    OUT/models/manifest.json, MODELS.md

Failures are recorded in the manifest (never faked).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
DEV = os.path.normpath(os.path.join(REPO, "..", "shared", "dev_corpus"))


def _load_dev_builder():
    spec = importlib.util.spec_from_file_location(
        "build_dev_corpus", os.path.join(DEV, "build_dev_corpus.py")
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


dc = _load_dev_builder()

# ----------------------------------------------------------------------------
# Bindings: distinct, never 1, different from the dev corpus's
# ----------------------------------------------------------------------------
KV_BINDINGS = [
    {"batch": 2, "seq_len": 5, "past_seq_len": 9},
    {"batch": 3, "seq_len": 7, "past_seq_len": 4},
    {"batch": 5, "seq_len": 3, "past_seq_len": 13},
]
for _b in KV_BINDINGS:
    _b["total_seq_len"] = _b["seq_len"] + _b["past_seq_len"]  # 14, 11, 16
SEQ_BINDINGS = [
    {"batch": 2, "seq_len": 10},
    {"batch": 3, "seq_len": 7},
    {"batch": 5, "seq_len": 13},
]
ENCDEC_BINDINGS = [
    {"batch": 2, "enc_seq_len": 9, "dec_seq_len": 5},
    {"batch": 3, "enc_seq_len": 6, "dec_seq_len": 11},
    {"batch": 5, "enc_seq_len": 12, "dec_seq_len": 4},
]
IMAGE_BINDINGS = [
    {"batch": 2, "height": 75, "width": 98},
    {"batch": 3, "height": 113, "width": 67},
    {"batch": 5, "height": 82, "width": 121},
]
AUDIO_BINDINGS = [
    {"batch": 2, "audio_len": 437},
    {"batch": 3, "audio_len": 650},
    {"batch": 5, "audio_len": 333},
]

# the dev helpers draw example token ids in [0, dc.VOCAB) (384): every vocab here is larger
assert dc.VOCAB == 384


def kv_gens(vocab, with_position_ids):
    g = {"input_ids": ("int", 0, vocab), "attention_mask": ("ones",), "*": ("randn",)}
    if with_position_ids:
        g["position_ids"] = ("positions", "past_seq_len")
    return g


def _path(tmp):
    return os.path.join(tmp, "m.onnx")


def _spec(path, ref, bindings, gens, note):
    return {"path": path, "ref": ref, "bindings": bindings, "gens": gens, "note": note}


class HF:
    """A transformers model class and its config's keyword arguments, each config written once.

    ``new(attn)`` builds the config and the model (``dc._new``, seeded, eval mode); the builder
    factories below (``kv``, ``seq``, ``encdec``, ``image``, ``audio``) turn one into a corpus
    entry, so the same config can be exported twice (dynamo and legacy) without repeating it.
    """

    def __init__(self, model, config, **kw):
        self.model, self.config, self.kw = model, config, kw

    @property
    def vocab(self):
        return self.kw["vocab_size"]

    def but(self, **changes):
        """The same config with some values changed (in place: the keyword order is kept)."""
        return HF(self.model, self.config, **{**self.kw, **changes})

    def new(self, attn=None):
        """``(model, config)``; ``attn=None`` leaves dc._new's default (sdpa)."""
        import transformers

        cfg = getattr(transformers, self.config)(**self.kw)
        attn_kw = {} if attn is None else {"attn": attn}
        return dc._new(getattr(transformers, self.model), cfg, **attn_kw), cfg


def _ort_fuse(optimize_model, src, dst, model_type, num_heads, hidden_size):
    """Fuse ``src`` into ``dst`` with onnxruntime's optimizer.

    Returns a callable giving the note text; call it last (it reads the fused statistics).
    """
    opt = optimize_model(
        src, model_type=model_type, num_heads=num_heads, hidden_size=hidden_size
    )
    opt.save_model_to_file(dst)
    call = (
        f"onnxruntime.transformers.optimizer.optimize_model(model_type='{model_type}', "
        f"num_heads={num_heads}, hidden_size={hidden_size})"
    )
    return lambda: f"{call}: {json.dumps(opt.get_fused_operator_statistics())}"


# ----------------------------------------------------------------------------
# Decoders with a KV cache
# ----------------------------------------------------------------------------
def _kv(tmp, model, n_kv, head_dim, pos, vocab, note, exporter, bindings=KV_BINDINGS, **kw):
    ref = dc.build_decoder_kv(model, 2, n_kv, head_dim, pos, _path(tmp), exporter, **kw)
    return {
        "path": _path(tmp),
        "ref": ref,
        "gens": kv_gens(vocab, pos),
        "bindings": bindings,
        "note": note,
    }


def kv(hf, n_kv, head_dim, note, pos=True, attn=None, exporter="dynamo"):
    """A 2-layer decoder with ``n_kv`` KV heads of ``head_dim``.

    ``{exporter}`` in the note is filled in (the registry may choose the exporter).
    """

    def build(tmp, exporter=exporter):
        m, _ = hf.new(attn)
        note_x = note.format(exporter=exporter)
        return _kv(tmp, m, n_kv, head_dim, pos, hf.vocab, note_x, exporter)

    return build


b_qwen2_kv = kv(
    HF(
        "Qwen2ForCausalLM",
        "Qwen2Config",
        vocab_size=416,
        hidden_size=48,
        intermediate_size=96,
        num_hidden_layers=2,
        num_attention_heads=6,
        num_key_value_heads=2,
        max_position_embeddings=128,
        use_sliding_window=False,
        tie_word_embeddings=False,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
    ),
    2,
    8,
    "Qwen2ForCausalLM 2 layers, hidden 48, GQA 6/2 heads (head_dim 8), qkv bias, KV cache, "
    "explicit position_ids, sdpa (dynamo)",
)

b_phi3_kv = kv(
    HF(
        "Phi3ForCausalLM",
        "Phi3Config",
        vocab_size=448,
        hidden_size=48,
        intermediate_size=80,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=128,
        original_max_position_embeddings=128,
        partial_rotary_factor=0.5,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
        sliding_window=None,
    ),
    2,
    12,
    "Phi3ForCausalLM 2 layers, hidden 48, GQA 4/2 heads (head_dim 12), fused qkv_proj split by slicing, "
    "fused gate_up_proj (chunk), partial rotary 0.5, KV cache, explicit position_ids (dynamo)",
)

b_phi_kv = kv(
    HF(
        "PhiForCausalLM",
        "PhiConfig",
        vocab_size=400,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        partial_rotary_factor=0.5,
        qk_layernorm=True,
        max_position_embeddings=128,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
    ),
    4,
    8,
    "PhiForCausalLM 2 layers, hidden 32, 4 heads (head_dim 8), partial rotary 0.5 (4 of 8), qk "
    "LayerNorm, parallel attention+MLP, KV cache, explicit position_ids (dynamo)",
)

GPT2 = HF(
    "GPT2LMHeadModel",
    "GPT2Config",
    vocab_size=432,
    n_embd=48,
    n_layer=2,
    n_head=4,
    n_positions=64,
    n_inner=96,
    bos_token_id=1,
    eos_token_id=2,
    pad_token_id=0,
)


def b_gpt2_kv(tmp, exporter="dynamo"):
    m, cfg = GPT2.new("eager" if exporter == "legacy" else "sdpa")
    note = (
        f"GPT2LMHeadModel 2 layers, n_embd 48, 4 heads (head_dim 12), Conv1D qkv split, learned positions "
        f"from position_ids, KV cache, {cfg._attn_implementation} ({exporter})"
    )
    return _kv(tmp, m, 4, 12, True, GPT2.vocab, note, exporter)


b_bigcode_kv = kv(
    HF(
        "GPTBigCodeForCausalLM",
        "GPTBigCodeConfig",
        vocab_size=464,
        n_embd=32,
        n_layer=2,
        n_head=4,
        n_positions=64,
        n_inner=64,
        multi_query=True,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
    ),
    1,
    8,
    "GPTBigCodeForCausalLM 2 layers, n_embd 32, multi-query 4/1 heads (head_dim 8), fused c_attn split "
    "into q / kv, learned positions, KV cache, explicit position_ids (dynamo)",
)

b_olmo_kv = kv(
    HF(
        "OlmoForCausalLM",
        "OlmoConfig",
        vocab_size=480,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=128,
        clip_qkv=8.0,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
        tie_word_embeddings=False,
    ),
    4,
    8,
    "OlmoForCausalLM 2 layers, hidden 32, 4 heads, non-parametric LayerNorm, clip_qkv 8 (Clip), KV "
    "cache, no position_ids input (positions from the cache length) (dynamo)",
    pos=False,
)

b_starcoder2_kv = kv(
    HF(
        "Starcoder2ForCausalLM",
        "Starcoder2Config",
        vocab_size=496,
        hidden_size=48,
        intermediate_size=96,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=1,
        max_position_embeddings=128,
        sliding_window=None,
        use_bias=True,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
    ),
    1,
    12,
    "Starcoder2ForCausalLM 2 layers, hidden 48, MQA 4/1 heads (head_dim 12), biases, LayerNorm, "
    "gelu MLP, KV cache, explicit position_ids (dynamo)",
)

b_llama_kv_legacy = kv(
    HF(
        "LlamaForCausalLM",
        "LlamaConfig",
        vocab_size=392,
        hidden_size=48,
        intermediate_size=96,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=12,
        max_position_embeddings=128,
        tie_word_embeddings=False,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
    ),
    2,
    12,
    "LlamaForCausalLM 2 layers, hidden 48, GQA 4/2 heads (head_dim 12, repeat_kv), eager, KV cache, "
    "explicit position_ids; TorchScript exporter, dynamic_axes, opset 17",
    attn="eager",
    exporter="legacy",
)


def b_gpt2_ortfused(tmp):
    from onnxruntime.transformers.optimizer import optimize_model

    spec = b_gpt2_kv(tmp, exporter="legacy")
    path = os.path.join(tmp, "fused.onnx")
    fused = _ort_fuse(optimize_model, spec["path"], path, "gpt2", 4, 48)
    spec["path"] = path
    spec["note"] += f"; fused by {fused()}"
    return spec


# ----------------------------------------------------------------------------
# Encoders, encoder-decoders
# ----------------------------------------------------------------------------
def seq(hf, outs, note, attn=None, token_types=True, lo=0, exporter="dynamo", out_dyn=None):
    """An encoder fed input_ids in [lo, vocab), attention_mask (and zero token_type_ids)."""

    def build(tmp):
        m, _ = hf.new(attn)
        names = ["input_ids", "attention_mask"]
        gens = {"input_ids": ("int", lo, hf.vocab), "attention_mask": ("ones",)}
        if token_types:
            names.append("token_type_ids")
            gens["token_type_ids"] = ("zeros",)
        path, ref = dc._seq_model(tmp, m, names, list(outs), exporter, gens, out_dyn=out_dyn)
        return _spec(path, ref, SEQ_BINDINGS, gens, note)

    return build


DEBERTA_V2 = HF(
    "DebertaV2Model",
    "DebertaV2Config",
    vocab_size=420,
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=2,
    intermediate_size=64,
    max_position_embeddings=64,
    relative_attention=True,
    position_buckets=16,
    max_relative_positions=32,
    pos_att_type=["p2c", "c2p"],
    norm_rel_ebd="layer_norm",
    share_att_key=True,
    position_biased_input=False,
    type_vocab_size=0,
    pad_token_id=0,
)

b_deberta_v2 = seq(
    DEBERTA_V2,
    ["last_hidden_state"],
    "DebertaV2Model 2 layers, hidden 32, 2 heads, disentangled relative attention (p2c+c2p), "
    "log-bucket relative positions (16 buckets, max 32), shared att key, layer-norm rel "
    "embeddings, no absolute positions (dynamo)",
    attn="eager",
    token_types=False,
)

b_albert = seq(
    HF(
        "AlbertModel",
        "AlbertConfig",
        vocab_size=360,
        embedding_size=16,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=64,
        type_vocab_size=2,
        pad_token_id=0,
        bos_token_id=2,
        eos_token_id=3,
    ),
    ["last_hidden_state", "pooler_output"],
    "AlbertModel 2 layers (shared weights), embedding 16 projected to hidden 32, 2 heads, "
    "token_type_ids, pooler (dynamo)",
)

b_electra = seq(
    HF(
        "ElectraModel",
        "ElectraConfig",
        vocab_size=350,
        embedding_size=24,
        hidden_size=48,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=96,
        max_position_embeddings=64,
        type_vocab_size=2,
        pad_token_id=0,
    ),
    ["last_hidden_state"],
    "ElectraModel 2 layers, embedding 24 projected to hidden 48, 4 heads, token_type_ids (dynamo)",
)

b_bert_legacy = seq(
    HF(
        "BertModel",
        "BertConfig",
        vocab_size=370,
        hidden_size=48,
        num_hidden_layers=2,
        num_attention_heads=3,
        intermediate_size=96,
        max_position_embeddings=64,
        type_vocab_size=2,
        pad_token_id=0,
    ),
    ["last_hidden_state", "pooler_output"],
    "BertModel 2 layers, hidden 48, 3 heads (head_dim 16), token_type_ids, pooler, eager; "
    "TorchScript exporter, opset 17",
    attn="eager",
    exporter="legacy",
    out_dyn={
        "last_hidden_state": {0: "batch", 1: "seq_len"},
        "pooler_output": {0: "batch"},
    },
)

ENCDEC_IN = ["input_ids", "attention_mask", "decoder_input_ids", "decoder_attention_mask"]
ENCDEC_IN_AXES = {
    "input_ids": {0: "batch", 1: "enc_seq_len"},
    "attention_mask": {0: "batch", 1: "enc_seq_len"},
    "decoder_input_ids": {0: "batch", 1: "dec_seq_len"},
    "decoder_attention_mask": {0: "batch", 1: "dec_seq_len"},
}


def _encdec(tmp, model, vocab, note, lo=2, torch=None, export=None):
    """Seq2seq LM on 4 inputs -> logits, encoder_last_hidden_state.

    ``export(w, args, names_in, outs, axes)`` replaces the dynamo export; what it returns, if
    anything, is called once the reference is made and its text appended to the note.
    """
    torch = dc._torch() if torch is None else torch
    names_in = list(ENCDEC_IN)
    outs = ["logits", "encoder_last_hidden_state"]
    w = dc._wrap_named(model, names_in, outs)
    args = [
        torch.randint(lo, vocab, (3, 8)),
        torch.ones(3, 8, dtype=torch.int64),
        torch.randint(lo, vocab, (3, 6)),
        torch.ones(3, 6, dtype=torch.int64),
    ]
    ds = {k: dict(v) for k, v in ENCDEC_IN_AXES.items()}
    finish = None
    if export is None:
        dc.export_dynamo(w, args, _path(tmp), names_in, outs, ds)
    else:
        finish = export(w, args, names_in, outs, ds)
    gens = {
        "input_ids": ("int", lo, vocab),
        "attention_mask": ("ones",),
        "decoder_input_ids": ("int", lo, vocab),
        "decoder_attention_mask": ("ones",),
    }
    spec = _spec(_path(tmp), dc.torch_ref(w, names_in), ENCDEC_BINDINGS, gens, note)
    if finish is not None:
        spec["note"] += finish()
    return spec


def encdec(hf, note, attn=None, lo=2):
    def build(tmp):
        m, _ = hf.new(attn)
        return _encdec(tmp, m, hf.vocab, note, lo=lo)

    return build


# 1 encoder + 1 decoder layer, d_model 32, 4 heads, FFN 64 (BART and Speech2Text)
ENCDEC_1_1 = {
    "d_model": 32,
    "encoder_layers": 1,
    "decoder_layers": 1,
    "encoder_attention_heads": 4,
    "decoder_attention_heads": 4,
    "encoder_ffn_dim": 64,
    "decoder_ffn_dim": 64,
}
BART = HF(
    "BartForConditionalGeneration",
    "BartConfig",
    vocab_size=440,
    **ENCDEC_1_1,
    max_position_embeddings=64,
    pad_token_id=1,
    bos_token_id=0,
    eos_token_id=2,
    decoder_start_token_id=2,
    forced_eos_token_id=2,
    use_cache=False,
)

b_bart = encdec(
    BART,
    "BartForConditionalGeneration 1+1 layers, d_model 32, 4 heads, learned positions "
    "(offset 2), layernorm_embedding, explicit decoder_attention_mask, no cache (dynamo)",
    lo=3,
)

b_t5 = encdec(
    HF(
        "T5ForConditionalGeneration",
        "T5Config",
        vocab_size=456,
        d_model=32,
        d_kv=8,
        d_ff=64,
        num_layers=2,
        num_decoder_layers=1,
        num_heads=4,
        relative_attention_num_buckets=8,
        relative_attention_max_distance=20,
        feed_forward_proj="gated-gelu",
        pad_token_id=0,
        eos_token_id=1,
        decoder_start_token_id=0,
        use_cache=False,
        tie_word_embeddings=False,
    ),
    "T5ForConditionalGeneration 2 encoder + 1 decoder layers, d_model 32, 4 heads x "
    "d_kv 8, relative position buckets (8, max distance 20) both directions + causal, "
    "gated-gelu FFN, RMS norm, explicit decoder_attention_mask, no cache (dynamo)",
    attn="eager",
)


def b_whisper_decoder(tmp):
    torch = dc._torch()
    from transformers import WhisperConfig
    from transformers.models.whisper.modeling_whisper import WhisperDecoder

    cfg = WhisperConfig(
        vocab_size=424,
        num_mel_bins=16,
        d_model=32,
        encoder_layers=1,
        encoder_attention_heads=4,
        encoder_ffn_dim=64,
        decoder_layers=2,
        decoder_attention_heads=4,
        decoder_ffn_dim=64,
        max_source_positions=40,
        max_target_positions=32,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
        decoder_start_token_id=1,
        use_cache=False,
    )
    m = dc._new(WhisperDecoder, cfg)
    names_in = ["input_ids", "encoder_hidden_states"]
    w = dc._wrap_named(m, names_in, ["last_hidden_state"])
    args = [torch.randint(0, 424, (3, 6)), torch.randn(3, 8, 32)]
    ds = {
        "input_ids": {0: "batch", 1: "dec_seq_len"},
        "encoder_hidden_states": {0: "batch", 1: "enc_seq_len"},
    }
    dc.export_dynamo(w, args, _path(tmp), names_in, ["last_hidden_state"], ds)
    return _spec(
        _path(tmp),
        dc.torch_ref(w, names_in),
        ENCDEC_BINDINGS,
        {"input_ids": ("int", 0, 424), "*": ("randn",)},
        "WhisperDecoder alone, 2 layers, d_model 32, learned positions sliced to dec_seq_len, causal "
        "self-attention + cross-attention to encoder_hidden_states of any length, no cache (dynamo)",
    )


# ----------------------------------------------------------------------------
# Vision, audio
# ----------------------------------------------------------------------------
def image(hf, outs, example_hw, note, attn=None, bindings=IMAGE_BINDINGS, **image_kw):
    """An image model with dynamic batch/height/width, exported at ``example_hw``."""

    def build(tmp):
        m, _ = hf.new(attn)
        path, ref = dc._image_dyn(tmp, m, list(outs), example_hw, **image_kw)
        return _spec(path, ref, bindings, {"*": ("randn",)}, note)

    return build


def audio(hf, outs, bindings, note, attn=None):
    """A raw-waveform encoder (input_values [batch, audio_len]), exported at 520 samples."""

    def build(tmp):
        torch = dc._torch()
        m, _ = hf.new(attn)
        names_in = ["input_values"]
        w = dc._wrap_named(m, names_in, list(outs))
        args = [torch.randn(3, 520)]
        axes = {"input_values": {0: "batch", 1: "audio_len"}}
        dc.export_dynamo(w, args, _path(tmp), names_in, list(outs), axes)
        return _spec(_path(tmp), dc.torch_ref(w, names_in), bindings, {"*": ("randn",)}, note)

    return build


# 32x32 images, patch 8, 1 layer, hidden 32, 2 heads (ViT and DINOv2)
TINY_VIT = {
    "image_size": 32,
    "patch_size": 8,
    "num_channels": 3,
    "hidden_size": 32,
    "num_hidden_layers": 1,
    "num_attention_heads": 2,
}
VIT = HF(
    "ViTModel",
    "ViTConfig",
    **TINY_VIT,
    intermediate_size=64,
    qkv_bias=True,
)

b_vit = image(
    VIT,
    ["last_hidden_state", "pooler_output"],
    (64, 48),
    "ViTModel 1 layer, hidden 32, patch 8 (conv k8 s8, floor), CLS token, "
    "interpolate_pos_encoding=True (bicubic Resize of the 4x4 position grid to the patch grid), "
    "pooler; dynamic batch/height/width (dynamo)",
    extra_kw={"interpolate_pos_encoding": True},
)

b_resnet = image(
    HF(
        "ResNetModel",
        "ResNetConfig",
        num_channels=3,
        embedding_size=16,
        hidden_sizes=[16, 24, 32, 48],
        depths=[1, 1, 1, 1],
        layer_type="bottleneck",
        hidden_act="relu",
        downsample_in_first_stage=False,
    ),
    ["last_hidden_state", "pooler_output"],
    (128, 112),
    "ResNetModel bottleneck, 4 stages depths [1,1,1,1], stem conv k7 s2 + maxpool k3 s2 p1, "
    "stride-2 stages with 1x1 shortcut convs, adaptive avg pool; dynamic batch/height/width (dynamo)",
    attn="eager",
)

b_convnext = image(
    HF(
        "ConvNextModel",
        "ConvNextConfig",
        num_channels=3,
        patch_size=4,
        hidden_sizes=[16, 24, 32, 48],
        depths=[1, 1, 1, 1],
        drop_path_rate=0.0,
        layer_scale_init_value=1e-6,
    ),
    ["last_hidden_state", "pooler_output"],
    (128, 112),
    "ConvNextModel 4 stages depths [1,1,1,1], patchify stem k4 s4, depthwise k7 p3 convs, "
    "channels-last LayerNorm via permutes, k2 s2 downsampling, layer scale, global mean pool; "
    "dynamic batch/height/width (dynamo)",
    attn="eager",
)

# the transformer and the conv feature extractor (k10 s5, k3 s2, k3 s2) of both audio encoders
AUDIO_ENCODER = {
    "hidden_size": 32,
    "num_hidden_layers": 1,
    "num_attention_heads": 2,
    "intermediate_size": 64,
}
CONV_FEATURES = {
    "conv_dim": (16, 16, 16),
    "conv_kernel": (10, 3, 3),
    "conv_stride": (5, 2, 2),
    "conv_bias": False,
    "feat_extract_norm": "group",
    "num_conv_pos_embeddings": 8,
    "num_conv_pos_embedding_groups": 4,
}
NO_SPEC_AUGMENT = {"mask_time_prob": 0.0, "apply_spec_augment": False, "vocab_size": 32}

b_wav2vec2 = audio(
    HF(
        "Wav2Vec2Model",
        "Wav2Vec2Config",
        **AUDIO_ENCODER,
        **CONV_FEATURES,
        do_stable_layer_norm=False,
        **NO_SPEC_AUGMENT,
    ),
    ["last_hidden_state", "extract_features"],
    AUDIO_BINDINGS,
    "Wav2Vec2Model: conv feature extractor (k10 s5, k3 s2, k3 s2; group norm on the first), feature "
    "projection, grouped positional conv (k8, groups 4, even kernel so the last frame is dropped), "
    "1 encoder layer; dynamic batch/audio_len (dynamo)",
)


# ----------------------------------------------------------------------------
# Second batch: harder shape arithmetic (Mod/ceil padding, pooling, windows, ALiBi, hybrid caches)
# ----------------------------------------------------------------------------
# Qwen2 with a cropping sliding-window layer: torch.export refines past_seq_len to [0, window - 1] (12)
SWA_WINDOW = 13
SWA_KV_BINDINGS = [
    {"batch": 2, "seq_len": 5, "past_seq_len": 9},
    {"batch": 3, "seq_len": 7, "past_seq_len": 4},
    {"batch": 5, "seq_len": 3, "past_seq_len": 12},
]
for _b in SWA_KV_BINDINGS:
    _b["total_seq_len"] = _b["seq_len"] + _b["past_seq_len"]  # 14, 11, 15
SPEECH_BINDINGS = [
    {"batch": 2, "frames": 37, "dec_seq_len": 5},
    {"batch": 3, "frames": 50, "dec_seq_len": 11},
    {"batch": 5, "frames": 23, "dec_seq_len": 4},
]
SEW_BINDINGS = [
    {"batch": 2, "audio_len": 650},
    {"batch": 3, "audio_len": 333},
    {"batch": 5, "audio_len": 800},
]
# Swin: valid only for height/width multiples of 16 here (patch 2, two merges, window 2: guards, see note)
SWIN_BINDINGS = [
    {"batch": 2, "height": 48, "width": 80},
    {"batch": 3, "height": 112, "width": 64},
    {"batch": 5, "height": 80, "width": 144},
]

QWEN2_SWA = HF(
    "Qwen2ForCausalLM",
    "Qwen2Config",
    vocab_size=408,
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=128,
    use_sliding_window=True,
    sliding_window=SWA_WINDOW,
    max_window_layers=0,
    layer_types=["sliding_attention", "full_attention"],
    tie_word_embeddings=True,
    pad_token_id=0,
    bos_token_id=1,
    eos_token_id=2,
)


def b_qwen2_swa_kv(tmp):
    m, cfg = QWEN2_SWA.new()
    note = (
        f"Qwen2ForCausalLM 2 layers, hidden 32, GQA 4/2, layer 0 sliding window {SWA_WINDOW} with "
        f"DynamicCache(config=...) (layer 0 cropped to its last {SWA_WINDOW - 1} positions: present "
        f"0 = min({SWA_WINDOW - 1}, past + seq) = 12, 11, 12), layer 1 full (present = past + seq); "
        f"past_seq_len refined by torch.export to <= {SWA_WINDOW - 1}, bindings respect it (dynamo)"
    )
    return _kv(
        tmp, m, 2, 8, True, QWEN2_SWA.vocab, note, "dynamo", SWA_KV_BINDINGS, cache_config=cfg
    )


b_mpt_kv = kv(
    HF(
        "MptForCausalLM",
        "MptConfig",
        vocab_size=500,
        d_model=32,
        n_heads=4,
        n_layers=2,
        expansion_ratio=2,
        max_seq_len=64,
        attn_config={"alibi": True, "alibi_bias_max": 8},
        no_bias=True,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
    ),
    4,
    8,
    "MptForCausalLM 2 layers, d_model 32, 4 heads, ALiBi bias sliced to the key length, fused Wqkv, "
    "no biases, KV cache, eager ({exporter})",
    pos=False,
    attn="eager",
)

b_gptj_kv = kv(
    HF(
        "GPTJForCausalLM",
        "GPTJConfig",
        vocab_size=460,
        n_embd=48,
        n_layer=2,
        n_head=4,
        rotary_dim=8,
        n_positions=64,
        n_inner=96,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
        tie_word_embeddings=False,
    ),
    4,
    12,
    "GPTJForCausalLM 2 layers, n_embd 48, 4 heads (head_dim 12), interleaved rotary on 8 of 12 dims "
    "(sin/cos gathered from an embed_positions table by position_ids), parallel attention+MLP, KV "
    "cache, eager (dynamo)",
    attn="eager",
)

b_funnel = seq(
    HF(
        "FunnelModel",
        "FunnelConfig",
        vocab_size=380,
        block_sizes=[1, 1],
        block_repeats=[1, 1],
        num_decoder_layers=1,
        d_model=32,
        n_head=2,
        d_head=16,
        d_inner=64,
        max_position_embeddings=64,
        type_vocab_size=2,
        separate_cls=True,
        truncate_seq=True,
        pool_q_only=True,
        attention_type="relative_shift",
        pooling_type="mean",
        pad_token_id=0,
    ),
    ["last_hidden_state"],
    "FunnelModel 2 blocks + 1 decoder layer, d_model 32: mean pooling of the sequence with stride 2 "
    "(separate_cls, truncate_seq, avg_pool ceil_mode), relative_shift attention whose position "
    "tables depend on the pooled lengths, decoder upsampling by repeat_interleave then truncation "
    "back to seq_len (dynamo)",
    attn="eager",
)

b_longformer = seq(
    HF(
        "LongformerModel",
        "LongformerConfig",
        vocab_size=390,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
        attention_window=[4],
        max_position_embeddings=80,
        pad_token_id=1,
        bos_token_id=0,
        eos_token_id=2,
        type_vocab_size=1,
    ),
    ["last_hidden_state", "pooler_output"],
    "LongformerModel 1 layer, hidden 32, attention_window 4: the sequence is padded to a multiple "
    "of 4 ((4 - seq % 4) % 4 pad), sliding-chunk attention (chunked reshapes by window), output "
    "cut back to seq_len; no seq_len binding is a multiple of 4 (the example was 9) (dynamo)",
    attn="eager",
    token_types=False,
    lo=3,
)


def b_speech2text(tmp):
    torch = dc._torch()
    from transformers import Speech2TextConfig, Speech2TextForConditionalGeneration

    cfg = Speech2TextConfig(
        vocab_size=410,
        **ENCDEC_1_1,
        input_feat_per_channel=16,
        input_channels=1,
        num_conv_layers=2,
        conv_kernel_sizes=[5, 5],
        conv_channels=32,
        max_source_positions=100,
        max_target_positions=32,
        pad_token_id=1,
        bos_token_id=0,
        eos_token_id=2,
        decoder_start_token_id=2,
        use_cache=False,
        scale_embedding=True,
    )
    m = dc._new(Speech2TextForConditionalGeneration, cfg, attn="eager")
    names_in = ["input_features", "attention_mask", "decoder_input_ids"]
    outs = ["logits", "encoder_last_hidden_state"]
    w = dc._wrap_named(m, names_in, outs)
    args = [
        torch.randn(3, 40, 16),
        torch.ones(3, 40, dtype=torch.int64),
        torch.randint(3, 410, (3, 6)),
    ]
    ds = {
        "input_features": {0: "batch", 1: "frames"},
        "attention_mask": {0: "batch", 1: "frames"},
        "decoder_input_ids": {0: "batch", 1: "dec_seq_len"},
    }
    dc.export_dynamo(w, args, _path(tmp), names_in, outs, ds)
    gens = {
        "input_features": ("randn",),
        "attention_mask": ("ones",),
        "decoder_input_ids": ("int", 3, 410),
    }
    return _spec(
        _path(tmp),
        dc.torch_ref(w, names_in),
        SPEECH_BINDINGS,
        gens,
        "Speech2TextForConditionalGeneration 1+1 layers, d_model 32: conv subsampler (two Conv1d k5 s2 "
        "p2 + GLU), the attention mask downsampled by the conv length formula, sinusoidal positions, "
        "decoder with cross attention; symbols batch/frames/dec_seq_len (dynamo)",
    )


b_sew = audio(
    HF(
        "SEWModel",
        "SEWConfig",
        **AUDIO_ENCODER,
        squeeze_factor=2,
        **CONV_FEATURES,
        **NO_SPEC_AUGMENT,
    ),
    ["last_hidden_state"],
    SEW_BINDINGS,
    "SEWModel: conv feature extractor (k10 s5, k3 s2, k3 s2), squeeze (avg pool k2 s2 inside the "
    "positional conv with stride 2), upsample by reshape x2 and pad back to the frame count (odd "
    "counts in every binding, like the example), 1 layer (dynamo)",
    attn="eager",
)

b_dinov2 = image(
    HF(
        "Dinov2Model",
        "Dinov2Config",
        **TINY_VIT,
        mlp_ratio=2,
        layerscale_value=1.0,
    ),
    ["last_hidden_state", "pooler_output"],
    (64, 48),
    "Dinov2Model 1 layer, hidden 32, patch 8, position embeddings always interpolated (bicubic) "
    "to the patch grid, layer scale, CLS pooler; dynamic batch/height/width (dynamo)",
)

b_swin = image(
    HF(
        "SwinModel",
        "SwinConfig",
        image_size=64,
        patch_size=2,
        num_channels=3,
        embed_dim=16,
        depths=[1, 1, 1],
        num_heads=[2, 2, 4],
        window_size=2,
        mlp_ratio=2.0,
        drop_path_rate=0.0,
    ),
    ["last_hidden_state", "pooler_output"],
    (64, 96),
    "SwinModel 3 stages depths [1,1,1], embed 16, patch 2, window 2 (shifted windows, "
    "window partition/reverse reshapes by H/2, W/2), 2 patch merges; torch.export guards the "
    "padding branches at the 64x96 example, so the graph is valid for height/width multiples of "
    "16 only and every binding is one (dynamo)",
    attn="eager",
    bindings=SWIN_BINDINGS,
)

b_poolformer = image(
    HF(
        "PoolFormerModel",
        "PoolFormerConfig",
        num_channels=3,
        pool_size=3,
        hidden_sizes=[16, 24, 32, 48],
        depths=[1, 1, 1, 1],
        patch_sizes=[7, 3, 3, 3],
        strides=[4, 2, 2, 2],
        padding=[2, 1, 1, 1],
        num_encoder_blocks=4,
        mlp_ratio=2.0,
        drop_path_rate=0.0,
    ),
    ["last_hidden_state"],
    (128, 112),
    "PoolFormerModel 4 stages: patch-embedding convs k7 s4 p2 / k3 s2 p1, token mixing by "
    "AvgPool k3 s1 p1 count_include_pad=False minus the input, GroupNorm(1); dynamic "
    "batch/height/width (dynamo)",
    attn="eager",
)

b_convbert = seq(
    HF(
        "ConvBertModel",
        "ConvBertConfig",
        vocab_size=370,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
        embedding_size=32,
        head_ratio=2,
        conv_kernel_size=5,
        num_groups=1,
        max_position_embeddings=64,
        type_vocab_size=2,
        pad_token_id=0,
    ),
    ["last_hidden_state"],
    "ConvBertModel 1 layer, hidden 32, head_ratio 2: span-based dynamic convolution (separable "
    "Conv1d key conv, per-position kernels, unfold of the value over a k5 window), grouped FFN "
    "(dynamo)",
    attn="eager",
)

b_deberta_v2_legacy = seq(
    DEBERTA_V2,
    ["last_hidden_state"],
    "DebertaV2Model (same config as deberta_v2_dynamo) exported with TorchScript, opset 17",
    attn="eager",
    token_types=False,
    exporter="legacy",
    out_dyn={"last_hidden_state": {0: "batch", 1: "seq_len"}},
)


def b_bart_ortfused(tmp):
    torch = dc._torch()
    from onnxruntime.transformers.optimizer import optimize_model

    def export(w, args, names_in, outs, axes):
        axes["logits"] = {0: "batch", 1: "dec_seq_len"}
        axes["encoder_last_hidden_state"] = {0: "batch", 1: "enc_seq_len"}
        raw = os.path.join(tmp, "raw.onnx")
        dc.export_legacy(w, args, raw, names_in, outs, axes)
        return _ort_fuse(optimize_model, raw, _path(tmp), "bart", 4, 32)

    m, _ = BART.new("eager")
    note = "BartForConditionalGeneration (bart_dynamo's config, eager) TorchScript export fused by "
    return _encdec(tmp, m, BART.vocab, note, lo=3, torch=torch, export=export)


def b_vit_legacy(tmp):
    torch = dc._torch()
    m, _ = VIT.but(hidden_size=48, num_attention_heads=3, intermediate_size=96).new("eager")

    class W(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.m = inner

        def forward(self, pixel_values):
            o = self.m(pixel_values=pixel_values, interpolate_pos_encoding=True)
            return o.last_hidden_state, o.pooler_output

    w = W(m).eval()
    dyn = {
        "pixel_values": {0: "batch", 2: "height", 3: "width"},
        "last_hidden_state": {0: "batch", 1: "patches"},
        "pooler_output": {0: "batch"},
    }
    dc.export_legacy(
        w,
        [torch.randn(3, 3, 64, 48)],
        _path(tmp),
        ["pixel_values"],
        ["last_hidden_state", "pooler_output"],
        dyn,
    )
    return _spec(
        _path(tmp),
        dc.torch_ref(w, ["pixel_values"]),
        IMAGE_BINDINGS,
        {"*": ("randn",)},
        "ViTModel 1 layer, hidden 48, 3 heads, patch 8, interpolate_pos_encoding=True; TorchScript "
        "exporter, opset 17, dynamic batch/height/width (output dim 1 declared as an opaque 'patches')",
    )


b_efficientnet = image(
    HF(
        "EfficientNetModel",
        "EfficientNetConfig",
        num_channels=3,
        image_size=64,
        width_coefficient=0.25,
        depth_coefficient=0.25,
        hidden_dim=320,
        drop_connect_rate=0.0,
        depthwise_padding=[],
    ),
    ["last_hidden_state", "pooler_output"],
    (128, 112),
    "EfficientNetModel width 0.25 depth 0.25: MBConv blocks, depthwise convs with 'same'/'valid' "
    "padding, squeeze-excitation (global pool, broadcast Mul), stride-2 stages; dynamic "
    "batch/height/width (dynamo)",
    attn="eager",
)


# ----------------------------------------------------------------------------
# Registry: replaces the dev builder's (its build_one / write_index are reused as is)
# ----------------------------------------------------------------------------
CHECK = [
    ("qwen2_kv_dynamo", b_qwen2_kv, {}),
    ("phi3_kv_dynamo", b_phi3_kv, {}),
    ("phi_kv_dynamo", b_phi_kv, {}),
    ("gpt2_kv_dynamo", b_gpt2_kv, {}),
    ("bigcode_kv_dynamo", b_bigcode_kv, {}),
    ("olmo_kv_dynamo", b_olmo_kv, {}),
    ("starcoder2_kv_dynamo", b_starcoder2_kv, {}),
    ("llama_kv_legacy", b_llama_kv_legacy, {}),
    ("gpt2_kv_ortfused", b_gpt2_ortfused, {}),
    ("deberta_v2_dynamo", b_deberta_v2, {}),
    ("albert_dynamo", b_albert, {}),
    ("electra_dynamo", b_electra, {}),
    ("bert_legacy", b_bert_legacy, {}),
    ("bart_dynamo", b_bart, {}),
    ("t5_dynamo", b_t5, {}),
    ("whisper_decoder_dynamo", b_whisper_decoder, {}),
    ("vit_dynamo", b_vit, {}),
    ("resnet_dynamo", b_resnet, {}),
    ("convnext_dynamo", b_convnext, {}),
    ("wav2vec2_dynamo", b_wav2vec2, {}),
    ("qwen2_swa_kv_dynamo", b_qwen2_swa_kv, {}),
    ("mpt_kv_legacy", b_mpt_kv, {"exporter": "legacy"}),
    ("gptj_kv_dynamo", b_gptj_kv, {}),
    ("speech2text_dynamo", b_speech2text, {}),
    ("sew_dynamo", b_sew, {}),
    ("dinov2_dynamo", b_dinov2, {}),
    ("swin_dynamo", b_swin, {}),
    ("poolformer_dynamo", b_poolformer, {}),
    ("convbert_dynamo", b_convbert, {}),
    ("deberta_v2_legacy", b_deberta_v2_legacy, {}),
    ("bart_ortfused", b_bart_ortfused, {}),
    ("vit_legacy", b_vit_legacy, {}),
    ("efficientnet_dynamo", b_efficientnet, {}),
]
# Recorded export failures (not in the corpus; rebuild with --only NAME to reproduce):
#  * mpt_kv_dynamo: torch.export ValueError "Eq(s70 + Max(0, -s15 - 2*s70 + 1), 1) is inconsistent!" (ALiBi
#    slicing against the dynamic key length); the TorchScript export mpt_kv_legacy is in the corpus instead.
#  * funnel_dynamo: torch.export specializes seq_len to the example's 9 ("tracing inferred a static shape of 9"):
#    the pooling code reads the length as a Python int.
#  * longformer_dynamo: GuardOnDataDependentSymNode "4*u1 < s50 + Mod(4 - Mod(s50, 4), 4)" in the sliding-chunk
#    view (padding to a multiple of attention_window).
EXTRA = [
    ("mpt_kv_dynamo", b_mpt_kv, {}),
    ("funnel_dynamo", b_funnel, {}),
    ("longformer_dynamo", b_longformer, {}),
]
dc.MODELS.clear()
dc.EXTRAS.clear()
for _name, _fn, _kw in CHECK:
    dc.MODELS[_name] = (_fn, _kw)
for _name, _fn, _kw in EXTRA:
    dc.EXTRAS[_name] = (_fn, _kw)


def corpus_main(argv, default_out: str, description: str) -> int:
    """The command line of a corpus builder whose models are registered in ``dc.MODELS``.

    Shared with ``tools/build_probe_corpus.py``.
    """
    ap = argparse.ArgumentParser(
        description=description, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--out", default=default_out, help="corpus root (models go to OUT/models)")
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--list", action="store_true")
    args = ap.parse_args(argv)
    if args.list:
        print("\n".join(dc.MODELS))
        print("# extras (recorded export failures, not in the corpus): " + " ".join(dc.EXTRAS))
        return 0
    models_dir = os.path.join(args.out, "models")
    os.makedirs(models_dir, exist_ok=True)
    shutil.copyfile(os.path.join(DEV, "score.py"), os.path.join(args.out, "score.py"))
    # the dev driver: builds each model into models_dir, keeps other manifest entries with --only
    return dc.main(["--out", models_dir] + (["--only", *args.only] if args.only else []))


def main(argv=None):
    return corpus_main(argv, "/work/check_corpus", __doc__)


if __name__ == "__main__":
    sys.exit(main())
