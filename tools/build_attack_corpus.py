#!/usr/bin/env python
"""Build the *attack* corpus: models of architectures and export modes found in no other corpus.

A second bug-hunting corpus (after ``tools/build_probe_corpus.py``): small HuggingFace models
(random weights) whose architectures are in none of the dev, check and probe corpora, plus
exporter variants those corpora lack (dynamo with ``optimize=False``, TorchScript at opset 14,
opset 18, a batch fixed at 1, sliding-window caches, an ``If`` from ``torch.cond``, fp16 and
dynamic-int8 conversions). Same method, truth format and scorer as the check corpus: the check
and probe builders are imported from their files by path and their factories reused. Usage,
from the repo root, in the build venv of ``tools/README.md``::

    HF_HUB_OFFLINE=1 /work/buildvenv/bin/python tools/build_attack_corpus.py --out /work/attack_corpus
    /work/buildvenv/bin/python tools/build_attack_corpus.py --only gptneo_kv_dynamo --out DIR

Layout written: as ``build_probe_corpus.py`` (``OUT/models/<name>/{model.onnx,truth.json}``).

Models (31): decoders with a KV cache (GPT-Neo local+global attention, Cohere2 with a
cropped sliding-window cache, OLMoE, Gemma exported with ``optimize=False``, Nemotron by
TorchScript at opset 14, Falcon new architecture, Helium with the batch fixed at 1, SmolLM3
at opset 18 with a NoPE layer); encoders (ModernBERT local/global, ESM rotary + token
dropout, FNet Fourier mixing, DeBERTa v1, BigBird by TorchScript then dynamic int8);
decoders of encoder-decoders with a cache (UMT5, Marian) and FSMT; vision with dynamic
height/width (MobileNetV1 TF padding, PVTv2, DeiT in fp16, FocalNet, CvT dynamo and
TorchScript opset 12); Wav2Vec2-Conformer; BERT + ``torch.cond`` (an ``If``); a scripted
recurrent scan (a ``Loop`` with sequences); and conversions: OLMoE fp16, Cohere2 int8,
PVTv2 static QDQ, FocalNet and ModernBERT with ``optimize=False``, Cohere2 at opset 23. Models converted to
fp16 are not topologically sorted (onnxruntime's converter): onnxsim refuses them.

torch and onnxruntime disagree (the truth is onnxruntime's; the graph is what users get):
mobilenet_v1_tfpad_dynamo and focalnet_* (the padding is baked at the example size), and
the fp16/int8/QDQ conversions (values only; no torch check).

Export failures (torch 2.13, transformers 5.24), registered as extras (``--only NAME``):

* falcon_alibi_kv_dynamo: exports, but onnxruntime has no ``Mul(14)`` kernel for a node
  of the ALiBi path (NOT_IMPLEMENTED at session creation).
* encodec_dynamo: GuardOnDataDependentSymNode ``Eq(u0, 1)`` in the encoder (the padding
  computed from the length); the quantizer's codes fail the same way.
* dac_dynamo: torch.export ``AssertionError: 3 not in VR[1, 2]``.
* mamba_dynamo: torch.export specializes seq_len (the slow-path selective scan is a Python
  loop over the sequence).
* modernbert_op23: exports (``RotaryEmbedding`` of opset 23), but onnxruntime's kernel
  refuses its inputs at run time ("cos_cache and sin_cache are expected to have the same
  shape as input x, got 1 and 10").
* Also failed, fixed in the config: FNet and EnCodec with sdpa (eager only); Falcon new
  architecture caches 4 KV heads, not 2; CvT needs ``depth[1] >= 2`` (HF indexes a per-stage
  drop-path list by the stage) and every per-stage list; CvT at opset 11 (no ``einsum``);
  ``torch.cond`` on the sign of a float sum flips under fused kernels (an integer parity
  predicate instead).
"""

from __future__ import annotations

import importlib.util
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

HERE = os.path.dirname(os.path.abspath(__file__))


