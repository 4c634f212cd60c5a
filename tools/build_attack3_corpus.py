#!/usr/bin/env python
"""Build the *attack3* corpus: models whose shape logic is unusual, found in no other corpus.

A fourth bug-hunting corpus (after the probe, attack and attack2 corpora): small HuggingFace
models (random weights) whose sequence length goes through chunking, block padding, pooling or
a selective scan, plus hand-written torch modules built around shape-driven and
data-dependent ops, each exported both by torch.export (``dynamo=True, optimize=False``, with
``torch.export.Dim`` bounds and the derived dims ``2 * s`` and ``s + 1``) and by TorchScript
(``dynamic_axes``). Same method, truth format and scorer as the check corpus: the attack2
builder (and through it the attack, probe, check and dev builders) is imported from its file
by path and its factories reused. Usage, from the repo root, in the build venv of
``tools/README.md``::

    HF_HUB_OFFLINE=1 /work/buildvenv/bin/python tools/build_attack3_corpus.py --out /work/attack3_corpus
    /work/buildvenv/bin/python tools/build_attack3_corpus.py --only mamba2_dynamo --out DIR

Layout written: as ``build_probe_corpus.py`` (``OUT/models/<name>/{model.onnx,truth.json}``).

Models (28): Mamba2 (SSD chunked scan, the sequence padded to a multiple of the chunk; also
by torch.export with ``optimize=False``), Bamba (Mamba2 + attention), Zamba2 (Mamba2 + a
shared attention block), Reformer with local attention (padded to a multiple of the chunk
length; also with ``optimize=False``), LongT5 local attention (blocks of ``local_radius + 1``,
padded; also by TorchScript), Funnel with max pooling twice (ceil mode; also by TorchScript)
and Funnel by TorchScript with mean pooling and truncation, XLNet by TorchScript, LFM2 (gated
short conv; also by TorchScript), BigBird ``block_sparse`` (falls back to full attention on short sequences: the graph has no
block logic), YOSO (LSH-expectation attention; also by TorchScript); hand-written: data-dependent sizes (nonzero
incl. of an all-zero mask, boolean index, masked_select (TorchScript only), unique,
repeat_interleave by a tensor, index_put, scatter, topk(L // 3 + 1)), shape-driven windows
(narrow, unfold (dynamo only), F.pad by sizes, interpolate by size and scale, roll, flip,
tril/triu, einsum), derived input sizes (split by computed sizes, arange(L // 2, 2 * L + 1, 3),
``//`` and ``%``, empty slices, ``view(b, -1, n)``), image ops over a dynamic height/width
(pixel_shuffle/unshuffle, F.unfold, ConvTranspose with output_padding, dilated strided conv,
pooling with ceil_mode, adaptive pooling, meshgrid, affine_grid + grid_sample, interpolate
with align_corners), assorted ops (chunk, tensor_split, one_hot, diagonal, diag_embed, outer
products, cdist, sort + take_along_dim, scatter_reduce, bucketize, a slice by an ``.item()``
size), and ``torch.cond`` on ``seq_len > 8``.

torch and onnxruntime disagree (the truth is onnxruntime's; the graph is what users get):
window_ops_legacy (TorchScript bakes ``roll``'s shift ``L // 2`` at the example's 9),
funnel_legacy (TorchScript bakes a length-dependent step at the example's length 9: the values
agree with torch there, not at 7, 10 or 13). The TorchScript
exporter, given no output dynamic axes, names the output dims itself, and some of those names
are false (``select_ops_legacy``: the ``unique`` count and the batch share a name;
``grid_ops_legacy``: a float-computed ``Resize`` size and ``2 * height`` share one): kept on
purpose, the scorer counts those declared dims.

Export failures (torch 2.13, transformers 5.24), registered as extras (``--only NAME``
reproduces them):

* jamba_dynamo and recurrent_gemma_dynamo: the Python loop of the slow scan over the sequence
  specializes ``seq_len`` (torch.export: "tracing inferred a static shape of 9").
* longt5_tglobal_dynamo: exports, but onnxruntime fails at sizes other than the example's
  (an ``Add`` of the transient-global side keys: a global block count baked).
* led_dynamo: data-dependent guard in the Longformer encoder's global attention indexing.
* switch_dynamo: torch.export fails ("Cannot swap t1 because it has weakref").
* mamba2_legacy, zamba2_legacy: TorchScript writes a ``Transpose`` with a negative ``perm``
  (``{0, -2, -1, 1}``), which onnxruntime refuses to load.
* reformer_local_legacy: TorchScript fails (``unordered_map::at``).

In the hand-written modules, not exportable and left out: ``masked_select``, ``roll`` by a
SymInt shift, ``cdist``, ``kthvalue`` and ``cumprod`` (dynamo); ``unfold`` over a dynamic
axis, ``adaptive_avg_pool2d``, ``affine_grid``, ``diag_embed``, ``take_along_dim``,
``kthvalue``, ``cumprod``, ``scatter_reduce(include_self=False)``, ``torch._check`` on an
``.item()`` size, and ``torch.split`` in chunks of 3 (the chunk count baked: onnxruntime then
fails) (TorchScript); ``torch.cond`` by TorchScript.
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


a2 = _load("build_attack2_corpus")  # loads the attack (a2.ab), probe, check and dev builders
ab, pc, cc, dc = a2.ab, a2.pc, a2.cc, a2.dc
HF, seq = cc.HF, cc.seq
TOKENS = pc.TOKENS


# ----------------------------------------------------------------------------
# Sequence models with chunked / padded / scanned sequence logic (seq_len 10, 7, 13)
# ----------------------------------------------------------------------------
MAMBA2 = HF(
    "Mamba2Model",
    "Mamba2Config",
    vocab_size=400,
    hidden_size=32,
    state_size=8,
    num_heads=4,
    head_dim=16,
    n_groups=1,
    expand=2,
    conv_kernel=4,
    chunk_size=4,
    num_hidden_layers=2,
    **TOKENS,
)
b_mamba2 = seq(
    MAMBA2,
    ["last_hidden_state"],
    "Mamba2Model 2 layers, SSD chunked scan (chunk 4: the sequence padded to a multiple of 4, "
    "segment sums over chunks), causal conv1d k4 (dynamo)",
    attn="eager",
    token_types=False,
)
b_mamba2_legacy = seq(
    MAMBA2,
    ["last_hidden_state"],
    "Mamba2Model 2 layers, SSD chunked scan (chunk 4), causal conv1d k4 (TorchScript opset 17)",
    attn="eager",
    token_types=False,
    exporter="legacy",
    out_dyn={"last_hidden_state": {0: "batch", 1: "seq_len"}},
)

b_jamba = seq(
    HF(
        "JambaModel",
        "JambaConfig",
        vocab_size=400,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        num_experts=4,
        num_experts_per_tok=2,
        expert_layer_period=2,
        expert_layer_offset=1,
        attn_layer_period=2,
        attn_layer_offset=1,
        mamba_d_state=8,
        mamba_d_conv=4,
        mamba_expand=2,
        mamba_dt_rank=4,
        use_mamba_kernels=False,
        max_position_embeddings=128,
        **TOKENS,
    ),
    ["last_hidden_state"],
    "JambaModel 2 layers: Mamba (slow scan) then attention GQA 4/2 + MoE 4 experts top-2 (dynamo)",
    attn="eager",
    token_types=False,
)

b_bamba = seq(
    HF(
        "BambaModel",
        "BambaConfig",
        vocab_size=400,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        attn_layer_indices=[1],
        mamba_n_heads=4,
        mamba_d_head=16,
        mamba_n_groups=1,
        mamba_d_state=8,
        mamba_d_conv=4,
        mamba_expand=2,
        mamba_chunk_size=4,
        max_position_embeddings=128,
        **TOKENS,
    ),
    ["last_hidden_state"],
    "BambaModel 2 layers: Mamba2 mixer (chunk 4: seq padded to a multiple of 4) then GQA 4/2 "
    "attention with rotary (dynamo)",
    attn="eager",
    token_types=False,
)

ZAMBA2 = HF(
    "Zamba2Model",
    "Zamba2Config",
    vocab_size=400,
    hidden_size=32,
    num_hidden_layers=2,
    layers_block_type=["mamba", "hybrid"],
    num_attention_heads=4,
    num_key_value_heads=4,
    attention_head_dim=16,
    mamba_d_state=8,
    mamba_d_conv=4,
    mamba_expand=2,
    mamba_headdim=8,
    mamba_ngroups=1,
    chunk_size=4,
    n_mamba_heads=8,
    intermediate_size=64,
    num_mem_blocks=1,
    use_shared_attention_adapter=False,
    use_mem_rope=True,
    max_position_embeddings=128,
    **TOKENS,
)
b_zamba2 = seq(
    ZAMBA2,
    ["last_hidden_state"],
    "Zamba2Model 2 layers: Mamba2 (chunk 4) then a hybrid layer (shared attention block on "
    "cat(hidden, embeddings), rotary) (dynamo)",
    attn="eager",
    token_types=False,
)

b_recurrent_gemma = seq(
    HF(
        "RecurrentGemmaModel",
        "RecurrentGemmaConfig",
        vocab_size=400,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=3,
        num_attention_heads=4,
        num_key_value_heads=1,
        head_dim=8,
        lru_width=32,
        attention_window_size=6,
        conv1d_width=4,
        block_types=["recurrent", "attention", "recurrent"],
        **TOKENS,
    ),
    ["last_hidden_state"],
    "RecurrentGemmaModel 3 layers: RG-LRU recurrent blocks (conv1d k4 + linear recurrence scan), "
    "a local attention layer with window 6 (dynamo)",
    attn="eager",
    token_types=False,
)

REFORMER = HF(
    "ReformerModel",
    "ReformerConfig",
    vocab_size=320,
    hidden_size=32,
    attention_head_size=8,
    num_attention_heads=2,
    attn_layers=["local", "local"],
    local_attn_chunk_length=4,
    local_num_chunks_before=1,
    local_num_chunks_after=0,
    feed_forward_size=64,
    axial_pos_embds=False,
    max_position_embeddings=64,
    is_decoder=False,
    pad_token_id=0,
    eos_token_id=2,
)
b_reformer = seq(
    REFORMER,
    ["last_hidden_state"],
    "ReformerModel 2 local-attention layers, chunk 4 (1 chunk before): the sequence padded to a "
    "multiple of 4 and cut back, reversible residual layers (dynamo)",
    attn="eager",
    token_types=False,
    lo=3,
)

b_reformer_legacy = seq(
    REFORMER,
    ["last_hidden_state"],
    "ReformerModel 2 local-attention layers, chunk 4 (1 chunk before), padded to a multiple of 4 "
    "(TorchScript opset 17)",
    attn="eager",
    token_types=False,
    lo=3,
    exporter="legacy",
    out_dyn={"last_hidden_state": {0: "batch", 1: "seq_len"}},
)

LONGT5 = HF(
    "LongT5EncoderModel",
    "LongT5Config",
    vocab_size=320,
    d_model=32,
    d_kv=8,
    d_ff=64,
    num_layers=2,
    num_heads=4,
    local_radius=3,
    global_block_size=4,
    encoder_attention_type="transient-global",
    relative_attention_num_buckets=16,
    relative_attention_max_distance=32,
    **TOKENS,
)
b_longt5_tglobal = seq(
    LONGT5,
    ["last_hidden_state"],
    "LongT5EncoderModel 2 layers, transient-global attention: blocks of local_radius + 1 = 4 "
    "(seq padded to a multiple of 4, 3-block windows), global blocks of 4 (seq // 4 summaries "
    "by a one-hot segment sum), log relative-position buckets (dynamo)",
    attn="eager",
    token_types=False,
    lo=3,
)
b_longt5_local = seq(
    LONGT5.but(encoder_attention_type="local"),
    ["last_hidden_state"],
    "LongT5EncoderModel 2 layers, local attention (blocks of 4, padded), log relative-position "
    "buckets (dynamo)",
    attn="eager",
    token_types=False,
    lo=3,
)

b_led_encoder = seq(
    HF(
        "LEDModel",
        "LEDConfig",
        vocab_size=320,
        d_model=32,
        encoder_layers=1,
        decoder_layers=1,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        encoder_ffn_dim=64,
        decoder_ffn_dim=64,
        attention_window=[4],
        max_encoder_position_embeddings=64,
        max_decoder_position_embeddings=64,
        pad_token_id=1,
        bos_token_id=0,
        eos_token_id=2,
    ),
    ["encoder_last_hidden_state", "last_hidden_state"],
    "LEDModel 1+1 layers, Longformer encoder (window 4: seq padded to a multiple of 4), decoder "
    "on the shifted input_ids (dynamo)",
    attn="eager",
    token_types=False,
    lo=3,
)

XLNET3 = HF(
    "XLNetModel",
    "XLNetConfig",
    vocab_size=320,
    d_model=32,
    n_layer=2,
    n_head=2,
    d_inner=64,
    attn_type="bi",
    mem_len=None,
    **TOKENS,
)
b_xlnet_legacy = seq(
    XLNET3,
    ["last_hidden_state"],
    "XLNetModel 2 layers, relative positional encoding (arange(seq, -seq, -1) sinusoids, rel "
    "shift by reshape) (TorchScript opset 17)",
    attn="eager",
    exporter="legacy",
    out_dyn={"last_hidden_state": {0: "batch", 1: "seq_len"}},
)

FUNNEL3 = HF(
    "FunnelModel",
    "FunnelConfig",
    vocab_size=380,
    block_sizes=[1, 1, 1],
    block_repeats=[1, 1, 1],
    num_decoder_layers=1,
    d_model=32,
    n_head=2,
    d_head=16,
    d_inner=64,
    max_position_embeddings=64,
    type_vocab_size=2,
    separate_cls=False,
    truncate_seq=False,
    pool_q_only=False,
    attention_type="factorized",
    pooling_type="max",
    pad_token_id=0,
)
b_funnel_max = seq(
    FUNNEL3,
    ["last_hidden_state"],
    "FunnelModel 3 blocks (pooled twice by max pooling, ceil mode, no separate cls, no truncation), "
    "factorized attention, 1 decoder layer upsampling by repeat_interleave (dynamo)",
    attn="eager",
)
b_funnel_legacy = seq(
    FUNNEL3.but(
        attention_type="relative_shift",
        pooling_type="mean",
        separate_cls=True,
        truncate_seq=True,
    ),
    ["last_hidden_state"],
    "FunnelModel 3 blocks, mean pooling with separate cls and truncation, relative_shift "
    "(TorchScript opset 17, no output dynamic axes: the exporter names the output dims)",
    attn="eager",
    exporter="legacy",
)

LFM2 = HF(
    "Lfm2Model",
    "Lfm2Config",
    vocab_size=400,
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    conv_L_cache=3,
    layer_types=["conv", "full_attention"],
    max_position_embeddings=128,
    **TOKENS,
)
b_lfm2 = seq(
    LFM2,
    ["last_hidden_state"],
    "Lfm2Model 2 layers: gated short conv (k3, causal, cut to seq_len) then GQA attention (dynamo)",
    attn="eager",
    token_types=False,
)

b_bigbird_sparse = seq(
    HF(
        "BigBirdModel",
        "BigBirdConfig",
        vocab_size=320,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
        attention_type="block_sparse",
        block_size=2,
        num_random_blocks=1,
        max_position_embeddings=128,
        pad_token_id=0,
    ),
    ["last_hidden_state"],
    "BigBirdModel block_sparse block 2, 1 random block: seq padded to a multiple of 2, switches "
    "to full attention when too short (dynamo)",
    attn="eager",
    lo=3,
)

YOSO = HF(
    "YosoModel",
    "YosoConfig",
    vocab_size=320,
    hidden_size=32,
    num_hidden_layers=1,
    num_attention_heads=2,
    intermediate_size=64,
    max_position_embeddings=80,
    use_expectation=True,
    conv_window=3,
    pad_token_id=1,
)
b_yoso = seq(
    YOSO,
    ["last_hidden_state"],
    "YosoModel 1 layer: LSH-expectation attention (collision probability), depthwise conv "
    "window 3 over the sequence (dynamo)",
    attn="eager",
    lo=3,
)

b_switch = seq(
    HF(
        "SwitchTransformersEncoderModel",
        "SwitchTransformersConfig",
        vocab_size=320,
        d_model=32,
        d_kv=8,
        d_ff=64,
        num_layers=2,
        num_sparse_encoder_layers=1,
        num_heads=4,
        num_experts=4,
        expert_capacity=6,
        relative_attention_num_buckets=16,
        relative_attention_max_distance=32,
        router_jitter_noise=0.0,
        **TOKENS,
    ),
    ["last_hidden_state"],
    "SwitchTransformersEncoderModel 2 layers, 1 sparse: top-1 router with expert capacity 6 "
    "(cumsum of the one-hot routing, tokens over capacity dropped), T5 relative buckets (dynamo)",
    attn="eager",
    token_types=False,
    lo=3,
)


def _raw(builder, note="torch.export with optimize=False (no onnxscript cleanup)"):
    """The same builder exported by torch.export without the exporter's own optimizer."""
    return ab.exported(builder, note, dynamo_kw={"optimize": False})


