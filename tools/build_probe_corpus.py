#!/usr/bin/env python
"""Build the *probe* corpus: exported models of architectures found in no other corpus.

A bug-hunting corpus the project was never tuned on: 45 small HuggingFace models (random
weights) whose architectures appear neither in the dev corpus (``../shared/dev_corpus``) nor
in the check corpus (``tools/build_check_corpus.py``), plus a few exporter / opset variants.
Same method, truth format and scorer as the check corpus: its builder is imported from its
file by path (and with it the dev builder's generic helpers), and its factories (``HF``,
``kv``, ``seq``, ``encdec``, ``image``, ``audio``) are reused as they are; this file only
adds model configs, one factory for encoder-decoder decoders with a KV cache, and the
registry. Usage, from the repo root, in the build venv of ``tools/README.md``::

    HF_HUB_OFFLINE=1 /work/buildvenv/bin/python tools/build_probe_corpus.py --out /work/probe_corpus
    /work/buildvenv/bin/python tools/build_probe_corpus.py --only llama_kv_dynamo beit_dynamo
    /work/buildvenv/bin/python tools/build_probe_corpus.py --list

Layout written (what ``benchmarks/score_dev_corpus.py --corpus OUT`` expects)::

    OUT/score.py                       copy of the dev corpus scorer
    OUT/models/<name>/model.onnx       stripped model (no intermediate value_info)
    OUT/models/<name>/truth.json       shapes of every value under 3 bindings (no 1, all distinct)
    OUT/models/manifest.json, MODELS.md

Architectures or variants that could not be exported (torch 2.13, transformers 5.24); the
first four are registered as extras (``--only NAME`` reproduces the failure):

* nystromformer_dynamo: torch.export fails with ``AssertionError: False != True``.
* canine_dynamo: torch.export specializes seq_len to the example's 9 (user-specified
  ``Dim.DYNAMIC`` vs the inferred static shape).
* xlnet_dynamo: ConversionError, no compatible ``aten.sub`` overload for
  ``1.0 - attention_mask``; the TorchScript export xlnet_legacy is in the corpus instead.
* mobilevit_dynamo: exports, but the graph fails in onnxruntime at batch != 3 (Concat of 6
  and 3: the example batch is baked in).
* Mixtral / Qwen2-MoE with the default ``experts_implementation`` (grouped_mm): DispatchError,
  no ONNX function for ``transformers.grouped_mm_fallback``; built with ``"batched_mm"``.
* Mixtral with ``experts_implementation="eager"`` under torch.export:
  GuardOnDataDependentSymNode ``Eq(u0, 0)`` (the experts' nonzero); exported with
  TorchScript instead (mixtral_kv_legacy: NonZero / index_add).
* BEiT / Data2VecVision with dynamic height/width: the export bakes a Reshape to 209 that
  fails at other sizes; built at a static 64x48 with a dynamic batch.
* MPNet with ``relative_attention_num_buckets=16``: HF bug (the bucket function uses its
  default of 32 buckets, so index 17 of a 16-row table); built with 32.
"""

from __future__ import annotations

import importlib.util
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

HERE = os.path.dirname(os.path.abspath(__file__))