def _load(name):
    spec = importlib.util.spec_from_file_location(name, os.path.join(HERE, f"{name}.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


pc = _load("build_probe_corpus")  # loads the check builder (pc.cc) and the dev one (pc.dc)
cc, dc = pc.cc, pc.dc
HF, kv, seq, encdec, image, audio = cc.HF, cc.kv, cc.seq, cc.encdec, cc.image, cc.audio
TOKENS = pc.TOKENS


# ----------------------------------------------------------------------------
# Exporter variants: patch the dev builder's export functions for one build
# ----------------------------------------------------------------------------
def exported(builder, note, dynamo_kw=None, legacy_opset=None):
    """The same builder with ``torch.onnx.export(dynamo=True, **dynamo_kw)`` / legacy at an opset."""

    def build(tmp):
        orig_d, orig_l = dc.export_dynamo, dc.export_legacy

        def export_dynamo(
            module, args, path, input_names, output_names, dynamic_shapes, opset=None
        ):
            torch = dc._torch()
            if getattr(module, "in_names", None) is not None:
                dynamic_shapes = {
                    "args": tuple(dynamic_shapes.get(n) for n in module.in_names)
                }
            kw = dict(
                dynamo=True,
                dynamic_shapes=dynamic_shapes,
                input_names=input_names,
                output_names=output_names,
                **(dynamo_kw or {}),
            )
            with torch.no_grad():
                torch.onnx.export(module, tuple(args), **kw).save(path)

        def export_legacy(*args, **kw):
            return orig_l(*args, **{**kw, "opset": legacy_opset or kw.get("opset", 17)})

        dc.export_dynamo, dc.export_legacy = export_dynamo, export_legacy
        try:
            spec = builder(tmp)
        finally:
            dc.export_dynamo, dc.export_legacy = orig_d, orig_l
        spec["note"] += f"; {note}"
        return spec

    return build


def converted(builder, how):
    """The same builder, its ONNX model converted: ``fp16`` (``keep_io_types``), dynamic
    ``int8`` or static ``qdq``."""

    def build(tmp):
        import onnx

        spec = builder(tmp)
        src, dst = spec["path"], os.path.join(tmp, f"{how}.onnx")
        if how == "fp16":
            from onnxruntime.transformers.float16 import convert_float_to_float16

            m = convert_float_to_float16(onnx.load(src), keep_io_types=True)
            onnx.save(m, dst)
            spec["note"] += (
                "; onnxruntime float16.convert_float_to_float16(keep_io_types=True)"
            )
        elif how == "int8":
            from onnxruntime.quantization import QuantType, quantize_dynamic

            quantize_dynamic(src, dst, weight_type=QuantType.QInt8)
            spec["note"] += "; onnxruntime.quantization.quantize_dynamic(QInt8)"
        else:  # static QDQ, calibrated on two random inputs at the first binding's sizes
            import numpy as np
            from onnxruntime.quantization import (
                CalibrationDataReader,
                QuantFormat,
                quantize_static,
            )

            model = onnx.load(src)
            feeds = [
                dc.make_feeds(
                    model, spec["gens"], spec["bindings"][0], np.random.default_rng(i)
                )
                for i in range(2)
            ]

            class Reader(CalibrationDataReader):
                def __init__(self):
                    self.it = iter(feeds)

                def get_next(self):
                    return next(self.it, None)

            quantize_static(src, dst, Reader(), quant_format=QuantFormat.QDQ)
            spec["note"] += "; onnxruntime.quantization.quantize_static(QDQ, calibrated)"
        spec["path"] = dst
        spec["ref"] = None  # values differ from torch by the conversion
        return spec

    return build


# ----------------------------------------------------------------------------
# Decoders with a KV cache
# ----------------------------------------------------------------------------
b_gptneo_kv = kv(
    HF(
        "GPTNeoForCausalLM",
        "GPTNeoConfig",
        vocab_size=410,
        hidden_size=32,
        num_layers=2,
        num_heads=4,
        attention_types=[[["local", "global"], 1]],
        window_size=6,
        max_position_embeddings=128,
        intermediate_size=64,
        **TOKENS,
    ),
    4,
    8,
    "GPTNeoForCausalLM 2 layers, hidden 32, local attention (window 6, mask only) + global, "
    "KV (dynamo)",
    attn="eager",
)

COHERE2 = HF(
    "Cohere2ForCausalLM",
    "Cohere2Config",
    vocab_size=420,
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=128,
    sliding_window=cc.SWA_WINDOW,
    layer_types=["sliding_attention", "full_attention"],
    **TOKENS,
)


def b_cohere2_swa_kv(tmp):
    m, cfg = COHERE2.new()
    note = (
        f"Cohere2ForCausalLM 2 layers, GQA 4/2, layer 0 sliding window {cc.SWA_WINDOW} with a "
        "DynamicCache(config=...) (cropped sliding layer, rotary only there), layer 1 full NoPE; "
        "past_seq_len <= 12 (dynamo)"
    )
    return cc._kv(
        tmp, m, 2, 8, True, COHERE2.vocab, note, "dynamo", cc.SWA_KV_BINDINGS, cache_config=cfg
    )


b_olmoe_kv = kv(
    HF(
        "OlmoeForCausalLM",
        "OlmoeConfig",
        vocab_size=430,
        hidden_size=32,
        intermediate_size=24,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        num_experts=4,
        num_experts_per_tok=2,
        max_position_embeddings=128,
        experts_implementation="batched_mm",
        **TOKENS,
    ),
    4,
    8,
    "OlmoeForCausalLM 2 layers, 4 experts top-2 (batched_mm), q/k norm over the projection, "
    "KV (dynamo)",
)

GEMMA = HF(
    "GemmaForCausalLM",
    "GemmaConfig",
    vocab_size=440,
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=1,
    head_dim=8,
    max_position_embeddings=128,
    **TOKENS,
)
b_gemma_kv_noopt = exported(
    kv(GEMMA, 1, 8, "GemmaForCausalLM 2 layers, MQA 4/1, scaled embeddings, KV (dynamo)"),
    "torch.onnx.export(optimize=False): the exporter's raw graph",
    dynamo_kw={"optimize": False},
)

b_nemotron_kv_legacy14 = exported(
    kv(
        HF(
            "NemotronForCausalLM",
            "NemotronConfig",
            vocab_size=450,
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=128,
            partial_rotary_factor=0.5,
            **TOKENS,
        ),
        2,
        8,
        "NemotronForCausalLM 2 layers, GQA 4/2, partial rotary 0.5, relu2 MLP, LayerNorm1P, "
        "KV, eager ({exporter})",
        attn="eager",
        exporter="legacy",
    ),
    "TorchScript opset 14 (Squeeze/Unsqueeze/Split with input axes, Slice inputs)",
    legacy_opset=14,
)

FALCON = HF(
    "FalconForCausalLM",
    "FalconConfig",
    vocab_size=460,
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_kv_heads=4,
    new_decoder_architecture=False,
    multi_query=True,
    parallel_attn=True,
    alibi=True,
    bias=False,
    **TOKENS,
)
b_falcon_alibi_kv = kv(
    FALCON,
    1,
    8,
    "FalconForCausalLM 2 layers, multi-query (1 KV head), ALiBi, parallel attention, KV, eager "
    "(dynamo)",
    pos=False,
    attn="eager",
)
b_falcon_kv = kv(
    FALCON.but(new_decoder_architecture=True, multi_query=False, num_kv_heads=2, alibi=False),
    4,
    8,
    "FalconForCausalLM 2 layers, new decoder architecture (GQA 4/2 fused qkv split by groups, "
    "KV cached after the expansion to 4 heads, two layer norms), rotary, KV, eager (dynamo)",
    attn="eager",
)

HELIUM = HF(
    "HeliumForCausalLM",
    "HeliumConfig",
    vocab_size=470,
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=8,
    max_position_embeddings=128,
    **TOKENS,
)
B1_KV_BINDINGS = [
    {"seq_len": 5, "past_seq_len": 9},
    {"seq_len": 7, "past_seq_len": 4},
    {"seq_len": 3, "past_seq_len": 13},
]
for _b in B1_KV_BINDINGS:
    _b["total_seq_len"] = _b["seq_len"] + _b["past_seq_len"]


def b_helium_kv_b1(tmp):
    """A decoder exported with the batch fixed at 1 (only the sequence lengths are dynamic)."""
    m, _ = HELIUM.new()
    names_in, names_out = dc.decoder_kv_io(2, True)
    w = dc.make_decoder_kv_wrapper(m, 2, True)
    args = dc.decoder_kv_example(2, 2, 8, True, b=1)
    ds = {
        "input_ids": {1: "seq_len"},
        "attention_mask": {1: "total_seq_len"},
        "position_ids": {1: "seq_len"},
        "past": tuple({2: "past_seq_len"} for _ in range(4)),
    }
    path = cc._path(tmp)
    dc.export_dynamo(w, args, path, names_in, names_out, ds)
    return cc._spec(
        path,
        dc.torch_ref(w, names_in),
        B1_KV_BINDINGS,
        cc.kv_gens(HELIUM.vocab, True),
        "HeliumForCausalLM 2 layers, GQA 4/2, KV cache, batch static 1 (dynamo)",
    )


b_smollm3_kv_op18 = pc.at_opset(
    kv(
        HF(
            "SmolLM3ForCausalLM",
            "SmolLM3Config",
            vocab_size=480,
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=128,
            no_rope_layers=[1, 0],
            use_sliding_window=False,
            **TOKENS,
        ),
        2,
        8,
        "SmolLM3ForCausalLM 2 layers, GQA 4/2, rotary on layer 0 only (NoPE layer 1), KV (dynamo)",
    ),
    18,
)


# ----------------------------------------------------------------------------
# Encoders
# ----------------------------------------------------------------------------
b_modernbert = seq(
    HF(
        "ModernBertModel",
        "ModernBertConfig",
        vocab_size=400,
        hidden_size=32,
        intermediate_size=48,
        num_hidden_layers=3,
        num_attention_heads=4,
        global_attn_every_n_layers=2,
        local_attention=4,
        max_position_embeddings=128,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
        cls_token_id=1,
        sep_token_id=2,
    ),
    ["last_hidden_state"],
    "ModernBertModel 3 layers, hidden 32, global attention every 2 layers, local window 4 "
    "(sliding mask), GeGLU, rotary, no biases (dynamo)",
    attn="eager",
    token_types=False,
    lo=3,
)

b_esm = seq(
    HF(
        "EsmModel",
        "EsmConfig",
        vocab_size=33,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=80,
        position_embedding_type="rotary",
        token_dropout=True,
        mask_token_id=32,
        pad_token_id=1,
    ),
    ["last_hidden_state", "pooler_output"],
    "EsmModel 2 layers, rotary, token dropout rescaling by the mask-token ratio (dynamo)",
    attn="eager",
    token_types=False,
    lo=4,
)


def b_fnet(tmp):
    hf = HF(
        "FNetModel",
        "FNetConfig",
        vocab_size=390,
        hidden_size=32,
        num_hidden_layers=2,
        intermediate_size=64,
        max_position_embeddings=64,
        type_vocab_size=2,
        use_tpu_fourier_optimizations=False,
        pad_token_id=3,
    )
    m, _ = hf.new("eager")
    names = ["input_ids", "token_type_ids"]
    gens = {"input_ids": ("int", 4, hf.vocab), "token_type_ids": ("zeros",)}
    path, ref = dc._seq_model(
        tmp, m, names, ["last_hidden_state", "pooler_output"], "dynamo", gens
    )
    return cc._spec(
        path,
        ref,
        cc.SEQ_BINDINGS,
        gens,
        "FNetModel 2 layers: Fourier token mixing (fftn over seq and hidden, real part) "
        "(dynamo)",
    )


b_deberta = seq(
    HF(
        "DebertaModel",
        "DebertaConfig",
        vocab_size=410,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=64,
        relative_attention=True,
        max_relative_positions=16,
        pos_att_type=["c2p", "p2c"],
        position_biased_input=False,
        type_vocab_size=0,
        pad_token_id=0,
    ),
    ["last_hidden_state"],
    "DebertaModel (v1) 2 layers, relative attention (max 16, c2p+p2c), XSoftmax-free eager "
    "(dynamo)",
    attn="eager",
    token_types=False,
)

b_bigbird_int8 = converted(
    seq(
        HF(
            "BigBirdModel",
            "BigBirdConfig",
            vocab_size=420,
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=4,
            intermediate_size=64,
            max_position_embeddings=128,
            attention_type="original_full",
            type_vocab_size=2,
            pad_token_id=0,
        ),
        ["last_hidden_state", "pooler_output"],
        "BigBirdModel original_full 2 layers, TorchScript opset 17",
        attn="eager",
        exporter="legacy",
        out_dyn={
            "last_hidden_state": {0: "batch", 1: "seq_len"},
            "pooler_output": {0: "batch"},
        },
    ),
    "int8",
)

# ----------------------------------------------------------------------------
# Encoder-decoders
# ----------------------------------------------------------------------------
b_umt5_kv = pc.encdec_kv(
    HF(
        "UMT5ForConditionalGeneration",
        "UMT5Config",
        vocab_size=456,
        d_model=32,
        d_kv=8,
        d_ff=64,
        num_layers=1,
        num_decoder_layers=2,
        num_heads=4,
        relative_attention_num_buckets=8,
        relative_attention_max_distance=20,
        feed_forward_proj="gated-gelu",
        pad_token_id=0,
        eos_token_id=1,
        decoder_start_token_id=0,
        tie_word_embeddings=False,
    ),
    2,
    4,
    8,
    "UMT5ForConditionalGeneration decoder with self-attention KV: a relative bias per layer, "
    "gated-gelu (dynamo)",
)

b_marian_kv = pc.encdec_kv(
    HF(
        "MarianMTModel",
        "MarianConfig",
        vocab_size=430,
        **cc.ENCDEC_1_1,
        max_position_embeddings=64,
        pad_token_id=429,
        eos_token_id=0,
        decoder_start_token_id=429,
        decoder_vocab_size=430,
        scale_embedding=True,
        share_encoder_decoder_embeddings=True,
    ).but(decoder_layers=2),
    2,
    4,
    8,
    "MarianMTModel decoder (2 layers) with self-attention KV, sinusoidal positions offset by "
    "past_seq_len (dynamo)",
)

b_fsmt = encdec(
    HF(
        "FSMTForConditionalGeneration",
        "FSMTConfig",
        langs=["en", "de"],
        src_vocab_size=420,
        tgt_vocab_size=420,
        d_model=32,
        encoder_layers=1,
        decoder_layers=1,
        encoder_attention_heads=4,
        decoder_attention_heads=4,
        encoder_ffn_dim=64,
        decoder_ffn_dim=64,
        max_position_embeddings=64,
        pad_token_id=1,
        bos_token_id=0,
        eos_token_id=2,
        decoder_start_token_id=2,
        use_cache=False,
        vocab_size=420,
    ),
    "FSMTForConditionalGeneration 1+1 layers, sinusoidal positions from input_ids != pad "
    "(dynamo)",
    attn="eager",
    lo=3,
)

# ----------------------------------------------------------------------------
# Vision
# ----------------------------------------------------------------------------
b_mobilenet_v1_tfpad = image(
    HF(
        "MobileNetV1Model",
        "MobileNetV1Config",
        num_channels=3,
        image_size=64,
        depth_multiplier=0.25,
        min_depth=8,
        tf_padding=True,
    ),
    ["last_hidden_state", "pooler_output"],
    (128, 112),
    "MobileNetV1Model depth 0.25, TensorFlow 'SAME' padding computed from the input size "
    "(dynamo)",
    attn="eager",
)

b_pvt_v2 = image(
    HF(
        "PvtV2Model",
        "PvtV2Config",
        num_channels=3,
        num_encoder_blocks=2,
        depths=[1, 1],
        sr_ratios=[4, 2],
        hidden_sizes=[16, 32],
        patch_sizes=[7, 3],
        strides=[4, 2],
        num_attention_heads=[1, 2],
        mlp_ratios=[2, 2],
        linear_attention=False,
    ),
    ["last_hidden_state"],
    (128, 112),
    "PvtV2Model 2 stages: overlapping patch embeddings, spatial-reduction attention (conv sr 4 "
    "and 2 over the H x W grid), depthwise conv in the MLP (reshape by H, W) (dynamo)",
    attn="eager",
)

b_deit_fp16 = converted(
    image(
        HF(
            "DeiTModel",
            "DeiTConfig",
            **cc.TINY_VIT,
            intermediate_size=64,
        ),
        ["last_hidden_state", "pooler_output"],
        (64, 48),
        "DeiTModel 1 layer, CLS + distillation tokens, interpolate_pos_encoding (dynamo)",
        attn="eager",
        extra_kw={"interpolate_pos_encoding": True},
    ),
    "fp16",
)

b_focalnet = image(
    HF(
        "FocalNetModel",
        "FocalNetConfig",
        image_size=64,
        patch_size=4,
        num_channels=3,
        embed_dim=16,
        depths=[1, 1],
        focal_levels=[2, 2],
        focal_windows=[3, 3],
        mlp_ratio=2.0,
        drop_path_rate=0.0,
    ),
    ["last_hidden_state", "pooler_output"],
    (128, 112),
    "FocalNetModel 2 stages, focal modulation (depthwise conv hierarchy, global gate mean), "
    "patch embeddings with padding to multiples of the patch (dynamo)",
    attn="eager",
)

b_cvt_hf = HF(
    "CvtModel",
    "CvtConfig",
    num_channels=3,
    patch_sizes=[7, 3],
    patch_stride=[4, 2],
    patch_padding=[2, 1],
    embed_dim=[16, 32],
    num_heads=[1, 2],
    depth=[1, 2],  # HF indexes a per-stage linspace by the stage: depth[1] >= 2
    mlp_ratio=[2.0, 2.0],
    cls_token=[False, True],
    drop_path_rate=[0.0, 0.0],
    attention_drop_rate=[0.0, 0.0],
    drop_rate=[0.0, 0.0],
    qkv_bias=[True, True],
    qkv_projection_method=["dw_bn", "dw_bn"],
    kernel_qkv=[3, 3],
    padding_kv=[1, 1],
    stride_kv=[2, 2],
    padding_q=[1, 1],
    stride_q=[1, 1],
)
b_cvt = image(
    b_cvt_hf,
    ["last_hidden_state", "cls_token_value"],
    (128, 112),
    "CvtModel 2 stages, conv projections of q/k/v (depthwise conv + BatchNorm over the H x W "
    "grid), CLS token in the last stage (dynamo)",
    attn="eager",
)

# ----------------------------------------------------------------------------
# Audio
# ----------------------------------------------------------------------------
b_w2v2_conformer = audio(
    HF(
        "Wav2Vec2ConformerModel",
        "Wav2Vec2ConformerConfig",
        **cc.AUDIO_ENCODER,
        **cc.CONV_FEATURES,
        **cc.NO_SPEC_AUGMENT,
        position_embeddings_type="rotary",
        conv_depthwise_kernel_size=7,
    ),
    ["last_hidden_state"],
    cc.AUDIO_BINDINGS,
    "Wav2Vec2ConformerModel conv features, rotary positions over frames, conformer conv module "
    "(GLU, depthwise k7), 1 layer (dynamo)",
    attn="eager",
)

ENCODEC_BINDINGS = [
    {"batch": 2, "audio_len": 437},
    {"batch": 3, "audio_len": 650},
    {"batch": 5, "audio_len": 333},
]


def b_encodec(tmp):
    torch = dc._torch()
    hf = HF(
        "EncodecModel",
        "EncodecConfig",
        audio_channels=1,
        num_filters=4,
        num_residual_layers=1,
        upsampling_ratios=[4, 2],
        codebook_size=64,
        codebook_dim=16,
        hidden_size=16,
        num_lstm_layers=1,
        kernel_size=7,
        last_kernel_size=7,
        residual_kernel_size=3,
        use_causal_conv=True,
        pad_mode="reflect",
        target_bandwidths=[1.5],
        sampling_rate=8000,
        normalize=False,
        chunk_length_s=None,
    )
    m, _ = hf.new("eager")

    class W(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.m = inner

        def forward(self, input_values):
            # the encoder alone: the quantizer's codes fail to export (see the docstring)
            return (self.m.encoder(input_values),)

    w = W(m).eval()
    names = ["input_values"]
    dc.export_dynamo(
        w,
        [torch.randn(3, 1, 520)],
        cc._path(tmp),
        names,
        ["embeddings"],
        {"input_values": {0: "batch", 2: "audio_len"}},
    )
    return cc._spec(
        cc._path(tmp),
        dc.torch_ref(w, names),
        ENCODEC_BINDINGS,
        {"*": ("randn",)},
        "EncodecModel encoder (causal convs with 'extra padding' from the length, "
        "reflect pad, LSTM) (dynamo)",
    )


# ----------------------------------------------------------------------------
# Control flow: torch.cond exports an If with subgraphs
# ----------------------------------------------------------------------------
COND_BINDINGS = [
    {"batch": 2, "seq_len": 10},
    {"batch": 3, "seq_len": 7},
    {"batch": 5, "seq_len": 13},
]


def b_cond(tmp):
    torch = dc._torch()
    hf = HF(
        "BertModel",
        "BertConfig",
        vocab_size=380,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=64,
        pad_token_id=0,
    )
    m, _ = hf.new()

    class W(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.m = inner

        def forward(self, input_ids, attention_mask):
            h = self.m(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state

            def pos(x):  # both branches keep [batch, seq_len, hidden]; shapes taken inside
                return x.reshape(x.shape[0], -1, 4, 8).mean(2).repeat(1, 1, 4) + x

            def neg(x):
                return x.transpose(1, 2).flip(2).transpose(1, 2) * 0.5

            # an integer predicate: a float one (the sign of a sum) flips under fused kernels
            return (torch.cond(input_ids.sum() % 2 == 0, pos, neg, (h,)),)

    w = W(m).eval()
    names = ["input_ids", "attention_mask"]
    args = [torch.randint(3, 380, (3, 9)), torch.ones(3, 9, dtype=torch.int64)]
    ds = {n: {0: "batch", 1: "seq_len"} for n in names}
    dc.export_dynamo(w, args, cc._path(tmp), names, ["out"], ds)
    gens = {"input_ids": ("int", 3, 380), "attention_mask": ("ones",)}
    return cc._spec(
        cc._path(tmp),
        dc.torch_ref(w, names),
        COND_BINDINGS,
        gens,
        "BertModel 1 layer then torch.cond on the parity of sum(input_ids): an If whose "
        "branches reshape by the batch / transpose+flip (dynamo)",
    )


# ----------------------------------------------------------------------------
# Second batch: conversions and exporter modes of the models above, a Loop, codecs
# ----------------------------------------------------------------------------
b_olmoe_kv_fp16 = converted(b_olmoe_kv, "fp16")
b_cohere2_swa_kv_int8 = converted(b_cohere2_swa_kv, "int8")
b_pvt_v2_qdq = converted(b_pvt_v2, "qdq")
b_focalnet_noopt = exported(
    b_focalnet, "torch.onnx.export(optimize=False)", dynamo_kw={"optimize": False}
)
b_modernbert_noopt = exported(
    b_modernbert, "torch.onnx.export(optimize=False)", dynamo_kw={"optimize": False}
)
b_cvt_legacy12 = exported(
    lambda tmp: _image_legacy(tmp, b_cvt_hf, ["last_hidden_state", "cls_token_value"]),
    "TorchScript opset 12 (11 has no einsum)",
    legacy_opset=12,
)


def _image_legacy(tmp, hf, outs):
    torch = dc._torch()
    m, _ = hf.new("eager")
    w = dc._wrap_named(m, ["pixel_values"], outs)
    dyn = {"pixel_values": {0: "batch", 2: "height", 3: "width"}}
    dyn.update({o: {0: "batch"} for o in outs})
    dc.export_legacy(
        w, [torch.randn(3, 3, 128, 112)], cc._path(tmp), ["pixel_values"], outs, dyn
    )
    return cc._spec(
        cc._path(tmp),
        dc.torch_ref(w, ["pixel_values"]),
        cc.IMAGE_BINDINGS,
        {"*": ("randn",)},
        f"{hf.model} dynamic batch/height/width (legacy)",
    )


LOOP_BINDINGS = [
    {"batch": 2, "seq_len": 10},
    {"batch": 3, "seq_len": 7},
    {"batch": 5, "seq_len": 13},
]


def b_loop_legacy(tmp):
    """A GRU-like scan over the sequence written as a scripted loop: TorchScript emits a Loop."""
    torch = dc._torch()

    @torch.jit.script
    def scan(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        h = torch.zeros(x.shape[0], w.shape[1])
        outs = []
        for t in range(x.shape[1]):
            h = torch.tanh(x[:, t] @ w + h)
            outs.append(h.unsqueeze(1))
        return torch.cat(outs, 1)

    class W(torch.nn.Module):
        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.emb = torch.nn.Embedding(300, 16)
            self.w = torch.nn.Parameter(torch.randn(16, 16) * 0.3)

        def forward(self, input_ids):
            seq = scan(self.emb(input_ids), self.w)
            return seq, seq[:, -1]

    w = W().eval()
    dyn = {
        "input_ids": {0: "batch", 1: "seq_len"},
        "states": {0: "batch", 1: "seq_len"},
        "last": {0: "batch"},
    }
    dc.export_legacy(
        w,
        [torch.randint(0, 300, (3, 9))],
        cc._path(tmp),
        ["input_ids"],
        ["states", "last"],
        dyn,
    )
    gens = {"input_ids": ("int", 0, 300)}
    return cc._spec(
        cc._path(tmp),
        dc.torch_ref(w, ["input_ids"]),
        LOOP_BINDINGS,
        gens,
        "Embedding + a scripted recurrent scan over seq_len (Loop with a "
        "SequenceInsert / ConcatFromSequence carried state), TorchScript opset 17",
    )


b_dac = audio(
    HF(
        "DacModel",
        "DacConfig",
        encoder_hidden_size=8,
        downsampling_ratios=[2, 4],
        decoder_hidden_size=32,
        n_codebooks=2,
        codebook_size=32,
        codebook_dim=4,
        hidden_size=32,
        upsampling_ratios=[4, 2],
        hop_length=8,
    ),
    ["quantized_representation", "audio_codes"],
    cc.AUDIO_BINDINGS,
    "DacModel encoder (snake activations, strided convs) + residual VQ codes (dynamo)",
    attn="eager",
)

b_mamba = seq(
    HF(
        "MambaModel",
        "MambaConfig",
        vocab_size=400,
        hidden_size=32,
        state_size=8,
        num_hidden_layers=2,
        expand=2,
        conv_kernel=4,
        use_mambapy=False,
        **TOKENS,
    ),
    ["last_hidden_state"],
    "MambaModel 2 layers, selective scan (slow path), causal conv1d (dynamo)",
    attn="eager",
    token_types=False,
)


# ----------------------------------------------------------------------------
# Registry
# ----------------------------------------------------------------------------
ATTACK = [
    ("gptneo_kv_dynamo", b_gptneo_kv),
    ("cohere2_swa_kv_dynamo", b_cohere2_swa_kv),
    ("olmoe_kv_dynamo", b_olmoe_kv),
    ("gemma_kv_noopt", b_gemma_kv_noopt),
    ("nemotron_kv_legacy14", b_nemotron_kv_legacy14),
    ("falcon_kv_dynamo", b_falcon_kv),
    ("helium_kv_b1_dynamo", b_helium_kv_b1),
    ("smollm3_kv_op18", b_smollm3_kv_op18),
    ("modernbert_dynamo", b_modernbert),
    ("esm_dynamo", b_esm),
    ("fnet_dynamo", b_fnet),
    ("deberta_dynamo", b_deberta),
    ("bigbird_legacy_int8", b_bigbird_int8),
    ("umt5_kv_dynamo", b_umt5_kv),
    ("marian_kv_dynamo", b_marian_kv),
    ("fsmt_dynamo", b_fsmt),
    ("mobilenet_v1_tfpad_dynamo", b_mobilenet_v1_tfpad),
    ("pvt_v2_dynamo", b_pvt_v2),
    ("deit_fp16", b_deit_fp16),
    ("focalnet_dynamo", b_focalnet),
    ("cvt_dynamo", b_cvt),
    ("w2v2_conformer_dynamo", b_w2v2_conformer),
    ("bert_cond_dynamo", b_cond),
    ("olmoe_kv_fp16", b_olmoe_kv_fp16),
    ("cohere2_swa_kv_int8", b_cohere2_swa_kv_int8),
    ("pvt_v2_qdq", b_pvt_v2_qdq),
    ("focalnet_noopt", b_focalnet_noopt),
    ("modernbert_noopt", b_modernbert_noopt),
    ("cvt_legacy12", b_cvt_legacy12),
    ("loop_legacy", b_loop_legacy),
    ("cohere2_swa_kv_op23", pc.at_opset(b_cohere2_swa_kv, 23)),
]
EXTRA = [
    ("falcon_alibi_kv_dynamo", b_falcon_alibi_kv),
    ("encodec_dynamo", b_encodec),
    ("dac_dynamo", b_dac),
    ("mamba_dynamo", b_mamba),
    ("modernbert_op23", pc.at_opset(b_modernbert, 23)),
]
dc.MODELS.clear()
dc.EXTRAS.clear()
for _name, _fn in ATTACK:
    dc.MODELS[_name] = (_fn, {})
for _name, _fn in EXTRA:
    dc.EXTRAS[_name] = (_fn, {})


def main(argv=None):
    return cc.corpus_main(argv, "/work/attack_corpus", __doc__)


if __name__ == "__main__":
    sys.exit(main())
