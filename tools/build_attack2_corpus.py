#!/usr/bin/env python
"""Build the *attack2* corpus: models of architectures and export modes found in no other corpus.

A third bug-hunting corpus (after the probe and attack corpora): small HuggingFace models
(random weights) of architectures in none of the dev, check, probe and attack corpora, plus
hand-written torch modules for export modes those corpora lack (``torch.export.Dim`` with
min/max bounds and a derived dim, TorchScript at opsets 11 and 13, ``torch.cond`` on a shape
predicate, a scripted ``while`` loop growing a tensor, int64 index arithmetic). Same method,
truth format and scorer as the check corpus: the attack builder (and through it the probe,
check and dev builders) is imported from its file by path and its factories reused. Usage,
from the repo root, in the build venv of ``tools/README.md``::

    HF_HUB_OFFLINE=1 /work/buildvenv/bin/python tools/build_attack2_corpus.py --out /work/attack2_corpus
    /work/buildvenv/bin/python tools/build_attack2_corpus.py --only bit_dynamo --out DIR

Layout written: as ``build_probe_corpus.py`` (``OUT/models/<name>/{model.onnx,truth.json}``).

Models (32): decoders with a KV cache (GLM interleaved partial rotary, Persimmon fused qkv +
q/k LayerNorm, GraniteMoE, DiffLlama differential attention, BitNet, EXAONE 4 and GPT-OSS with
a cropped sliding-window layer, GPT-OSS attention sinks + MoE, Persimmon by TorchScript at
opset 13); encoders (ERNIE by TorchScript at opset 11, RemBERT, XLM sinusoidal, X-MOD language
adapters, LayoutLM with a [batch, seq_len, 4] bbox input); vision (BiT dynamic 'SAME' padding,
GLPN, SigLIP and CLIP (TorchScript opset 13) with interpolated positions, DETR with a ResNet
backbone, Depth Anything, all with dynamic height/width; Swin v2 and ViTMAE (noise input,
argsort/gather masking) at a static size); audio (SEW-D, Data2VecAudio, UniSpeech,
Wav2Vec2-BERT on input features, the Moonshine encoder); PatchTST (unfold); and hand-written
torch modules: index arithmetic (argsort, gather, topk(L // 2), scatter_add, cumsum, roll,
unfold, einsum, interpolate by a scale factor, pad to a multiple of 4, arange % L, boolean-mask
index, nonzero) exported by torch.export with ``Dim(min, max)`` bounds and a second input of
derived size ``2 * seq_len``, and by TorchScript at opsets 11 and 13; ``torch.cond`` on a shape
predicate; a scripted ``while`` loop growing a tensor (a Loop with a data-dependent condition).

torch and onnxruntime disagree (the truth is onnxruntime's; the graph is what users get):
depth_anything_dynamo (the output interpolation size is baked at the example's 70x56).
index_ops_legacy11/13: the TorchScript exporter, given no output dynamic axes, declares
output dims it names itself, and some are false (``upsampled: [TopKtopk_values_dim_0, 8,
TopKtopk_values_dim_1]``, really ``[batch, 8, 3 * seq_len // 2]``): kept on purpose, the
scorer counts those declared dims.

Export failures (torch 2.13, transformers 5.24), the first two registered as extras
(``--only NAME`` reproduces them):

* deepseek_v3_kv_dynamo: the eager forward fails on the example cache ("Sizes of tensors
  must match except in dimension 2. Expected 4 in dimension 1 but got 1"): the MLA key's
  rotary part keeps one head.
* dinov2_reg_dynamo: exports, but onnxruntime fails at sizes other than the example's
  (an ``Add`` of the interpolated position embeddings: the scale factors are baked).
* Swin v2 with a dynamic height/width: exports, then a ``Reshape`` baked at the example
  size fails in onnxruntime; built at a static 64x48 instead.
* Llama 4 text (chunked attention, MoE, NoPE layers): its rotary embedding is complex-valued
  and ``aten.unsqueeze`` of a complex tensor has no ONNX function (DispatchError).
* GraniteMoE and GPT-OSS with the default ``experts_implementation`` (grouped_mm): no ONNX
  function for ``transformers.grouped_mm_fallback``; built with ``"batched_mm"``.
* CLIP vision by TorchScript without ``interpolate_pos_encoding``: refuses any size but 32x32.
* Depth Anything with float ``reassemble_factors`` (2.0): ``ConvTranspose2d`` gets a float
  kernel size; ints instead.
* In the hand-written modules: ``aten.remainder`` by a SymInt (``arange(L) % L``) and
  ``torch.masked_select`` fail to convert (dynamo); a tensor modulus and a boolean-mask index
  instead. TorchScript cannot export ``unfold`` over a dynamic axis (three strided slices
  stacked instead) nor ``einsum`` at opset 11 (a ``bmm``). ``torch.cond`` whose branches
  give different sizes (crop to 8 / pad to 8) fails in torch.export (the branch outputs'
  strides); both branches keep the shape instead.
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


ab = _load(
    "build_attack_corpus"
)  # loads the probe (ab.pc), check (ab.cc) and dev (ab.dc) builders
pc, cc, dc = ab.pc, ab.cc, ab.dc
HF, kv, seq, encdec, image, audio = cc.HF, cc.kv, cc.seq, cc.encdec, cc.image, cc.audio
TOKENS = pc.TOKENS
SEQ_BINDINGS = cc.SEQ_BINDINGS


def legacy_at(builder, opset):
    """The same builder with its TorchScript export at ``opset``."""
    return ab.exported(builder, f"TorchScript opset {opset}", legacy_opset=opset)


# ----------------------------------------------------------------------------
# Decoders with a KV cache (2 layers, hidden 32)
# ----------------------------------------------------------------------------
b_deepseek_v3_kv = kv(
    HF(
        "DeepseekV3ForCausalLM",
        "DeepseekV3Config",
        vocab_size=400,
        hidden_size=32,
        intermediate_size=64,
        moe_intermediate_size=16,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        n_shared_experts=1,
        n_routed_experts=4,
        num_experts_per_tok=2,
        n_group=1,
        topk_group=1,
        first_k_dense_replace=1,
        q_lora_rank=16,
        kv_lora_rank=16,
        qk_rope_head_dim=4,
        qk_nope_head_dim=4,
        v_head_dim=8,
        max_position_embeddings=128,
        experts_implementation="batched_mm",
        **TOKENS,
    ),
    4,
    8,
    "DeepseekV3ForCausalLM 2 layers: multi-head latent attention (q/kv LoRA ranks 16, rope "
    "4 + nope 4 head dims, rotary on a slice), layer 1 MoE 4 experts top-2 + shared (dynamo)",
    attn="eager",
)

b_glm_kv = kv(
    HF(
        "GlmForCausalLM",
        "GlmConfig",
        vocab_size=410,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=8,
        partial_rotary_factor=0.5,
        max_position_embeddings=128,
        **TOKENS,
    ),
    2,
    8,
    "GlmForCausalLM 2 layers, GQA 4/2, interleaved partial rotary 0.5, fused gate_up (dynamo)",
)

b_persimmon_kv = kv(
    HF(
        "PersimmonForCausalLM",
        "PersimmonConfig",
        vocab_size=420,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        max_position_embeddings=128,
        partial_rotary_factor=0.5,
        qk_layernorm=True,
        **TOKENS,
    ),
    4,
    8,
    "PersimmonForCausalLM 2 layers, fused qkv viewed [b, s, heads, 3*head_dim], q/k LayerNorm, "
    "partial rotary 0.5, relu2 MLP, KV, eager (dynamo)",
    attn="eager",
)

b_granitemoe_kv = kv(
    HF(
        "GraniteMoeForCausalLM",
        "GraniteMoeConfig",
        vocab_size=430,
        hidden_size=32,
        intermediate_size=24,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        num_local_experts=4,
        num_experts_per_tok=2,
        max_position_embeddings=128,
        experts_implementation="batched_mm",
        embedding_multiplier=2.0,
        logits_scaling=4.0,
        residual_multiplier=0.5,
        attention_multiplier=0.25,
        **TOKENS,
    ),
    2,
    8,
    "GraniteMoeForCausalLM 2 layers, GQA 4/2, 4 experts top-2 (parallel experts with "
    "index-sorted dispatch), embedding/residual/attention multipliers (dynamo)",
)

b_diffllama_kv = kv(
    HF(
        "DiffLlamaForCausalLM",
        "DiffLlamaConfig",
        vocab_size=440,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=128,
        **TOKENS,
    ),
    2,
    8,
    "DiffLlamaForCausalLM 2 layers, differential attention (value halves concatenated, two "
    "softmax maps subtracted with a learned lambda, group norm), eager (dynamo)",
    attn="eager",
)

b_bitnet_kv = kv(
    HF(
        "BitNetForCausalLM",
        "BitNetConfig",
        vocab_size=450,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=128,
        **TOKENS,
    ),
    2,
    8,
    "BitNetForCausalLM 2 layers, GQA 4/2, sub-layer norms, relu2 MLP (dynamo)",
)

EXAONE4 = HF(
    "Exaone4ForCausalLM",
    "Exaone4Config",
    vocab_size=460,
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


def b_exaone4_swa_kv(tmp):
    m, cfg = EXAONE4.new()
    note = (
        f"Exaone4ForCausalLM 2 layers, GQA 4/2, q/k RMSNorm, post-norms, layer 0 sliding window "
        f"{cc.SWA_WINDOW} (cropped cache, rotary), layer 1 full without rotary (dynamo)"
    )
    return cc._kv(
        tmp, m, 2, 8, True, EXAONE4.vocab, note, "dynamo", cc.SWA_KV_BINDINGS, cache_config=cfg
    )


GPT_OSS = HF(
    "GptOssForCausalLM",
    "GptOssConfig",
    vocab_size=470,
    hidden_size=32,
    intermediate_size=16,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=8,
    num_local_experts=4,
    num_experts_per_tok=2,
    sliding_window=cc.SWA_WINDOW,
    layer_types=["sliding_attention", "full_attention"],
    max_position_embeddings=128,
    experts_implementation="batched_mm",
    **TOKENS,
)


def b_gpt_oss_kv(tmp):
    m, cfg = GPT_OSS.new("eager")
    note = (
        f"GptOssForCausalLM 2 layers, GQA 4/2, attention sinks (a learned logit column "
        f"concatenated before the softmax), layer 0 sliding window {cc.SWA_WINDOW}, MoE 4 experts "
        "top-2 with clamped swiglu, eager (dynamo)"
    )
    return cc._kv(
        tmp, m, 2, 8, True, GPT_OSS.vocab, note, "dynamo", cc.SWA_KV_BINDINGS, cache_config=cfg
    )


b_persimmon_kv_legacy13 = legacy_at(
    kv(
        HF(
            "PersimmonForCausalLM",
            "PersimmonConfig",
            vocab_size=420,
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            max_position_embeddings=128,
            partial_rotary_factor=0.5,
            qk_layernorm=True,
            **TOKENS,
        ),
        4,
        8,
        "PersimmonForCausalLM (persimmon_kv_dynamo's config), KV, eager ({exporter})",
        attn="eager",
        exporter="legacy",
    ),
    13,
)

# ----------------------------------------------------------------------------
# Encoders
# ----------------------------------------------------------------------------
ERNIE = HF(
    "ErnieModel",
    "ErnieConfig",
    vocab_size=390,
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=4,
    intermediate_size=64,
    max_position_embeddings=64,
    type_vocab_size=2,
    use_task_id=True,
    task_type_vocab_size=3,
    pad_token_id=0,
)
b_ernie_legacy11 = legacy_at(
    seq(
        ERNIE,
        ["last_hidden_state", "pooler_output"],
        "ErnieModel 2 layers, task-type embeddings (zeros made from the input shape), eager, "
        "TorchScript",
        attn="eager",
        exporter="legacy",
        out_dyn={
            "last_hidden_state": {0: "batch", 1: "seq_len"},
            "pooler_output": {0: "batch"},
        },
    ),
    11,
)

b_rembert = seq(
    HF(
        "RemBertModel",
        "RemBertConfig",
        vocab_size=400,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        input_embedding_size=16,
        output_embedding_size=24,
        intermediate_size=64,
        max_position_embeddings=64,
        type_vocab_size=2,
        pad_token_id=0,
    ),
    ["last_hidden_state", "pooler_output"],
    "RemBertModel 2 layers, decoupled input embedding 16 projected to hidden 32 (dynamo)",
    attn="eager",
)

b_xlm = seq(
    HF(
        "XLMModel",
        "XLMConfig",
        vocab_size=380,
        emb_dim=32,
        n_layers=2,
        n_heads=4,
        max_position_embeddings=64,
        sinusoidal_embeddings=True,
        causal=False,
        n_langs=1,
        use_lang_emb=False,
        pad_index=2,
    ),
    ["last_hidden_state"],
    "XLMModel 2 layers, sinusoidal positions from arange(seq_len), lengths from the mask "
    "(mask * padding product) (dynamo)",
    attn="eager",
    token_types=False,
    lo=3,
)

XMOD = HF(
    "XmodModel",
    "XmodConfig",
    vocab_size=410,
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=4,
    intermediate_size=64,
    max_position_embeddings=64,
    languages=["en_XX", "de_DE"],
    default_language="de_DE",
    adapter_reduction_factor=4,
    pad_token_id=1,
)
b_xmod = seq(
    XMOD,
    ["last_hidden_state", "pooler_output"],
    "XmodModel 2 layers, per-language bottleneck adapters (default language picked by an index "
    "over the batch), positions from input_ids != pad (cumsum) (dynamo)",
    attn="eager",
    lo=3,
)

LAYOUT_BINDINGS = SEQ_BINDINGS


def b_layoutlm(tmp):
    """LayoutLM: a [batch, seq_len, 4] bbox input next to the token ids."""
    torch = dc._torch()
    hf = HF(
        "LayoutLMModel",
        "LayoutLMConfig",
        vocab_size=400,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=64,
        max_2d_position_embeddings=128,
        type_vocab_size=2,
        pad_token_id=0,
    )
    m, _ = hf.new("eager")
    names = ["input_ids", "bbox", "attention_mask"]
    outs = ["last_hidden_state", "pooler_output"]
    w = dc._wrap_named(m, names, outs)
    x0 = torch.randint(0, 60, (3, 9, 2))
    bbox = torch.cat([x0, x0 + torch.randint(0, 60, (3, 9, 2))], -1)
    args = [torch.randint(0, 400, (3, 9)), bbox, torch.ones(3, 9, dtype=torch.int64)]
    ds = {n: {0: "batch", 1: "seq_len"} for n in names}
    dc.export_dynamo(w, args, cc._path(tmp), names, outs, ds)
    # zero boxes: any random box would need x1 >= x0 (the width / height embeddings)
    gens = {"input_ids": ("int", 0, 400), "bbox": ("zeros",), "attention_mask": ("ones",)}
    return cc._spec(
        cc._path(tmp),
        dc.torch_ref(w, names),
        LAYOUT_BINDINGS,
        gens,
        "LayoutLMModel 2 layers: bbox [batch, seq_len, 4] gathered per coordinate "
        "(x0, y0, x1, y1, height, width embeddings) (dynamo)",
    )


# ----------------------------------------------------------------------------
# Vision with dynamic height / width
# ----------------------------------------------------------------------------
b_swinv2 = image(
    HF(
        "Swinv2Model",
        "Swinv2Config",
        image_size=64,
        patch_size=4,
        num_channels=3,
        embed_dim=16,
        depths=[1, 1],
        num_heads=[2, 4],
        window_size=4,
        mlp_ratio=2.0,
        drop_path_rate=0.0,
    ),
    ["last_hidden_state", "pooler_output"],
    (64, 48),
    "Swinv2Model 2 stages, window 4: cosine attention with a log-spaced continuous position "
    "bias MLP, shifted windows, patch merging; static 64x48, dynamic batch (dynamo)",
    attn="eager",
    dyn_hw=False,
    bindings=pc.BATCH_BINDINGS,
)

b_bit = image(
    HF(
        "BitModel",
        "BitConfig",
        num_channels=3,
        embedding_size=16,
        hidden_sizes=[16, 32],
        depths=[1, 1],
        layer_type="preactivation",
        global_padding="SAME",
        num_groups=4,
        out_features=None,
    ),
    ["last_hidden_state", "pooler_output"],
    (128, 112),
    "BitModel 2 stages (pre-activation), weight-standardized convs with dynamic 'SAME' padding "
    "computed from the input size, group norm, max-pool with dynamic pad (dynamo)",
    attn="eager",
)

b_glpn = image(
    HF(
        "GLPNModel",
        "GLPNConfig",
        num_channels=3,
        num_encoder_blocks=2,
        depths=[1, 1],
        sr_ratios=[4, 2],
        hidden_sizes=[16, 32],
        patch_sizes=[7, 3],
        strides=[4, 2],
        num_attention_heads=[1, 2],
        mlp_ratios=[2, 2],
        decoder_hidden_size=16,
    ),
    ["last_hidden_state"],
    (128, 112),
    "GLPNModel 2 stages (Segformer-like encoder: overlapping patch embeddings, spatial-reduction "
    "attention, depthwise conv MLP reshaped by H, W) (dynamo)",
    attn="eager",
)

b_dinov2_reg = image(
    HF(
        "Dinov2WithRegistersModel",
        "Dinov2WithRegistersConfig",
        **cc.TINY_VIT,
        num_register_tokens=2,
        mlp_ratio=2,
        layerscale_value=0.1,
    ),
    ["last_hidden_state", "pooler_output"],
    (64, 48),
    "Dinov2WithRegistersModel 1 layer, patch 8: bicubic interpolation of the position embeddings "
    "to the patch grid, CLS + 2 register tokens (dynamo)",
    attn="eager",
)

b_siglip_vision = image(
    HF(
        "SiglipVisionModel",
        "SiglipVisionConfig",
        image_size=32,
        patch_size=8,
        num_channels=3,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
    ),
    ["last_hidden_state", "pooler_output"],
    (64, 48),
    "SiglipVisionModel 1 layer, patch 8, interpolate_pos_encoding (no CLS: the whole grid), "
    "multi-head attention pooling head with a probe query (dynamo)",
    attn="eager",
    extra_kw={"interpolate_pos_encoding": True},
)


def _clip_vision_legacy(tmp):
    torch = dc._torch()
    hf = HF(
        "CLIPVisionModel",
        "CLIPVisionConfig",
        image_size=32,
        patch_size=8,
        num_channels=3,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
    )
    m, _ = hf.new("eager")
    outs = ["last_hidden_state", "pooler_output"]

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
        "last_hidden_state": {0: "batch", 1: "tokens"},
        "pooler_output": {0: "batch"},
    }
    dc.export_legacy(
        w, [torch.randn(3, 3, 64, 48)], cc._path(tmp), ["pixel_values"], outs, dyn
    )
    return cc._spec(
        cc._path(tmp),
        dc.torch_ref(w, ["pixel_values"]),
        cc.IMAGE_BINDINGS,
        {"*": ("randn",)},
        "CLIPVisionModel 1 layer, patch 8, interpolate_pos_encoding (bicubic to the "
        "patch grid), pre-layernorm, CLS pooled; dynamic batch/height/width, output "
        "dim 1 declared as an opaque 'tokens'",
    )


b_clip_vision_legacy13 = legacy_at(_clip_vision_legacy, 13)


def b_vitmae(tmp):
    """ViTMAE random masking with the noise given as an input (no RandomUniform in the graph)."""
    torch = dc._torch()
    hf = HF(
        "ViTMAEModel", "ViTMAEConfig", **cc.TINY_VIT, intermediate_size=64, mask_ratio=0.75
    )
    m, _ = hf.new("eager")
    names = ["pixel_values", "noise"]
    outs = ["last_hidden_state", "mask", "ids_restore"]
    w = dc._wrap_named(m, names, outs)
    dc.export_dynamo(
        w,
        [torch.randn(3, 3, 32, 32), torch.rand(3, 16)],
        cc._path(tmp),
        names,
        outs,
        {"pixel_values": {0: "batch"}, "noise": {0: "batch"}},
    )
    return cc._spec(
        cc._path(tmp),
        dc.torch_ref(w, names),
        pc.BATCH_BINDINGS,
        {"pixel_values": ("randn",), "noise": ("rand",)},
        "ViTMAEModel 1 layer, patch 8, 32x32: random masking from a noise input "
        "(argsort twice, keep int(16 * 0.25) patches by a gather, the mask scattered "
        "back); static size, dynamic batch (dynamo)",
    )


DETR_BINDINGS = [
    {"batch": 2, "height": 75, "width": 98},
    {"batch": 3, "height": 113, "width": 67},
    {"batch": 5, "height": 82, "width": 121},
]


def _detr_hf():
    import transformers

    backbone = transformers.ResNetConfig(
        num_channels=3,
        embedding_size=8,
        hidden_sizes=[8, 16],
        depths=[1, 1],
        layer_type="basic",
        out_features=["stage2"],
    )
    return HF(
        "DetrModel",
        "DetrConfig",
        use_timm_backbone=False,
        use_pretrained_backbone=False,
        backbone_config=backbone,
        num_queries=5,
        d_model=32,
        encoder_layers=1,
        decoder_layers=1,
        encoder_attention_heads=4,
        decoder_attention_heads=4,
        encoder_ffn_dim=64,
        decoder_ffn_dim=64,
    )


def b_detr(tmp):
    hf = _detr_hf()
    m, _ = hf.new("eager")
    path, ref = dc._image_dyn(
        tmp, m, ["last_hidden_state", "encoder_last_hidden_state"], (128, 112)
    )
    return cc._spec(
        path,
        ref,
        DETR_BINDINGS,
        {"*": ("randn",)},
        "DetrModel ResNet backbone (2 stages), pixel mask of ones interpolated to the "
        "feature map (nearest, size from the map), sine positions by cumsum over the "
        "mask, 1+1 layers, 5 queries (dynamo)",
    )


def _depth_anything_hf():
    import transformers

    backbone = transformers.Dinov2Config(
        image_size=28,
        patch_size=14,
        num_channels=3,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        mlp_ratio=2,
        out_indices=[1, 2],
        reshape_hidden_states=False,
        apply_layernorm=True,
    )
    return HF(
        "DepthAnythingForDepthEstimation",
        "DepthAnythingConfig",
        backbone_config=backbone,
        reassemble_hidden_size=32,
        patch_size=14,
        neck_hidden_sizes=[16, 32],
        reassemble_factors=[2, 1],
        fusion_hidden_size=16,
        head_hidden_size=8,
    )


def b_depth_anything(tmp):
    hf = _depth_anything_hf()
    m, _ = hf.new("eager")
    path, ref = dc._image_dyn(tmp, m, ["predicted_depth"], (70, 56))
    return cc._spec(
        path,
        ref,
        DEPTH_BINDINGS,
        {"*": ("randn",)},
        "DepthAnythingForDepthEstimation (DINOv2 backbone patch 14, 2 layers, DPT "
        "neck: reassemble by H // 14, W // 14, fusion upsampling x2, head interpolated "
        "to (14 * (H // 14), 14 * (W // 14))) (dynamo)",
    )


DEPTH_BINDINGS = [
    {"batch": 2, "height": 84, "width": 98},
    {"batch": 3, "height": 112, "width": 70},
    {"batch": 5, "height": 56, "width": 126},
]

# ----------------------------------------------------------------------------
# Audio
# ----------------------------------------------------------------------------
AUDIO = {**cc.AUDIO_ENCODER, **cc.CONV_FEATURES, **cc.NO_SPEC_AUGMENT}
b_sewd = audio(
    HF(
        "SEWDModel",
        "SEWDConfig",
        **AUDIO,
        squeeze_factor=2,
        max_position_embeddings=64,
        position_buckets=16,
        relative_attention=True,
        pos_att_type=("p2c", "c2p"),
        norm_rel_ebd="layer_norm",
    ),
    ["last_hidden_state"],
    cc.AUDIO_BINDINGS,
    "SEWDModel conv features, squeeze by 2 (pooled frames, upsampled and padded back to the "
    "frame count), DeBERTa-v2 disentangled attention over frames (dynamo)",
    attn="eager",
)

b_data2vec_audio = audio(
    HF("Data2VecAudioModel", "Data2VecAudioConfig", **AUDIO).but(
        num_conv_pos_embeddings=3, conv_pos_kernel_size=3
    ),
    ["last_hidden_state", "extract_features"],
    cc.AUDIO_BINDINGS,
    "Data2VecAudioModel conv features (layer norm per conv), stacked positional convs (k3, "
    "odd: no frame dropped) (dynamo)",
    attn="eager",
)

b_unispeech = audio(
    HF("UniSpeechModel", "UniSpeechConfig", **AUDIO),
    ["last_hidden_state", "extract_features"],
    cc.AUDIO_BINDINGS,
    "UniSpeechModel conv features, grouped positional conv (k8, last frame dropped) (dynamo)",
    attn="eager",
)

W2V2_BERT_BINDINGS = [
    {"batch": 2, "frames": 37},
    {"batch": 3, "frames": 50},
    {"batch": 5, "frames": 23},
]


def b_w2v2_bert(tmp):
    """Wav2Vec2-BERT: input_features [batch, frames, 160], a conformer with relative keys."""
    torch = dc._torch()
    hf = HF(
        "Wav2Vec2BertModel",
        "Wav2Vec2BertConfig",
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
        feature_projection_input_dim=160,
        conv_depthwise_kernel_size=5,
        position_embeddings_type="relative_key",
        left_max_position_embeddings=8,
        right_max_position_embeddings=4,
        add_adapter=True,
        num_adapter_layers=1,
        adapter_kernel_size=3,
        adapter_stride=2,
        output_hidden_size=32,
        **cc.NO_SPEC_AUGMENT,
    )
    m, _ = hf.new("eager")
    names = ["input_features"]
    w = dc._wrap_named(m, names, ["last_hidden_state"])
    dc.export_dynamo(
        w,
        [torch.randn(3, 40, 160)],
        cc._path(tmp),
        names,
        ["last_hidden_state"],
        {"input_features": {0: "batch", 1: "frames"}},
    )
    return cc._spec(
        cc._path(tmp),
        dc.torch_ref(w, names),
        W2V2_BERT_BINDINGS,
        {"*": ("randn",)},
        "Wav2Vec2BertModel 1 conformer layer: relative_key positions (clamped "
        "distance -8..4 gathered into an embedding), causal depthwise conv k5 with "
        "left pad, adapter conv k3 s2 (frames -> (frames - 1) // 2 + 1) (dynamo)",
    )


def b_moonshine_enc(tmp):
    """The Moonshine encoder alone: convs over raw audio, then rotary attention over frames."""
    torch = dc._torch()
    hf = HF(
        "MoonshineModel",
        "MoonshineConfig",
        vocab_size=400,
        hidden_size=32,
        intermediate_size=64,
        encoder_num_hidden_layers=1,
        decoder_num_hidden_layers=1,
        encoder_num_attention_heads=4,
        decoder_num_attention_heads=4,
        max_position_embeddings=256,
        partial_rotary_factor=0.5,
        **TOKENS,
    )
    m, _ = hf.new("eager")

    class W(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.m = inner

        def forward(self, input_values):
            return (self.m.encoder(input_values).last_hidden_state,)

    w = W(m).eval()
    names = ["input_values"]
    dc.export_dynamo(
        w,
        [torch.randn(3, 1600)],
        cc._path(tmp),
        names,
        ["last_hidden_state"],
        {"input_values": {0: "batch", 1: "audio_len"}},
    )
    return cc._spec(
        cc._path(tmp),
        dc.torch_ref(w, names),
        MOONSHINE_BINDINGS,
        {"*": ("randn",)},
        "MoonshineModel encoder: conv k127 s64 / k7 s3 / k3 s2 over raw audio, "
        "group norm, partial rotary attention over frames (dynamo)",
    )


MOONSHINE_BINDINGS = [
    {"batch": 2, "audio_len": 1437},
    {"batch": 3, "audio_len": 2650},
    {"batch": 5, "audio_len": 1033},
]

# ----------------------------------------------------------------------------
# Time series
# ----------------------------------------------------------------------------
PATCHTST_BINDINGS = [{"batch": 2}, {"batch": 3}, {"batch": 5}]


def b_patchtst(tmp):
    """PatchTST: unfold of the series into patches, channel-independent attention."""
    torch = dc._torch()
    hf = HF(
        "PatchTSTModel",
        "PatchTSTConfig",
        num_input_channels=3,
        context_length=32,
        patch_length=8,
        patch_stride=4,
        d_model=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        ffn_dim=32,
        scaling="std",
        do_mask_input=False,
    )
    m, _ = hf.new("eager")
    names = ["past_values"]
    w = dc._wrap_named(m, names, ["last_hidden_state", "loc", "scale"])
    dc.export_dynamo(
        w,
        [torch.randn(3, 32, 3)],
        cc._path(tmp),
        names,
        ["last_hidden_state", "loc", "scale"],
        {"past_values": {0: "batch"}},
    )
    return cc._spec(
        cc._path(tmp),
        dc.torch_ref(w, names),
        PATCHTST_BINDINGS,
        {"*": ("randn",)},
        "PatchTSTModel context 32, patches 8 stride 4 by unfold, std scaling, "
        "channel-independent attention (batch * channels); dynamic batch (dynamo)",
    )


# ----------------------------------------------------------------------------
# Hand-written torch modules: export modes
# ----------------------------------------------------------------------------
OPS_BINDINGS = [
    {"batch": 2, "seq_len": 10},
    {"batch": 3, "seq_len": 7},
    {"batch": 5, "seq_len": 13},
]


def _index_ops_module(torch, with_unfold=True, with_einsum=True):
    """Int64 index arithmetic and shape-driven ops over x [batch, seq_len, 8].

    ``with_unfold=False`` gives the windows by slicing instead (TorchScript cannot export an
    ``unfold`` over a dynamic axis); ``with_einsum=False`` a ``bmm`` (opset 11 has no Einsum).
    """
    functional = torch.nn.functional

    class IndexOps(torch.nn.Module):
        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.lin = torch.nn.Linear(8, 8)

        def forward(self, x):
            h = self.lin(x)
            n = h.shape[1]
            score = h.sum(-1)  # [B, L]
            order = score.argsort(dim=1, descending=True)
            gathered = torch.gather(h, 1, order.unsqueeze(-1).expand(-1, -1, 8))
            vals, idx = score.topk(n // 2, dim=1)
            scat = torch.zeros_like(h).scatter_add(
                1, idx.unsqueeze(-1).expand(-1, -1, 8), h[:, : n // 2]
            )
            csum = h.cumsum(1)
            rolled = torch.roll(h, shifts=3, dims=1)
            if with_unfold:
                win = h.unfold(1, 3, 2)  # [B, (n - 3) // 2 + 1, 8, 3]
            else:
                win = torch.stack([h[:, 0 : n - 2 : 2], h[:, 1 : n - 1 : 2], h[:, 2:n:2]], -1)
            if with_einsum:
                ein = torch.einsum("bld,bmd->blm", h, rolled)
            else:
                ein = torch.bmm(h, rolled.transpose(1, 2))
            up = functional.interpolate(h.transpose(1, 2), scale_factor=1.5, mode="linear")
            padded = functional.pad(h, (0, 0, 0, (4 - n % 4) % 4))  # to a multiple of 4
            blocks = padded.reshape(h.shape[0], -1, 4, 8).mean(2)
            pos = torch.arange(n)
            # int64 index arithmetic; the modulus is a tensor: aten.remainder by a SymInt fails
            perm = (pos * 3) % (pos.max() + 1)
            stepped = torch.index_select(h, 1, perm)
            selected = h[h > 0.5]  # masked_select fails to convert: a boolean index instead
            nz = torch.nonzero(score > 0)
            return gathered, vals, scat, csum, win, ein, up, blocks, stepped, selected, nz

    return IndexOps().eval()


OPS_OUTS = [
    "gathered",
    "topk_values",
    "scattered",
    "cumsum",
    "windows",
    "einsum",
    "upsampled",
    "blocks",
    "stepped",
    "selected",
    "nonzero",
]


def b_index_ops_bounded(tmp):
    """torch.export with ``Dim(min, max)`` bounds and a second input of derived size 2*seq_len."""
    torch = dc._torch()
    inner = _index_ops_module(torch)

    class W(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.m = inner

        def forward(self, x, y):
            # y has length 2 * seq_len: the exporter writes a derived dim expression
            return (*self.m(x), y[:, ::2] + x.sum(-1), y.reshape(y.shape[0], -1, 2).sum(-1))

    w = W().eval()
    names = ["x", "y"]
    batch = torch.export.Dim("batch", min=2, max=16)
    seq_len = torch.export.Dim("seq_len", min=4, max=64)
    ds = {"x": {0: batch, 1: seq_len}, "y": {0: batch, 1: 2 * seq_len}}
    outs = [*OPS_OUTS, "y_even", "y_pairs"]
    with torch.no_grad():
        torch.onnx.export(
            w,
            (torch.randn(3, 9, 8), torch.randn(3, 18)),
            dynamo=True,
            dynamic_shapes=ds,
            input_names=names,
            output_names=outs,
        ).save(cc._path(tmp))
    return cc._spec(
        cc._path(tmp),
        dc.torch_ref(w, names),
        OPS_BINDINGS,
        {"*": ("randn",)},
        "hand-written: argsort/gather, topk(L // 2), scatter_add, cumsum, roll, unfold, "
        "einsum, interpolate(scale_factor=1.5), pad to a multiple of 4, arange index "
        "arithmetic, boolean-mask index, nonzero; Dim bounds batch 2..16, seq_len 4..64, "
        "y of derived size 2 * seq_len (dynamo)",
    )


def _index_ops_legacy(opset):
    def build(tmp):
        torch = dc._torch()
        w = _index_ops_module(torch, with_unfold=False, with_einsum=opset >= 12)
        names = ["x"]
        dyn = {"x": {0: "batch", 1: "seq_len"}}
        dc.export_legacy(
            w, [torch.randn(3, 9, 8)], cc._path(tmp), names, OPS_OUTS, dyn, opset=opset
        )
        return cc._spec(
            cc._path(tmp),
            dc.torch_ref(w, names),
            OPS_BINDINGS,
            {"*": ("randn",)},
            "hand-written index ops (index_ops_bounded_dynamo's module, x only, the "
            "unfold by three strided slices stacked, a bmm for the einsum below opset 12), "
            f"TorchScript opset {opset}",
        )

    return build


COND_BINDINGS = [
    {"batch": 2, "seq_len": 10},
    {"batch": 3, "seq_len": 5},
    {"batch": 5, "seq_len": 13},
]


def b_shape_cond(tmp):
    """torch.cond on a shape predicate (seq_len even): the branches reshape by seq_len // 2."""
    torch = dc._torch()

    class W(torch.nn.Module):
        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.lin = torch.nn.Linear(8, 8)

        def forward(self, x):
            h = self.lin(x)

            def pairs(t):  # swap the feature halves; the reshapes read the outer shape
                b, n, d = t.shape
                return t.reshape(b, n, 2, d // 2).flip(2).reshape(b, n, d) * 2.0

            def odd(t):
                return torch.cat([t[:, 1:], t[:, :1]], 1) + 1.0

            fixed = torch.cond(h.shape[1] % 2 == 0, pairs, odd, (h,))
            return fixed, fixed.sum(1) + h.mean(1)

    w = W().eval()
    names = ["x"]
    dc.export_dynamo(
        w,
        [torch.randn(3, 9, 8)],
        cc._path(tmp),
        names,
        ["fixed", "pooled"],
        {"x": {0: "batch", 1: "seq_len"}},
    )
    return cc._spec(
        cc._path(tmp),
        dc.torch_ref(w, names),
        COND_BINDINGS,
        {"*": ("randn",)},
        "hand-written: torch.cond(seq_len % 2 == 0) (an If on a shape predicate) whose "
        "branches reshape to [batch, seq_len, 2, 4] and back / rotate by one "
        "position (dynamo)",
    )


def b_while_legacy(tmp):
    """A scripted while loop growing a tensor by a data-dependent number of steps."""
    torch = dc._torch()

    @torch.jit.script
    def grow(x: torch.Tensor) -> torch.Tensor:
        out = x[:, :1]
        i = 1
        while i < x.shape[1] and bool(out.abs().sum() < 1e6):
            out = torch.cat([out, x[:, i : i + 1] * 2.0], 1)
            i += 2
        return out

    class W(torch.nn.Module):
        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.lin = torch.nn.Linear(8, 8)

        def forward(self, x):
            g = grow(self.lin(x))
            return g, g.shape[1] * x[:, 0]

    w = W().eval()
    dyn = {
        "x": {0: "batch", 1: "seq_len"},
        "grown": {0: "batch", 1: "steps"},
        "scaled": {0: "batch"},
    }
    dc.export_legacy(w, [torch.randn(3, 9, 8)], cc._path(tmp), ["x"], ["grown", "scaled"], dyn)
    return cc._spec(
        cc._path(tmp),
        dc.torch_ref(w, ["x"]),
        OPS_BINDINGS,
        {"*": ("randn",)},
        "hand-written: a scripted while loop (condition on the index and on the data) "
        "growing a loop-carried tensor by one column per step ([B, 1, 8] -> "
        "[B, ceil(L / 2), 8]), TorchScript opset 17",
    )


# ----------------------------------------------------------------------------
# Registry
# ----------------------------------------------------------------------------
ATTACK2 = [
    ("glm_kv_dynamo", b_glm_kv),
    ("persimmon_kv_dynamo", b_persimmon_kv),
    ("granitemoe_kv_dynamo", b_granitemoe_kv),
    ("diffllama_kv_dynamo", b_diffllama_kv),
    ("bitnet_kv_dynamo", b_bitnet_kv),
    ("exaone4_swa_kv_dynamo", b_exaone4_swa_kv),
    ("gpt_oss_swa_kv_dynamo", b_gpt_oss_kv),
    ("persimmon_kv_legacy13", b_persimmon_kv_legacy13),
    ("ernie_legacy11", b_ernie_legacy11),
    ("rembert_dynamo", b_rembert),
    ("xlm_dynamo", b_xlm),
    ("xmod_dynamo", b_xmod),
    ("layoutlm_dynamo", b_layoutlm),
    ("swinv2_dynamo", b_swinv2),
    ("bit_dynamo", b_bit),
    ("glpn_dynamo", b_glpn),
    ("siglip_vision_dynamo", b_siglip_vision),
    ("clip_vision_legacy13", b_clip_vision_legacy13),
    ("vitmae_dynamo", b_vitmae),
    ("detr_dynamo", b_detr),
    ("depth_anything_dynamo", b_depth_anything),
    ("sewd_dynamo", b_sewd),
    ("data2vec_audio_dynamo", b_data2vec_audio),
    ("unispeech_dynamo", b_unispeech),
    ("w2v2_bert_dynamo", b_w2v2_bert),
    ("moonshine_enc_dynamo", b_moonshine_enc),
    ("patchtst_dynamo", b_patchtst),
    ("index_ops_bounded_dynamo", b_index_ops_bounded),
    ("index_ops_legacy11", _index_ops_legacy(11)),
    ("index_ops_legacy13", _index_ops_legacy(13)),
    ("shape_cond_dynamo", b_shape_cond),
    ("while_legacy", b_while_legacy),
]
EXTRA = [
    ("deepseek_v3_kv_dynamo", b_deepseek_v3_kv),
    ("dinov2_reg_dynamo", b_dinov2_reg),
]
dc.MODELS.clear()
dc.EXTRAS.clear()
for _name, _fn in ATTACK2:
    dc.MODELS[_name] = (_fn, {})
for _name, _fn in EXTRA:
    dc.EXTRAS[_name] = (_fn, {})


def main(argv=None):
    return cc.corpus_main(argv, "/work/attack2_corpus", __doc__)


if __name__ == "__main__":
    sys.exit(main())