def _load_check_builder():
    spec = importlib.util.spec_from_file_location(
        "build_check_corpus", os.path.join(HERE, "build_check_corpus.py")
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


cc = _load_check_builder()
dc = cc.dc
HF, kv, seq, encdec, image, audio = cc.HF, cc.kv, cc.seq, cc.encdec, cc.image, cc.audio

# static-resolution image models: only the batch is dynamic
BATCH_BINDINGS = [{"batch": 2}, {"batch": 3}, {"batch": 5}]
TOKENS = {"pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2}

# ----------------------------------------------------------------------------
# Decoders with a KV cache (2 layers, hidden 32)
# ----------------------------------------------------------------------------
LLAMA = HF(
    "LlamaForCausalLM",
    "LlamaConfig",
    vocab_size=400,
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=128,
    tie_word_embeddings=False,
    **TOKENS,
)
b_llama_kv = kv(
    LLAMA, 2, 8, "LlamaForCausalLM 2 layers, hidden 32, GQA 4/2, sdpa, KV cache (dynamo)"
)
b_llama_kv_eager = kv(
    LLAMA,
    2,
    8,
    "LlamaForCausalLM 2 layers, hidden 32, GQA 4/2, eager, KV cache (dynamo)",
    attn="eager",
)

b_qwen3_kv = kv(
    HF(
        "Qwen3ForCausalLM",
        "Qwen3Config",
        vocab_size=410,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        max_position_embeddings=128,
        use_sliding_window=False,
        tie_word_embeddings=True,
        **TOKENS,
    ),
    2,
    16,
    "Qwen3ForCausalLM 2 layers, hidden 32, GQA 4/2 head_dim 16 (q/k RMSNorm), KV cache (dynamo)",
)

b_gemma3_kv = kv(
    HF(
        "Gemma3ForCausalLM",
        "Gemma3TextConfig",
        vocab_size=420,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=1,
        head_dim=8,
        max_position_embeddings=128,
        sliding_window=64,
        layer_types=["sliding_attention", "full_attention"],
        query_pre_attn_scalar=8,
        final_logit_softcapping=30.0,
        attn_logit_softcapping=None,
        **TOKENS,
    ),
    1,
    8,
    "Gemma3ForCausalLM 2 layers, hidden 32, MQA 4/1, sliding(64)+full, softcap, KV (dynamo)",
    attn="eager",
)

b_cohere_kv = kv(
    HF(
        "CohereForCausalLM",
        "CohereConfig",
        vocab_size=430,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=128,
        use_qk_norm=False,
        logit_scale=0.25,
        **TOKENS,
    ),
    2,
    8,
    "CohereForCausalLM 2 layers, hidden 32, GQA 4/2, interleaved rotary, logit scale, "
    "parallel block, KV (dynamo)",
)

b_granite_kv = kv(
    HF(
        "GraniteForCausalLM",
        "GraniteConfig",
        vocab_size=440,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=128,
        embedding_multiplier=2.0,
        residual_multiplier=0.5,
        attention_multiplier=0.2,
        logits_scaling=4.0,
        **TOKENS,
    ),
    4,
    8,
    "GraniteForCausalLM 2 layers, hidden 32, multipliers, KV (dynamo)",
)

b_stablelm_kv = kv(
    HF(
        "StableLmForCausalLM",
        "StableLmConfig",
        vocab_size=450,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=128,
        partial_rotary_factor=0.25,
        use_qkv_bias=True,
        qk_layernorm=True,
        use_parallel_residual=True,
        **TOKENS,
    ),
    4,
    8,
    "StableLmForCausalLM 2 layers, hidden 32, partial rotary 0.25, per-head qk LayerNorm, "
    "parallel residual, KV (dynamo)",
)

b_olmo2_kv = kv(
    HF(
        "Olmo2ForCausalLM",
        "Olmo2Config",
        vocab_size=460,
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
    "Olmo2ForCausalLM 2 layers, hidden 32, GQA, q/k norm over full proj, post-norms, KV (dynamo)",
)

b_xglm_kv = kv(
    HF(
        "XGLMForCausalLM",
        "XGLMConfig",
        vocab_size=510,
        d_model=32,
        num_layers=2,
        attention_heads=4,
        ffn_dim=64,
        max_position_embeddings=64,
        pad_token_id=1,
        bos_token_id=0,
        eos_token_id=2,
    ),
    4,
    8,
    "XGLMForCausalLM 2 layers, d_model 32, sinusoidal positions by position_ids, KV (dynamo)",
    attn="eager",
)

# mixture of experts: "batched_mm" experts export with dynamo, "eager" ones only with TorchScript
MIXTRAL = HF(
    "MixtralForCausalLM",
    "MixtralConfig",
    vocab_size=470,
    hidden_size=32,
    intermediate_size=48,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=128,
    num_local_experts=4,
    num_experts_per_tok=2,
    sliding_window=None,
    experts_implementation="batched_mm",
    **TOKENS,
)
b_mixtral_kv = kv(
    MIXTRAL,
    2,
    8,
    "MixtralForCausalLM 2 layers, hidden 32, 4 experts top-2 (TopK, softmax, routing), KV (dynamo)",
)
b_mixtral_kv_legacy = kv(
    MIXTRAL.but(experts_implementation="eager"),
    2,
    8,
    "MixtralForCausalLM eager experts (nonzero/index_add), KV, TorchScript ({exporter})",
    attn="eager",
    exporter="legacy",
)

b_qwen2_moe_kv = kv(
    HF(
        "Qwen2MoeForCausalLM",
        "Qwen2MoeConfig",
        vocab_size=480,
        hidden_size=32,
        intermediate_size=48,
        moe_intermediate_size=24,
        shared_expert_intermediate_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        num_experts=4,
        num_experts_per_tok=2,
        decoder_sparse_step=1,
        max_position_embeddings=128,
        use_sliding_window=False,
        norm_topk_prob=False,
        experts_implementation="batched_mm",
        **TOKENS,
    ),
    2,
    8,
    "Qwen2MoeForCausalLM 2 layers, hidden 32, 4 experts top-2 + shared expert gate, KV (dynamo)",
)

# TorchScript only (eager attention)
b_codegen_kv_legacy = kv(
    HF(
        "CodeGenForCausalLM",
        "CodeGenConfig",
        vocab_size=490,
        n_embd=32,
        n_layer=2,
        n_head=4,
        rotary_dim=4,
        n_positions=64,
        n_ctx=64,
        n_inner=64,
        tie_word_embeddings=False,
        **TOKENS,
    ),
    4,
    8,
    "CodeGenForCausalLM 2 layers, n_embd 32, fused qkv with mp_num=4 reshape, "
    "rotary_dim 4, KV, eager ({exporter})",
    attn="eager",
    exporter="legacy",
)

b_bloom_kv_legacy = kv(
    HF(
        "BloomForCausalLM",
        "BloomConfig",
        vocab_size=500,
        hidden_size=32,
        n_layer=2,
        n_head=4,
        **TOKENS,
    ),
    4,
    8,
    "BloomForCausalLM 2 layers, hidden 32, ALiBi from attention_mask cumsum, KV ({exporter})",
    pos=False,
    attn="eager",
    exporter="legacy",
)

# ----------------------------------------------------------------------------
# Encoders (2 layers, hidden 32)
# ----------------------------------------------------------------------------
# relative_attention_num_buckets=16 fails in HF (see the module docstring)
MPNET = HF(
    "MPNetModel",
    "MPNetConfig",
    vocab_size=380,
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=4,
    intermediate_size=64,
    max_position_embeddings=80,
    relative_attention_num_buckets=32,
    pad_token_id=1,
    bos_token_id=0,
    eos_token_id=2,
)
b_mpnet = seq(
    MPNET,
    ["last_hidden_state", "pooler_output"],
    "MPNetModel 2 layers, hidden 32, relative position buckets (32) computed from seq_len, positions "
    "from input_ids != pad cumsum (dynamo)",
    token_types=False,
    lo=3,
    attn="eager",
)
b_mpnet_legacy = seq(
    MPNET,
    ["last_hidden_state", "pooler_output"],
    "MPNetModel TorchScript, opset 17",
    token_types=False,
    lo=3,
    attn="eager",
    exporter="legacy",
    out_dyn={"last_hidden_state": {0: "batch", 1: "seq_len"}, "pooler_output": {0: "batch"}},
)

b_squeezebert = seq(
    HF(
        "SqueezeBertModel",
        "SqueezeBertConfig",
        vocab_size=390,
        hidden_size=32,
        embedding_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=64,
        q_groups=2,
        k_groups=2,
        v_groups=2,
        post_attention_groups=2,
        intermediate_groups=4,
        output_groups=4,
        pad_token_id=0,
    ),
    ["last_hidden_state", "pooler_output"],
    "SqueezeBertModel 2 layers, hidden 32, grouped Conv1d (NCW layout permutes) (dynamo)",
    attn="eager",
)

b_mobilebert = seq(
    HF(
        "MobileBertModel",
        "MobileBertConfig",
        vocab_size=400,
        hidden_size=64,
        embedding_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        intra_bottleneck_size=32,
        true_hidden_size=32,
        num_feedforward_networks=2,
        max_position_embeddings=64,
        normalization_type="no_norm",
        trigram_input=True,
        pad_token_id=0,
    ),
    ["last_hidden_state", "pooler_output"],
    "MobileBertModel 2 layers, bottleneck 32/64, trigram input (pad/slice/concat), NoNorm, "
    "2 FFNs (dynamo)",
    attn="eager",
)

b_roformer = seq(
    HF(
        "RoFormerModel",
        "RoFormerConfig",
        vocab_size=430,
        embedding_size=32,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=64,
        rotary_value=False,
        pad_token_id=0,
    ),
    ["last_hidden_state"],
    "RoFormerModel 2 layers, sinusoidal rotary in the encoder (dynamo)",
    attn="eager",
)

XLNET = HF(
    "XLNetModel",
    "XLNetConfig",
    vocab_size=420,
    d_model=32,
    n_layer=2,
    n_head=4,
    d_inner=64,
    attn_type="bi",
    mem_len=None,
    reuse_len=None,
    pad_token_id=5,
    bos_token_id=1,
    eos_token_id=2,
)
b_xlnet_legacy = seq(
    XLNET,
    ["last_hidden_state"],
    "XLNetModel 2 layers, relative attention, TorchScript opset 17",
    token_types=True,
    lo=6,
    attn="eager",
    exporter="legacy",
    out_dyn={"last_hidden_state": {0: "batch", 1: "seq_len"}},
)


def b_xlmr_ortfused(tmp):
    from onnxruntime.transformers.optimizer import optimize_model

    xlmr = HF(
        "XLMRobertaModel",
        "XLMRobertaConfig",
        vocab_size=400,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=80,
        type_vocab_size=1,
        pad_token_id=1,
        bos_token_id=0,
        eos_token_id=2,
    )
    spec = seq(
        xlmr,
        ["last_hidden_state", "pooler_output"],
        "XLMRobertaModel TorchScript ",
        token_types=False,
        lo=3,
        attn="eager",
        exporter="legacy",
        out_dyn={
            "last_hidden_state": {0: "batch", 1: "seq_len"},
            "pooler_output": {0: "batch"},
        },
    )(tmp)
    path = os.path.join(tmp, "fused.onnx")
    fused = cc._ort_fuse(optimize_model, spec["path"], path, "bert", 4, 32)
    spec["path"] = path
    spec["note"] += f"fused by {fused()}"
    return spec


# extras: export failures (see the module docstring)
b_nystromformer = seq(
    HF(
        "NystromformerModel",
        "NystromformerConfig",
        vocab_size=410,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=80,
        num_landmarks=4,
        segment_means_seq_len=64,
        conv_kernel_size=5,
        inv_coeff_init_option=False,
        pad_token_id=1,
    ),
    ["last_hidden_state"],
    "NystromformerModel 2 layers, 4 landmarks (seq reshaped by landmarks when seq > 64, "
    "else full), conv on V (dynamo)",
    token_types=True,
    lo=3,
    attn="eager",
)

b_canine = seq(
    HF(
        "CanineModel",
        "CanineConfig",
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=256,
        downsampling_rate=4,
        upsampling_kernel_size=4,
        num_hash_functions=4,
        num_hash_buckets=64,
        local_transformer_stride=16,
        vocab_size=1000,
    ),
    ["last_hidden_state", "pooler_output"],
    "CanineModel hidden 32, hash embeddings, downsampling conv rate 4, local attention, "
    "upsampling (dynamo)",
    token_types=True,
    lo=3,
    attn="eager",
)

b_xlnet = seq(
    XLNET,
    ["last_hidden_state"],
    "XLNetModel 2 layers, d_model 32, bi attention, sinusoidal relative positions (klen..-qlen), "
    "rel_shift via reshape (dynamo)",
    token_types=True,
    lo=6,
    attn="eager",
)

# ----------------------------------------------------------------------------
# Encoder-decoders (1 + 1 layers, d_model 32, no cache)
# ----------------------------------------------------------------------------
E11 = cc.ENCDEC_1_1
MBART = HF(
    "MBartForConditionalGeneration",
    "MBartConfig",
    vocab_size=450,
    **E11,
    max_position_embeddings=64,
    pad_token_id=1,
    bos_token_id=0,
    eos_token_id=2,
    decoder_start_token_id=2,
    use_cache=False,
    scale_embedding=True,
)
b_mbart = encdec(
    MBART,
    "MBartForConditionalGeneration 1+1, d_model 32, learned positions offset 2, pre-LN (dynamo)",
    lo=3,
)
b_pegasus = encdec(
    HF(
        "PegasusForConditionalGeneration",
        "PegasusConfig",
        vocab_size=440,
        **E11,
        max_position_embeddings=64,
        pad_token_id=0,
        eos_token_id=1,
        decoder_start_token_id=0,
        use_cache=False,
    ),
    "PegasusForConditionalGeneration 1+1, d_model 32, sinusoidal positions, pre-LN (dynamo)",
    lo=3,
)
b_m2m100 = encdec(
    HF(
        "M2M100ForConditionalGeneration",
        "M2M100Config",
        vocab_size=460,
        **E11,
        max_position_embeddings=64,
        pad_token_id=1,
        bos_token_id=0,
        eos_token_id=2,
        decoder_start_token_id=2,
        use_cache=False,
        scale_embedding=True,
    ),
    "M2M100ForConditionalGeneration 1+1, d_model 32, sinusoidal positions from input_ids != pad "
    "cumsum (dynamo)",
    lo=3,
)
b_blenderbot = encdec(
    HF(
        "BlenderbotForConditionalGeneration",
        "BlenderbotConfig",
        vocab_size=470,
        **E11,
        max_position_embeddings=64,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
        decoder_start_token_id=1,
        use_cache=False,
    ),
    "BlenderbotForConditionalGeneration 1+1, d_model 32 (dynamo)",
    lo=3,
)


def b_mbart_ortfused(tmp):
    from onnxruntime.transformers.optimizer import optimize_model

    def export(w, args, names_in, outs, axes):
        axes["logits"] = {0: "batch", 1: "dec_seq_len"}
        axes["encoder_last_hidden_state"] = {0: "batch", 1: "enc_seq_len"}
        raw = os.path.join(tmp, "raw.onnx")
        dc.export_legacy(w, args, raw, names_in, outs, axes)
        return cc._ort_fuse(optimize_model, raw, cc._path(tmp), "bart", 4, 32)

    m, _ = MBART.new("eager")
    return cc._encdec(tmp, m, MBART.vocab, "MBart TorchScript fused by ", lo=3, export=export)


# ----------------------------------------------------------------------------
# Encoder-decoder decoders (2 layers) with a self-attention KV cache, fed encoder_hidden_states
# ----------------------------------------------------------------------------
ED_KV_BINDINGS = [
    {"batch": 2, "seq_len": 5, "past_seq_len": 9, "enc_seq_len": 7},
    {"batch": 3, "seq_len": 7, "past_seq_len": 4, "enc_seq_len": 12},
    {"batch": 5, "seq_len": 3, "past_seq_len": 13, "enc_seq_len": 6},
]


def _encdec_kv(tmp, model, n_layers, n_heads, head_dim, d_model, vocab, note, lo=3):
    torch = dc._torch()
    from transformers import DynamicCache, EncoderDecoderCache

    class W(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, decoder_input_ids, encoder_hidden_states, *past):
            cache = EncoderDecoderCache(
                DynamicCache(
                    ddp_cache_data=[(past[2 * i], past[2 * i + 1]) for i in range(n_layers)]
                ),
                DynamicCache(),
            )
            out = self.m(
                decoder_input_ids=decoder_input_ids,
                encoder_outputs=(encoder_hidden_states,),
                cache=cache,
                use_cache=True,
            )
            pres = []
            for layer in out.cache.self_attention_cache.layers:
                pres += [layer.keys, layer.values]
            return (out.logits, *pres)

    w = W(model).eval()
    names_in = ["decoder_input_ids", "encoder_hidden_states"]
    names_in += [
        f"past_key_values.{i}.decoder.{k}" for i in range(n_layers) for k in ("key", "value")
    ]
    names_out = ["logits"] + [
        f"present.{i}.decoder.{k}" for i in range(n_layers) for k in ("key", "value")
    ]
    b, s, p, e = 3, 4, 7, 8
    args = [torch.randint(lo, vocab, (b, s)), torch.randn(b, e, d_model)]
    args += [torch.randn(b, n_heads, p, head_dim) for _ in range(2 * n_layers)]
    ds = {
        "decoder_input_ids": {0: "batch", 1: "seq_len"},
        "encoder_hidden_states": {0: "batch", 1: "enc_seq_len"},
        "past": tuple({0: "batch", 2: "past_seq_len"} for _ in range(2 * n_layers)),
    }
    path = cc._path(tmp)
    dc.export_dynamo(w, args, path, names_in, names_out, ds)
    gens = {"decoder_input_ids": ("int", lo, vocab), "*": ("randn",)}
    return cc._spec(path, dc.torch_ref(w, names_in), ED_KV_BINDINGS, gens, note)


def encdec_kv(hf, n_layers, n_heads, head_dim, note):
    """A seq2seq LM's decoder (eager attention), cache ``n_layers`` x ``n_heads`` x ``head_dim``."""

    def build(tmp):
        m, _ = hf.new("eager")
        return _encdec_kv(
            tmp, m, n_layers, n_heads, head_dim, hf.kw["d_model"], hf.vocab, note
        )

    return build


b_whisper_kv = encdec_kv(
    HF(
        "WhisperForConditionalGeneration",
        "WhisperConfig",
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
    ),
    2,
    4,
    8,
    "WhisperForConditionalGeneration decoder with self-attention KV cache (positions offset by "
    "past_seq_len), cross attention computed from encoder_hidden_states (dynamo)",
)

b_t5_kv = encdec_kv(
    HF(
        "T5ForConditionalGeneration",
        "T5Config",
        vocab_size=456,
        d_model=32,
        d_kv=8,
        d_ff=64,
        num_layers=1,
        num_decoder_layers=2,
        num_heads=4,
        relative_attention_num_buckets=8,
        relative_attention_max_distance=20,
        pad_token_id=0,
        eos_token_id=1,
        decoder_start_token_id=0,
        tie_word_embeddings=False,
    ),
    2,
    4,
    8,
    "T5ForConditionalGeneration decoder with self-attention KV cache: relative position bias "
    "over past+seq keys, queries offset by past (dynamo)",
)

b_bart_kv = encdec_kv(
    cc.BART.but(use_cache=True, decoder_layers=2),
    2,
    4,
    8,
    "BartForConditionalGeneration decoder (2 layers) with self-attention KV cache, learned "
    "positions offset by past_seq_len (dynamo)",
)

# ----------------------------------------------------------------------------
# Images
# ----------------------------------------------------------------------------
b_beit = image(
    HF(
        "BeitModel",
        "BeitConfig",
        image_size=32,
        patch_size=8,
        num_channels=3,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        use_relative_position_bias=True,
        use_shared_relative_position_bias=False,
        use_absolute_position_embeddings=False,
        use_mean_pooling=True,
        layer_scale_init_value=0.1,
    ),
    ["last_hidden_state", "pooler_output"],
    (64, 48),
    "BeitModel 2 layers, patch 8, relative position bias interpolated to the patch grid, "
    "interpolate_pos_encoding, mean pooling; static 64x48 (dynamic h/w export is wrong for other "
    "sizes: baked Reshape 209) (dynamo)",
    attn="eager",
    dyn_hw=False,
    bindings=BATCH_BINDINGS,
    extra_kw={"interpolate_pos_encoding": True},
)

b_data2vec_vision = image(
    HF(
        "Data2VecVisionModel",
        "Data2VecVisionConfig",
        image_size=32,
        patch_size=8,
        num_channels=3,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
        use_relative_position_bias=False,
        use_shared_relative_position_bias=True,
        use_mean_pooling=False,
    ),
    ["last_hidden_state", "pooler_output"],
    (64, 48),
    "Data2VecVisionModel shared relative position bias, static 64x48 (dynamo)",
    attn="eager",
    bindings=BATCH_BINDINGS,
    dyn_hw=False,
    extra_kw={"interpolate_pos_encoding": True},
)

b_levit = image(
    HF(
        "LevitModel",
        "LevitConfig",
        image_size=64,
        num_channels=3,
        kernel_size=3,
        stride=2,
        padding=1,
        patch_size=16,
        hidden_sizes=[32, 48],
        num_attention_heads=[2, 3],
        depths=[1, 1],
        key_dim=[8, 8],
        drop_path_rate=0,
        mlp_ratio=[2, 2],
        attention_ratio=[2, 2],
        down_ops=[["Subsample", 8, 32 // 8, 4, 2, 2]],
    ),
    ["last_hidden_state", "pooler_output"],
    (64, 64),
    "LevitModel 2 stages, conv stem /16, attention bias table gathered by index (static res), "
    "subsample attention (dynamo)",
    attn="eager",
    dyn_hw=False,
    bindings=BATCH_BINDINGS,
)

b_yolos = image(
    HF(
        "YolosModel",
        "YolosConfig",
        image_size=[32, 32],
        patch_size=8,
        num_channels=3,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        num_detection_tokens=5,
        use_mid_position_embeddings=False,
    ),
    ["last_hidden_state"],
    (64, 48),
    "YolosModel 2 layers, patch 8, 5 detection tokens, position embeddings interpolated "
    "to the patch grid (dynamo)",
    attn="eager",
)

b_dpt = image(
    HF(
        "DPTModel",
        "DPTConfig",
        image_size=32,
        patch_size=8,
        num_channels=3,
        hidden_size=32,
        num_hidden_layers=4,
        num_attention_heads=2,
        intermediate_size=64,
        backbone_out_indices=[0, 1, 2, 3],
        neck_hidden_sizes=[8, 16, 24, 32],
        fusion_hidden_size=16,
        is_hybrid=False,
    ),
    ["last_hidden_state"],
    (64, 48),
    "DPTModel ViT 4 layers patch 8, resized position embedding (dynamo)",
    attn="eager",
)

b_regnet = image(
    HF(
        "RegNetModel",
        "RegNetConfig",
        num_channels=3,
        embedding_size=16,
        hidden_sizes=[16, 24, 32, 48],
        depths=[1, 1, 1, 1],
        groups_width=8,
        layer_type="y",
    ),
    ["last_hidden_state", "pooler_output"],
    (128, 112),
    "RegNetModel Y (SE), groups width 8, 4 stages (dynamo)",
    attn="eager",
)

b_convnextv2 = image(
    HF(
        "ConvNextV2Model",
        "ConvNextV2Config",
        num_channels=3,
        patch_size=4,
        hidden_sizes=[16, 24, 32, 48],
        depths=[1, 1, 1, 1],
        drop_path_rate=0.0,
    ),
    ["last_hidden_state", "pooler_output"],
    (128, 112),
    "ConvNextV2Model GRN (global response norm: norm over H,W), 4 stages (dynamo)",
    attn="eager",
)

# extra: export failure (see the module docstring)
b_mobilevit = image(
    HF(
        "MobileViTModel",
        "MobileViTConfig",
        image_size=64,
        num_channels=3,
        hidden_sizes=[16, 24, 32],
        neck_hidden_sizes=[8, 8, 16, 16, 24, 32, 48],
        num_attention_heads=2,
        mlp_ratio=2.0,
        expand_ratio=2.0,
        patch_size=2,
        conv_kernel_size=3,
    ),
    ["last_hidden_state", "pooler_output"],
    (64, 96),
    "MobileViTModel: unfold into 2x2 patches (interpolate when not divisible), transformer, "
    "fold (dynamo)",
    attn="eager",
    bindings=[
        {"batch": 2, "height": 64, "width": 96},
        {"batch": 3, "height": 96, "width": 128},
        {"batch": 5, "height": 128, "width": 64},
    ],
)

# ----------------------------------------------------------------------------
# Audio (the check corpus's wav2vec2-style encoder and conv features)
# ----------------------------------------------------------------------------
AUDIO = {**cc.AUDIO_ENCODER, **cc.CONV_FEATURES, **cc.NO_SPEC_AUGMENT}
b_wavlm = audio(
    HF("WavLMModel", "WavLMConfig", **AUDIO, num_buckets=32, max_bucket_distance=100),
    ["last_hidden_state"],
    cc.AUDIO_BINDINGS,
    "WavLMModel conv features, gated relative position bias (log buckets over frames), 1 layer "
    "(dynamo)",
    attn="eager",
)
b_hubert = audio(
    HF(
        "HubertModel",
        "HubertConfig",
        **{**AUDIO, "feat_extract_norm": "layer"},
        do_stable_layer_norm=True,
    ),
    ["last_hidden_state"],
    cc.AUDIO_BINDINGS,
    "HubertModel conv features with layer norm (transposes), stable layer norm (dynamo)",
)
b_unispeech_sat = audio(
    HF("UniSpeechSatModel", "UniSpeechSatConfig", **AUDIO),
    ["last_hidden_state"],
    cc.AUDIO_BINDINGS,
    "UniSpeechSatModel (dynamo)",
)


# ----------------------------------------------------------------------------
# Opset 23 variants (the exporter's default is 20)
# ----------------------------------------------------------------------------
def at_opset(builder, opset):
    """The same builder with every dynamo export at ``opset`` (``dc.export_dynamo`` patched)."""

    def build(tmp):
        orig = dc.export_dynamo

        def export_at_opset(*args, **kw):
            return orig(*args, **{**kw, "opset": opset})

        dc.export_dynamo = export_at_opset
        try:
            spec = builder(tmp)
        finally:
            dc.export_dynamo = orig
        spec["note"] += f"; opset {opset}"
        return spec

    return build


# ----------------------------------------------------------------------------
# Registry: replaces the check builder's (the dev builder's build_one / write_index are reused)
# ----------------------------------------------------------------------------
PROBE = [
    ("llama_kv_dynamo", b_llama_kv),
    ("llama_kv_eager_dynamo", b_llama_kv_eager),
    ("qwen3_kv_dynamo", b_qwen3_kv),
    ("gemma3_kv_dynamo", b_gemma3_kv),
    ("cohere_kv_dynamo", b_cohere_kv),
    ("granite_kv_dynamo", b_granite_kv),
    ("stablelm_kv_dynamo", b_stablelm_kv),
    ("olmo2_kv_dynamo", b_olmo2_kv),
    ("xglm_kv_dynamo", b_xglm_kv),
    ("mixtral_kv_dynamo", b_mixtral_kv),
    ("mixtral_kv_legacy", b_mixtral_kv_legacy),
    ("qwen2_moe_kv_dynamo", b_qwen2_moe_kv),
    ("codegen_kv_legacy", b_codegen_kv_legacy),
    ("bloom_kv_legacy", b_bloom_kv_legacy),
    ("mpnet_dynamo", b_mpnet),
    ("mpnet_legacy", b_mpnet_legacy),
    ("squeezebert_dynamo", b_squeezebert),
    ("mobilebert_dynamo", b_mobilebert),
    ("roformer_dynamo", b_roformer),
    ("xlnet_legacy", b_xlnet_legacy),
    ("xlmr_ortfused", b_xlmr_ortfused),
    ("mbart_dynamo", b_mbart),
    ("pegasus_dynamo", b_pegasus),
    ("m2m100_dynamo", b_m2m100),
    ("blenderbot_dynamo", b_blenderbot),
    ("mbart_ortfused", b_mbart_ortfused),
    ("whisper_kv_dynamo", b_whisper_kv),
    ("t5_kv_dynamo", b_t5_kv),
    ("bart_kv_dynamo", b_bart_kv),
    ("beit_dynamo", b_beit),
    ("data2vec_vision_dynamo", b_data2vec_vision),
    ("levit_dynamo", b_levit),
    ("yolos_dynamo", b_yolos),
    ("dpt_dynamo", b_dpt),
    ("regnet_dynamo", b_regnet),
    ("convnextv2_dynamo", b_convnextv2),
    ("wavlm_dynamo", b_wavlm),
    ("hubert_dynamo", b_hubert),
    ("unispeech_sat_dynamo", b_unispeech_sat),
    ("llama_kv_op23", at_opset(b_llama_kv, 23)),
    ("qwen3_kv_op23", at_opset(b_qwen3_kv, 23)),
    ("gemma3_kv_op23", at_opset(b_gemma3_kv, 23)),
    ("whisper_kv_op23", at_opset(b_whisper_kv, 23)),
    ("mobilebert_op23", at_opset(b_mobilebert, 23)),
    ("yolos_op23", at_opset(b_yolos, 23)),
]
# Recorded export failures (not in the corpus; see the module docstring, rebuild with --only NAME)
EXTRA = [
    ("nystromformer_dynamo", b_nystromformer),
    ("canine_dynamo", b_canine),
    ("xlnet_dynamo", b_xlnet),
    ("mobilevit_dynamo", b_mobilevit),
]
dc.MODELS.clear()
dc.EXTRAS.clear()
for _name, _fn in PROBE:
    dc.MODELS[_name] = (_fn, {})
for _name, _fn in EXTRA:
    dc.EXTRAS[_name] = (_fn, {})


def main(argv=None):
    return cc.corpus_main(argv, "/work/probe_corpus", __doc__)


if __name__ == "__main__":
    sys.exit(main())