def _legacy_seq(hf, note, lo=0, token_types=False):
    """A sequence model by TorchScript (opset 17) with named output axes."""
    return seq(
        hf,
        ["last_hidden_state"],
        note + " (TorchScript opset 17)",
        attn="eager",
        token_types=token_types,
        lo=lo,
        exporter="legacy",
        out_dyn={"last_hidden_state": {0: "batch", 1: "seq_len"}},
    )


b_mamba2_raw = _raw(b_mamba2)
b_reformer_raw = _raw(b_reformer)
b_lfm2_legacy = _legacy_seq(LFM2, "Lfm2Model 2 layers: gated short conv k3 then GQA attention")
b_longt5_local_legacy = _legacy_seq(
    LONGT5.but(encoder_attention_type="local"), "LongT5EncoderModel local attention", lo=3
)
b_yoso_legacy = _legacy_seq(
    YOSO, "YosoModel 1 layer, LSH expectation, conv window 3", lo=3, token_types=True
)
b_zamba2_legacy = _legacy_seq(ZAMBA2, "Zamba2Model 2 layers: Mamba2 (chunk 4) then hybrid")
b_funnel_max_legacy = seq(
    FUNNEL3,
    ["last_hidden_state"],
    "FunnelModel 3 blocks, max pooling twice (ceil mode), factorized attention (TorchScript "
    "opset 17, no output dynamic axes)",
    attn="eager",
    exporter="legacy",
)

# ----------------------------------------------------------------------------
# Hand-written torch modules
# ----------------------------------------------------------------------------


def select_module(torch, ops):
    """Data-dependent sizes over x [B, L, 8] and an all-zero int mask m [B, L]."""

    class SelectOps(torch.nn.Module):
        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.lin = torch.nn.Linear(8, 8)

        def forward(self, x, m):
            h = self.lin(x)
            n = h.shape[1]
            score = h.sum(-1)
            outs = []
            if "nonzero" in ops:
                outs.append(torch.nonzero(score > 0))
                outs.append(torch.nonzero(m))  # m is all zero: [0, 2]
            if "bool_index" in ops:
                outs.append(h[score > 0] * 2.0)
            if "masked_select" in ops:
                outs.append(torch.masked_select(h, h > 0.5))
            if "unique" in ops:
                outs.append(
                    torch.unique((h[..., 0] * 2.0).round().to(torch.int64), sorted=True)
                )
            if "repeat_interleave" in ops:
                reps = (h[0, :, 0] > 0).to(torch.int64) + 1
                outs.append(torch.repeat_interleave(h, reps, dim=1))
                outs.append(torch.repeat_interleave(h, 2, dim=1) + 1.0)
            if "index_put" in ops:
                idx = torch.arange(0, n, 2)
                h2 = h.clone()
                h2[:, idx] = 0.0
                outs.append(h2)
            if "scatter" in ops:
                idx = torch.arange(0, n, 2)
                src = h[:, : idx.shape[0]]
                dst = torch.zeros_like(h).scatter(
                    1, idx.view(1, -1, 1).expand(h.shape[0], -1, 8), src
                )
                outs.append(dst)
            if "topk" in ops:
                vals, ind = score.topk(n // 3 + 1, dim=1)
                outs.append(vals)
                outs.append(torch.gather(h, 1, ind.unsqueeze(-1).expand(-1, -1, 8)))
            return tuple(outs)

    return SelectOps().eval()


def window_module(torch, ops):
    """Shape-driven windows over x [B, L, 8]."""
    functional = torch.nn.functional

    class WindowOps(torch.nn.Module):
        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.lin = torch.nn.Linear(8, 8)

        def forward(self, x):
            h = self.lin(x)
            b, n, d = h.shape
            outs = []
            if "narrow" in ops:
                outs.append(h.narrow(1, n // 4, n // 2))
            if "unfold" in ops:
                outs.append(h.unfold(1, 4, 3))
            if "pad" in ops:
                outs.append(functional.pad(h, (1, 2, n % 3, (5 - n % 5) % 5)))
                outs.append(functional.pad(h.transpose(1, 2), (2, 3), mode="reflect"))
            if "interpolate" in ops:
                t = h.transpose(1, 2)
                outs.append(functional.interpolate(t, size=2 * n + 1, mode="nearest"))
                outs.append(functional.interpolate(t, scale_factor=0.5, mode="linear"))
                img = h.reshape(b, 1, n, d)
                outs.append(
                    functional.interpolate(img, scale_factor=(1.5, 0.5), mode="bilinear")
                )
            if (
                "roll_sym" in ops
            ):  # a shift read from the shape: aten.roll by a SymInt fails (dynamo)
                outs.append(torch.roll(h, shifts=n // 2, dims=1))
            if "roll" in ops:
                outs.append(torch.roll(h, shifts=(1, -2), dims=(1, 2)))
            if "flip" in ops:
                outs.append(h.flip(1) + h)
            if "tril" in ops:
                sq = h @ h.transpose(1, 2)
                outs.append(torch.tril(sq, diagonal=-1))
                outs.append(torch.triu(sq, diagonal=2))
            if "einsum" in ops:
                outs.append(torch.einsum("bld,bmd->bml", h, h.flip(1)))
                outs.append(torch.einsum("bld->bd", h))
            return tuple(outs)

    return WindowOps().eval()


def derived_module(torch, ops):
    """x [B, S, 8], y [B, 2*S, 8], z [B, S+1]: derived sizes, split, view(b, -1, n), // and %."""

    class Derived(torch.nn.Module):
        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.lin = torch.nn.Linear(8, 8)

        def forward(self, x, y, z):
            h = self.lin(x)
            b, s, d = h.shape
            outs = []
            # y even rows line up with x
            outs.append(y[:, ::2] + h)
            outs.append(y.view(b, -1, 16))  # [B, S, 16]
            outs.append(z[:, 1:] + h.sum(-1))  # z has S + 1 columns
            outs.append(z[:, :-1] * z[:, 1:])
            if "split" in ops:
                first, second = torch.split(y, [s // 2, 2 * s - s // 2], dim=1)
                outs.append(first)
                outs.append(second)
            if "split3" in ops:  # TorchScript bakes the traced chunk count
                parts = torch.split(h, 3, dim=1)
                outs.append(parts[-1])
            if "arange" in ops:
                r = torch.arange(s // 2, 2 * s + 1, 3)
                outs.append(r)
                outs.append(torch.arange(s) % 3 + s // 4)
            if "floordiv" in ops:
                g = s // 3
                outs.append(h[:, : 3 * g].reshape(b, g, 3 * d))
                outs.append(h[:, s % 4 :])
            if "empty" in ops:
                e = y[:, 2 * s :]  # [B, 0, 8]
                outs.append(e)
                outs.append(torch.cat([h, e], 1))
                outs.append(h[:, s:].sum(1))
            if "view" in ops:
                outs.append(h.reshape(b, -1, 4))
                outs.append(y.reshape(-1, s, 16))
            return tuple(outs)

    return Derived().eval()


def cond_module(torch):
    class CondM(torch.nn.Module):
        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.lin = torch.nn.Linear(8, 8)

        def forward(self, x):
            h = self.lin(x)

            def big(t):
                return t[:, :4] * 2.0

            def small(t):
                return t[:, -4:] + 1.0

            out = torch.cond(h.shape[1] > 8, big, small, (h,))
            return out, out.sum(1)

    return CondM().eval()


OPS_BINDINGS = [
    {"batch": 2, "seq_len": 10},
    {"batch": 3, "seq_len": 7},
    {"batch": 5, "seq_len": 13},
]
DERIVED_BINDINGS = [
    {"batch": 2, "seq_len": 10, "seq2": 20, "seq1": 11},
    {"batch": 3, "seq_len": 7, "seq2": 14, "seq1": 8},
    {"batch": 5, "seq_len": 13, "seq2": 26, "seq1": 14},
]
SELECT_OPS = [
    "nonzero",
    "bool_index",
    "masked_select",
    "unique",
    "repeat_interleave",
    "index_put",
    "scatter",
    "topk",
]
WINDOW_OPS = [
    "narrow",
    "unfold",
    "pad",
    "interpolate",
    "roll_sym",
    "roll",
    "flip",
    "tril",
    "einsum",
]
DERIVED_OPS = ["split", "split3", "arange", "floordiv", "empty", "view"]


def _dims(torch):
    return (
        torch.export.Dim("batch", min=2, max=16),
        torch.export.Dim("seq_len", min=4, max=64),
    )


def _export_hand(tmp, torch, module, args, names, ds, dyn_axes, exporter):
    """torch.export (``optimize=False``, ``dynamic_shapes`` ``ds``) or TorchScript (``dyn_axes``)."""
    path = cc._path(tmp)
    with torch.no_grad():
        outs = module(*args)
    out_names = [f"out{i}" for i in range(len(outs))]
    with torch.no_grad():
        if exporter == "dynamo":
            torch.onnx.export(
                module,
                tuple(args),
                dynamo=True,
                optimize=False,
                dynamic_shapes=ds,
                input_names=names,
                output_names=out_names,
            ).save(path)
        else:
            torch.onnx.export(
                module,
                tuple(args),
                path,
                dynamo=False,
                input_names=names,
                output_names=out_names,
                dynamic_axes=dyn_axes,
                opset_version=17,
                do_constant_folding=True,
            )
    return path


def _select(exporter):
    def build(tmp):
        torch = dc._torch()
        ops = [o for o in SELECT_OPS if not (exporter == "dynamo" and o == "masked_select")]
        w = select_module(torch, set(ops))
        b, s = _dims(torch)
        args = [torch.randn(3, 9, 8), torch.zeros(3, 9, dtype=torch.int64)]
        axes = {0: "batch", 1: "seq_len"}
        path = _export_hand(
            tmp,
            torch,
            w,
            args,
            ["x", "m"],
            {"x": {0: b, 1: s}, "m": {0: b, 1: s}},
            {"x": axes, "m": axes},
            exporter,
        )
        return cc._spec(
            path,
            dc.torch_ref(w, ["x", "m"]),
            OPS_BINDINGS,
            {"x": ("randn",), "m": ("zeros",)},
            f"hand-written data-dependent sizes: {', '.join(ops)} (k = seq_len // 3 + 1), "
            "nonzero of an all-zero mask (0 rows) "
            + (
                "(dynamo, optimize=False, Dim bounds)"
                if exporter == "dynamo"
                else "(TorchScript opset 17)"
            ),
        )

    return build


def _window(exporter):
    def build(tmp):
        torch = dc._torch()
        skip = {"roll_sym"} if exporter == "dynamo" else {"unfold"}
        ops = [o for o in WINDOW_OPS if o not in skip]
        w = window_module(torch, set(ops))
        b, s = _dims(torch)
        path = _export_hand(
            tmp,
            torch,
            w,
            [torch.randn(3, 9, 8)],
            ["x"],
            {"x": {0: b, 1: s}},
            {"x": {0: "batch", 1: "seq_len"}},
            exporter,
        )
        return cc._spec(
            path,
            dc.torch_ref(w, ["x"]),
            OPS_BINDINGS,
            {"*": ("randn",)},
            f"hand-written shape-driven windows: {', '.join(ops)} "
            + (
                "(dynamo, optimize=False, Dim bounds)"
                if exporter == "dynamo"
                else "(TorchScript opset 17)"
            ),
        )

    return build


def _derived(exporter):
    def build(tmp):
        torch = dc._torch()
        ops = [o for o in DERIVED_OPS if not (exporter == "legacy" and o == "split3")]
        w = derived_module(torch, set(ops))
        b, s = _dims(torch)
        args = [torch.randn(3, 9, 8), torch.randn(3, 18, 8), torch.randn(3, 10)]
        ds = {"x": {0: b, 1: s}, "y": {0: b, 1: 2 * s}, "z": {0: b, 1: s + 1}}
        axes = {
            "x": {0: "batch", 1: "seq_len"},
            "y": {0: "batch", 1: "seq2"},
            "z": {0: "batch", 1: "seq1"},
        }
        path = _export_hand(tmp, torch, w, args, ["x", "y", "z"], ds, axes, exporter)
        return cc._spec(
            path,
            dc.torch_ref(w, ["x", "y", "z"]),
            DERIVED_BINDINGS,
            {"*": ("randn",)},
            "hand-written derived sizes: y [batch, 2 * seq_len, 8], z [batch, seq_len + 1], "
            f"{', '.join(ops)} "
            + (
                "(dynamo, optimize=False, derived Dims 2*s and s+1)"
                if exporter == "dynamo"
                else "(TorchScript opset 17; y and z get their own symbols seq2, seq1)"
            ),
        )

    return build


def grid_module(torch, ops):
    """Image-shaped ops over x [B, 4, H, W] (dynamic H, W)."""
    functional = torch.nn.functional

    class GridOps(torch.nn.Module):
        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.conv = torch.nn.Conv2d(4, 8, 3, padding=1)
            self.up = torch.nn.ConvTranspose2d(8, 4, 3, stride=2, padding=1, output_padding=1)
            self.down = torch.nn.Conv2d(4, 4, 3, stride=2, dilation=2, padding=2)

        def forward(self, x):
            h = self.conv(x)
            b, c, hh, ww = h.shape
            outs = []
            if "pixel_shuffle" in ops:
                outs.append(functional.pixel_shuffle(h, 2))
                outs.append(functional.pixel_unshuffle(functional.pixel_shuffle(h, 2), 2) + h)
            if "im2col" in ops:
                outs.append(functional.unfold(h, kernel_size=(2, 3), stride=(2, 1), padding=1))
            if "conv_transpose" in ops:
                outs.append(self.up(h))
                outs.append(self.down(x))
            if "pool" in ops:
                outs.append(functional.max_pool2d(h, 3, stride=2, ceil_mode=True))
                outs.append(
                    functional.avg_pool2d(h, 2, stride=2, padding=1, count_include_pad=False)
                )
                outs.append(functional.adaptive_avg_pool2d(h, (1, 3)))
            if "meshgrid" in ops:
                ys, xs = torch.meshgrid(torch.arange(hh), torch.arange(ww), indexing="ij")
                outs.append((ys * ww + xs).reshape(-1))
            if "grid_sample" in ops:
                theta = torch.tensor([[1.0, 0.1, 0.0], [0.0, 0.9, 0.1]]).expand(b, 2, 3)
                grid = functional.affine_grid(
                    theta, [b, c, hh // 2 + 1, ww + 3], align_corners=False
                )
                outs.append(functional.grid_sample(h, grid, align_corners=False))
            if "interpolate" in ops:
                outs.append(
                    functional.interpolate(
                        h,
                        scale_factor=(0.75, 1.5),
                        mode="bilinear",
                        align_corners=True,
                        recompute_scale_factor=True,
                    )
                )
                outs.append(
                    functional.interpolate(h, size=(hh * 2, ww // 2 + 1), mode="nearest")
                )
            return tuple(outs)

    return GridOps().eval()


def misc_module(torch, ops):
    """Assorted size-driven ops over x [B, L, 8] and ids [B, L] (int64 in [0, 5))."""
    functional = torch.nn.functional

    class MiscOps(torch.nn.Module):
        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.lin = torch.nn.Linear(8, 8)

        def forward(self, x, ids):
            h = self.lin(x)
            b, n, d = h.shape
            outs = []
            if "chunk" in ops:
                parts = torch.chunk(h, 3, dim=1)
                outs.append(parts[0])
                outs.append(parts[-1])
                outs.append(torch.tensor_split(h, 4, dim=1)[1])
            if "one_hot" in ops:
                outs.append(functional.one_hot(ids, num_classes=5).float().sum(1))
                outs.append(functional.one_hot(torch.arange(n) % 3, num_classes=4))
            if "diagonal" in ops:
                sq = h @ h.transpose(1, 2)
                outs.append(torch.diagonal(sq, offset=1, dim1=1, dim2=2))
                outs.append(torch.diag_embed(h[:, 0]))
            if "outer" in ops:
                outs.append(torch.einsum("bi,bj->bij", h[:, :, 0], h[:, :, 1]))
            if "cdist" in ops:
                outs.append(torch.cdist(h, h[:, : n // 2 + 1]))
            if "sort" in ops:
                _, idx = torch.sort(h[..., 0], dim=1)
                outs.append(torch.take_along_dim(h, idx.unsqueeze(-1), dim=1))
            if "kthvalue" in ops:
                outs.append(torch.kthvalue(h[..., 0], 2, dim=1)[0])
            if "scatter_reduce" in ops:
                dst = torch.zeros(b, 5, d)
                outs.append(
                    dst.scatter_reduce(
                        1,
                        ids.unsqueeze(-1).expand(-1, -1, d),
                        h,
                        reduce="amax",
                        include_self=False,
                    )
                )
            if "cumprod" in ops:
                outs.append(torch.cumprod(h[..., :2] * 0.5 + 1.0, dim=1))
            if "bucketize" in ops:
                outs.append(torch.bucketize(h[..., 0], torch.tensor([-1.0, 0.0, 1.0])))
            if "item_slice" in ops:
                k = int(ids[0].sum().item())
                torch._check(k >= 0)
                torch._check(k <= 4 * n)
                outs.append(h.reshape(-1, d)[:k])
            return tuple(outs)

    return MiscOps().eval()


GRID_OPS = [
    "pixel_shuffle",
    "im2col",
    "conv_transpose",
    "pool",
    "meshgrid",
    "grid_sample",
    "interpolate",
]
GRID_SKIP = {"dynamo": set(), "legacy": {"pool", "grid_sample"}}
GRID_BINDINGS = [
    {"batch": 2, "height": 10, "width": 13},
    {"batch": 3, "height": 7, "width": 16},
    {"batch": 5, "height": 12, "width": 9},
]
MISC_OPS = [
    "chunk",
    "one_hot",
    "diagonal",
    "outer",
    "cdist",
    "sort",
    "kthvalue",
    "scatter_reduce",
    "cumprod",
    "bucketize",
    "item_slice",
]
MISC_SKIP = {
    "dynamo": {"cdist", "kthvalue", "cumprod"},
    "legacy": {"diagonal", "sort", "kthvalue", "scatter_reduce", "cumprod", "item_slice"},
}


def _grid(exporter):
    def build(tmp):
        torch = dc._torch()
        ops = [o for o in GRID_OPS if o not in GRID_SKIP[exporter]]
        w = grid_module(torch, set(ops))
        b = torch.export.Dim("batch", min=2, max=16)
        h = torch.export.Dim("height", min=6, max=64)
        wd = torch.export.Dim("width", min=6, max=64)
        path = _export_hand(
            tmp,
            torch,
            w,
            [torch.randn(2, 4, 10, 13)],
            ["x"],
            {"x": {0: b, 2: h, 3: wd}},
            {"x": {0: "batch", 2: "height", 3: "width"}},
            exporter,
        )
        return cc._spec(
            path,
            dc.torch_ref(w, ["x"]),
            GRID_BINDINGS,
            {"*": ("randn",)},
            f"hand-written image ops over [batch, 4, height, width]: {', '.join(ops)} "
            + (
                "(dynamo, optimize=False, Dim bounds)"
                if exporter == "dynamo"
                else "(TorchScript opset 17)"
            ),
        )

    return build


def _misc(exporter):
    def build(tmp):
        torch = dc._torch()
        ops = [o for o in MISC_OPS if o not in MISC_SKIP[exporter]]
        w = misc_module(torch, set(ops))
        b, s = _dims(torch)
        args = [torch.randn(3, 9, 8), torch.randint(0, 5, (3, 9))]
        axes = {0: "batch", 1: "seq_len"}
        path = _export_hand(
            tmp,
            torch,
            w,
            args,
            ["x", "ids"],
            {"x": {0: b, 1: s}, "ids": {0: b, 1: s}},
            {"x": axes, "ids": axes},
            exporter,
        )
        return cc._spec(
            path,
            dc.torch_ref(w, ["x", "ids"]),
            OPS_BINDINGS,
            {"x": ("randn",), "ids": ("int", 0, 5)},
            f"hand-written assorted size-driven ops: {', '.join(ops)} "
            + (
                "(dynamo, optimize=False, Dim bounds; item_slice: h[:k] with k = "
                "ids[0].sum().item(), an unbacked size)"
                if exporter == "dynamo"
                else "(TorchScript opset 17)"
            ),
        )

    return build


COND_BINDINGS = [
    {"batch": 2, "seq_len": 10},
    {"batch": 3, "seq_len": 6},
    {"batch": 5, "seq_len": 13},
]


def b_cond_slices(tmp):
    torch = dc._torch()
    w = cond_module(torch)
    b, s = _dims(torch)
    path = _export_hand(
        tmp, torch, w, [torch.randn(3, 9, 8)], ["x"], {"x": {0: b, 1: s}}, None, "dynamo"
    )
    return cc._spec(
        path,
        dc.torch_ref(w, ["x"]),
        COND_BINDINGS,
        {"*": ("randn",)},
        "hand-written torch.cond(seq_len > 8): first 4 rows * 2 / last 4 rows + 1 "
        "(dynamo, optimize=False)",
    )


# ----------------------------------------------------------------------------
# Registry
# ----------------------------------------------------------------------------
ATTACK3 = [
    ("mamba2_dynamo", b_mamba2),
    ("bamba_dynamo", b_bamba),
    ("zamba2_dynamo", b_zamba2),
    ("reformer_local_dynamo", b_reformer),
    ("longt5_local_dynamo", b_longt5_local),
    ("xlnet_legacy", b_xlnet_legacy),
    ("funnel_max_dynamo", b_funnel_max),
    ("funnel_legacy", b_funnel_legacy),
    ("lfm2_dynamo", b_lfm2),
    ("bigbird_sparse_dynamo", b_bigbird_sparse),
    ("yoso_dynamo", b_yoso),
    ("select_ops_dynamo", _select("dynamo")),
    ("select_ops_legacy", _select("legacy")),
    ("window_ops_dynamo", _window("dynamo")),
    ("window_ops_legacy", _window("legacy")),
    ("derived_dims_dynamo", _derived("dynamo")),
    ("derived_dims_legacy", _derived("legacy")),
    ("cond_slices_dynamo", b_cond_slices),
    ("grid_ops_dynamo", _grid("dynamo")),
    ("grid_ops_legacy", _grid("legacy")),
    ("misc_ops_dynamo", _misc("dynamo")),
    ("misc_ops_legacy", _misc("legacy")),
    ("mamba2_raw_dynamo", b_mamba2_raw),
    ("reformer_local_raw_dynamo", b_reformer_raw),
    ("lfm2_legacy", b_lfm2_legacy),
    ("longt5_local_legacy", b_longt5_local_legacy),
    ("yoso_legacy", b_yoso_legacy),
    ("funnel_max_legacy", b_funnel_max_legacy),
]
EXTRA = [
    ("mamba2_legacy", b_mamba2_legacy),
    ("zamba2_legacy", b_zamba2_legacy),
    ("reformer_local_legacy", b_reformer_legacy),
    ("jamba_dynamo", b_jamba),
    ("recurrent_gemma_dynamo", b_recurrent_gemma),
    ("longt5_tglobal_dynamo", b_longt5_tglobal),
    ("led_dynamo", b_led_encoder),
    ("switch_dynamo", b_switch),
]
dc.MODELS.clear()
dc.EXTRAS.clear()
for _name, _fn in ATTACK3:
    dc.MODELS[_name] = (_fn, {})
for _name, _fn in EXTRA:
    dc.EXTRAS[_name] = (_fn, {})


def main(argv=None):
    return cc.corpus_main(argv, "/work/attack3_corpus", __doc__)


if __name__ == "__main__":
    sys.exit(main())
