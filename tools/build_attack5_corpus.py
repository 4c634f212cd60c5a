#!/usr/bin/env python
"""Build the *attack5* corpus: scripted control flow, odd-sized vision ops, chained data-dependent sizes.

A sixth bug-hunting corpus (after the probe, attack, attack2, attack3 and attack4 corpora),
aimed at what those lack:

* control flow written with ``torch.jit.script`` and exported by TorchScript: Loops whose trip
  counts come from dims and whose scan outputs are stacked lists, loop-carried tensors that
  grow (greedy and beam-search decode loops), while loops with a data-dependent stop, ``If``
  on shapes whose branches give different sizes, loops over the batch whose pieces have
  per-iteration sizes;
* image ops over a dynamic height/width at odd sizes and size 1: adaptive pooling to odd
  output sizes, ceil_mode / dilated pooling, interpolate by a size taken from another tensor,
  by scale with ``recompute_scale_factor`` True and False, ``align_corners``, grid_sample on a
  grid of another size, grouped / dilated / strided convolutions behind asymmetric pads,
  ConvTranspose with ``output_padding``, pixel_shuffle by 3, im2col with dilation, a YOLO-like
  detection head (FPN upsampling to a lateral's size, anchors decoded on a meshgrid, TopK of
  ``min(k, anchors)``);
* chained data-dependent sizes (NonZero -> Gather -> Reshape, unique with counts,
  masked_select then view, repeat_interleave by a tensor, TopK with k from a dim, index_add
  and index_put with accumulate);
* ``torch.export`` ``Dim`` relations between inputs (``2*s``, ``s + 1``, ``3*s - 1``, bounds
  from 1);
* HuggingFace models not yet covered or not at these bindings: Longformer, ProphetNet, BigBird
  with block-sparse attention actually taken, Llama with dynamic-NTK rope, Phi-3 with longrope,
  MobileViT / MobileViTV2 / ConvNeXt-V2 / Swin at odd sizes, Bloom / Falcon (ALiBi), GPT-Neo
  (local attention) and Gemma3 (sliding window) with an empty past, seq_len 1, batch 1.

Every model is scored under bindings with size 1 (``batch 1``, ``seq_len 1``, height or width
1 where the model allows it), odd sizes and sizes that are not multiples of the strides or
windows; decoders with an empty past (``past_seq_len 0``). Same truth format and scorer as
the check corpus: the attack4 builder (and through it all the others) is imported by path
and its factories reused. Usage, from the repo root, in the build venv of
``tools/README.md``::

    HF_HUB_OFFLINE=1 /work/buildvenv/bin/python tools/build_attack5_corpus.py --out /work/attack5_corpus
    /work/buildvenv/bin/python tools/build_attack5_corpus.py --only greedy_decode_legacy --out DIR

Layout written: as ``build_probe_corpus.py`` (``OUT/models/<name>/{model.onnx,truth.json}``).

Models (44): scripted control flow by TorchScript (loops_legacy, nested_loops_legacy,
greedy_decode_legacy, beam_decode_legacy, if_shape_legacy with seq_len 0 in its bindings);
hand-written ONNX (hand_loop_scan: a Loop stopped early by its condition, a reverse Scan
with scan output axis 1, an If whose branches differ; hand_sequences: SplitToSequence /
SequenceInsert / SequenceErase / SequenceAt / ConcatFromSequence; hand_image_ops, opset 21,
batch 0 in its bindings: CenterCropPad, Resize keep_aspect_ratio_policy, Pad with negative
pads, SAME ConvTranspose / Conv / AveragePool, dilated ceil_mode MaxPool, LpPool);
hand-written torch modules, each by dynamo and by TorchScript (pool_ops, resize_ops,
conv_ops, sample_ops, yolo_head, chain_ops); dim_relations_dynamo and
dim_relations_conv_dynamo (derived ``Dim`` s, 2*s, s+1, 3*s-1 on four inputs, met through
views, slices, concats, convs, ConvTranspose and upsampling); decoders at batch 1 / seq_len
1 / an empty past: Bloom (ALiBi, TorchScript), GPT-Neo (local attention window 6), CodeGen
(TorchScript), Cohere2 (sliding window), Gemma3 with a sliding window of 5 (crossed by the
bindings), Llama with dynamic-NTK rope (TorchScript), Phi-3 with longrope; encoder-decoder
caches with an empty past and enc_seq_len 1: T5 (dynamo and TorchScript), Bart and Marian
(TorchScript), ProphetNet (TorchScript, full encoder-decoder, ngram 2); vision at odd sizes
and batch 1: ConvNeXt, ConvNeXt-V2, ResNet, PoolFormer, EfficientNet, DINOv2, RegNet,
YOLOS, GLPN, SegFormer.

torch.export declares false output dims (kept on purpose, the scorer counts them):
pool_ops_dynamo, ceil_mode pooling: ``max_pool2d((2, 3), stride=(3, 2), ceil_mode=True)``
is declared ``height//3`` (onnxruntime and torch: ``ceil((height - 2) / 3) + 1``, 2 at
height 5), ``avg_pool2d(2, stride=3, ceil_mode=True)`` ``height//3`` and ``width//3 + 1``,
and the ceil_mode ``avg_pool1d`` outputs (``(L + 1)//3`` for k3 s3 p1: 2 at L 6, true 3).

torch and onnxruntime disagree (the truth is onnxruntime's): chain_ops_legacy (TorchScript
writes ``index_add`` / ``index_put(accumulate=True)`` with repeated indices as a ScatterND
without reduction), phi3_longrope_kv1_dynamo (the short/long factor choice is baked:
values differ at 10 and 11 positions), llama_ntk_kv1_legacy (the NTK base is baked at the
example's length: values differ past 6 positions).

Export failures (torch 2.13, transformers 5.24, onnxruntime 1.32), registered as extras
(``--only NAME`` reproduces them):

* falcon_alibi_kv1_dynamo: onnxruntime has no ``Mul`` for the ALiBi slopes' type;
  falcon_alibi_kv1_legacy: a complex128 ``Cast`` feeds a ``Mul`` (invalid graph).
* llama_ntk_kv1_dynamo: dynamic NTK guards on data (``Eq(u0, 1)``).
* longformer_dynamo: data-dependent guard on the padded length; longformer_legacy:
  onnxruntime fails a Gather at other lengths (the chunk count baked).
* bigbird_sparse24_dynamo, prophetnet_dynamo: ConversionError (no ``aten.sub`` overload);
  bigbird_sparse24_legacy: onnxruntime fails a Reshape at other lengths (blocks baked).
* led_legacy: onnxruntime fails a Reshape of the Longformer encoder at other lengths
  (the chunk count baked; led_dynamo fails in attack3).
* mobilevit_odd_dynamo: onnxruntime fails a Reshape at odd sizes (the example took no
  interpolation branch); mobilevitv2_odd_dynamo: torch.export NotImplementedError;
  mobilevitv2_odd_legacy: ``col2im`` needs opset 18, where its TorchScript symbolic fails.

Left out of the hand-written modules: adaptive pooling (dynamo bakes the windows of the
example: onnxruntime's Gather fails at width 3; TorchScript refuses sizes that do not
divide), ``nearest-exact`` (TorchScript opset 17), ``topk(min(20, anchors))`` (TorchScript
bakes k = 20: onnxruntime fails on small images), ``masked_select`` (dynamo). Also tried and
left out: SAM's prompt encoder and mask decoder (the dynamo export fails an Expand at any
batch / point count but the example's), RT-DETR (the dynamo export takes 90 s, then onnxruntime fails a Concat of the anchor grid
even at the example's size with batch 1), Mask2Former (not tried: too slow to export here),
torchvision's roi_align / nms (torchvision is not installed in the build venv).
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


a4 = _load(
    "build_attack4_corpus"
)  # loads attack3, attack2, attack, probe, check and dev builders
a3, a2, ab, pc, cc, dc = a4.a3, a4.a2, a4.ab, a4.pc, a4.cc, a4.dc
HF, seq, image, kv = cc.HF, cc.seq, cc.image, cc.kv
with_bindings = a4.with_bindings
TOKENS = pc.TOKENS
KV1_BINDINGS = a4.KV1_BINDINGS
SEQ1_BINDINGS = a4.SEQ1_BINDINGS


def _bindings(*rows, total=False):
    out = [dict(r) for r in rows]
    if total:
        for b in out:
            b["total_seq_len"] = b["seq_len"] + b["past_seq_len"]
    return out


# ----------------------------------------------------------------------------
# Hand-written modules: one factory for both exporters
# ----------------------------------------------------------------------------
def _hand5(module_fn, all_ops, skip, bindings, what, arg_specs, axes, dims, gens=None):
    """A factory ``exporter -> builder`` for a hand-written module ``module_fn(torch, ops)``.

    ``arg_specs``: input name -> (shape, kind) with kind "randn", "int:<hi>" or "bool".
    ``dims(torch)``: name -> ``torch.export.Dim`` (or derived dim) for the dynamo export.
    """

    def factory(exporter):
        def build(tmp):
            torch = dc._torch()
            ops = [o for o in all_ops if o not in skip.get(exporter, ())]
            torch.manual_seed(0)
            w = module_fn(torch, set(ops))
            names = list(arg_specs)
            args = []
            for shape, kind in arg_specs.values():
                if kind.startswith("int:"):
                    args.append(torch.randint(0, int(kind[4:]), shape))
                else:
                    args.append(torch.randn(*shape))
            dd = dims(torch)
            ds = {n: {k: dd[v] for k, v in a.items()} for n, a in axes.items()}
            path = a3._export_hand(tmp, torch, w, args, names, ds, axes, exporter)
            return cc._spec(
                path,
                dc.torch_ref(w, names),
                bindings,
                gens or {"*": ("randn",)},
                f"hand-written {what}: {', '.join(ops)} "
                + (
                    "(dynamo, optimize=False, Dim bounds)"
                    if exporter == "dynamo"
                    else "(TorchScript opset 17)"
                ),
            )

        return build

    return factory


def _image_dims(lo=1):
    def dims(torch):
        return {
            "batch": torch.export.Dim("batch", min=1, max=16),
            "height": torch.export.Dim("height", min=lo, max=128),
            "width": torch.export.Dim("width", min=lo, max=128),
        }

    return dims


def _seq_dims(torch):
    return {
        "batch": torch.export.Dim("batch", min=1, max=16),
        "seq_len": torch.export.Dim("seq_len", min=1, max=64),
    }


# ----------------------------------------------------------------------------
# Pooling at odd sizes
# ----------------------------------------------------------------------------
def pool_module(torch, ops):
    functional = torch.nn.functional

    class PoolOps(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)

        def forward(self, x):
            h = self.conv(x)
            outs = []
            if "adaptive_avg" in ops:
                outs.append(functional.adaptive_avg_pool2d(h, (5, 3)))
                outs.append(functional.adaptive_avg_pool2d(h, (1, 7)))
            if "adaptive_max" in ops:
                outs.append(functional.adaptive_max_pool2d(h, (3, 5)))
            if "adaptive_1d" in ops:
                outs.append(functional.adaptive_avg_pool1d(h.flatten(2), 7))
            if "ceil_max" in ops:
                outs.append(functional.max_pool2d(h, 3, stride=2, padding=1, ceil_mode=True))
                outs.append(functional.max_pool2d(h, (2, 3), stride=(3, 2), ceil_mode=True))
            if "dilated_max" in ops:
                outs.append(functional.max_pool2d(h, 2, stride=1, padding=1, dilation=2))
            if "ceil_avg" in ops:
                outs.append(functional.avg_pool2d(h, 3, stride=2, padding=1, ceil_mode=True))
                outs.append(
                    functional.avg_pool2d(
                        h, 2, stride=3, ceil_mode=True, count_include_pad=False
                    )
                )
            if "ceil_avg1d" in ops:  # torch.export declares floor-mode sizes for these
                flat = h.flatten(2)
                outs.append(functional.avg_pool1d(flat, 3, 3, 1, ceil_mode=True))
                outs.append(
                    functional.avg_pool1d(
                        flat, 4, 3, 2, ceil_mode=True, count_include_pad=False
                    )
                )
                outs.append(functional.avg_pool1d(flat, 2, 2, 1, ceil_mode=True))
            if "lp_pool" in ops:
                outs.append(functional.lp_pool2d(h.abs() + 0.1, 2, (2, 1), stride=(2, 1)))
            if "global" in ops:
                outs.append(
                    h.mean((2, 3), keepdim=True) * functional.adaptive_max_pool2d(h, 1)
                )
            return tuple(outs)

    return PoolOps().eval()


POOL_OPS = [
    "adaptive_avg",
    "adaptive_max",
    "adaptive_1d",
    "ceil_max",
    "dilated_max",
    "ceil_avg",
    "ceil_avg1d",
    "lp_pool",
    "global",
]
VISION_BINDINGS = [
    {"batch": 1, "height": 5, "width": 3},
    {"batch": 3, "height": 11, "width": 17},
    {"batch": 2, "height": 4, "width": 9},
    {"batch": 1, "height": 23, "width": 6},
]
_pool = _hand5(
    pool_module,
    POOL_OPS,
    # the dynamo export bakes adaptive pooling windows at the example size; TorchScript refuses
    # adaptive pooling to sizes that do not divide the input
    {n: {"adaptive_avg", "adaptive_max", "adaptive_1d"} for n in ("dynamo", "legacy")},
    VISION_BINDINGS,
    "pooling over x [batch, 3, height, width] at odd sizes",
    {"x": ((2, 3, 12, 14), "randn")},
    {"x": {0: "batch", 2: "height", 3: "width"}},
    _image_dims(3),
)


# ----------------------------------------------------------------------------
# Resizing: by another tensor's size, by scale (recompute True / False), align_corners
# ----------------------------------------------------------------------------
def resize_module(torch, ops):
    functional = torch.nn.functional

    class ResizeOps(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv2d(3, 4, 3, stride=2, padding=1)

        def forward(self, x, y):
            h = self.conv(x)  # ceil(H / 2), ceil(W / 2)
            outs = []
            if "to_other" in ops:
                outs.append(functional.interpolate(h, size=y.shape[-2:], mode="nearest"))
                outs.append(
                    functional.interpolate(
                        h, size=y.shape[-2:], mode="bilinear", align_corners=True
                    )
                )
            if "to_input" in ops:
                up = functional.interpolate(h, size=x.shape[-2:], mode="bilinear")
                outs.append(up + x[:, :1])
            if "scale_recompute" in ops:
                outs.append(
                    functional.interpolate(
                        h, scale_factor=2.5, mode="nearest", recompute_scale_factor=True
                    )
                )
                outs.append(
                    functional.interpolate(
                        h,
                        scale_factor=(1.5, 1.3),
                        mode="bilinear",
                        recompute_scale_factor=True,
                    )
                )
            if "scale_keep" in ops:
                outs.append(
                    functional.interpolate(
                        h, scale_factor=3.0, mode="nearest", recompute_scale_factor=False
                    )
                )
                outs.append(
                    functional.interpolate(
                        h,
                        scale_factor=(1.25, 1.5),
                        mode="bilinear",
                        align_corners=False,
                        recompute_scale_factor=False,
                    )
                )
            if "bicubic_ac" in ops:
                outs.append(
                    functional.interpolate(
                        h,
                        size=(2 * h.shape[2] - 1, h.shape[3] + 3),
                        mode="bicubic",
                        align_corners=True,
                    )
                )
            if "nearest_exact" in ops:
                outs.append(functional.interpolate(h, scale_factor=1.75, mode="nearest-exact"))
            if "upsample_crop" in ops:
                up = functional.interpolate(h, scale_factor=2, mode="nearest")
                outs.append(up[..., : x.shape[2], : x.shape[3]] * x[:, :1])
            return tuple(outs)

    return ResizeOps().eval()


RESIZE_OPS = [
    "to_other",
    "to_input",
    "scale_recompute",
    "scale_keep",
    "bicubic_ac",
    "nearest_exact",
    "upsample_crop",
]
RESIZE_BINDINGS = [
    {"batch": 1, "height": 1, "width": 1, "height2": 3, "width2": 1},
    {"batch": 3, "height": 11, "width": 17, "height2": 4, "width2": 9},
    {"batch": 2, "height": 7, "width": 4, "height2": 13, "width2": 2},
]


def _resize_dims(torch):
    d = _image_dims(1)(torch)
    d["height2"] = torch.export.Dim("height2", min=1, max=64)
    d["width2"] = torch.export.Dim("width2", min=1, max=64)
    return d


_resize = _hand5(
    resize_module,
    RESIZE_OPS,
    {"legacy": {"nearest_exact"}},  # aten::_upsample_nearest_exact2d: not in opset 17
    RESIZE_BINDINGS,
    "resizing of a stride-2 feature map h [batch, 4, ceil(height/2), ceil(width/2)] "
    "to y's size, to x's size, by scales",
    {"x": ((2, 3, 12, 14), "randn"), "y": ((2, 2, 5, 7), "randn")},
    {"x": {0: "batch", 2: "height", 3: "width"}, "y": {0: "batch", 2: "height2", 3: "width2"}},
    _resize_dims,
)


# ----------------------------------------------------------------------------
# Convolutions with odd padding, transposed convolutions, pixel shuffle, im2col
# ----------------------------------------------------------------------------
def conv_module(torch, ops):
    functional = torch.nn.functional

    class ConvOps(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = torch.nn.Conv2d(3, 8, 3, padding=1)
            self.grouped = torch.nn.Conv2d(8, 8, 3, stride=2, dilation=2, groups=4)
            self.rect = torch.nn.Conv2d(8, 6, (5, 2), stride=(3, 2), padding=(2, 0))
            self.up = torch.nn.ConvTranspose2d(8, 4, 4, stride=3, padding=1, output_padding=2)
            self.up2 = torch.nn.ConvTranspose2d(
                8,
                4,
                (3, 2),
                stride=(2, 3),
                padding=(0, 1),
                output_padding=(1, 0),
                groups=2,
                dilation=(2, 1),
            )
            self.shuffle = torch.nn.Conv2d(8, 18, 1)
            self.conv1d = torch.nn.Conv1d(8, 4, 3, stride=2, padding=2, dilation=3)
            self.up1d = torch.nn.ConvTranspose1d(
                8, 4, 5, stride=2, padding=2, output_padding=1
            )

        def forward(self, x):
            h = self.stem(x)
            outs = []
            if "grouped_pad" in ops:
                outs.append(self.grouped(functional.pad(h, (1, 2, 0, 3))))
            if "rect" in ops:
                outs.append(self.rect(h))
            if "pad_modes" in ops:
                outs.append(functional.pad(h, (1, 0, 2, 1), mode="replicate"))
                outs.append(functional.pad(h, (0, 1, 1, 0), mode="reflect"))
                outs.append(functional.pad(h, (1, 1, 0, 1), mode="circular"))
            if "conv_transpose" in ops:
                outs.append(self.up(h))
                outs.append(self.up2(h))
            if "pixel_shuffle3" in ops:
                outs.append(functional.pixel_shuffle(self.shuffle(h), 3))
            if "im2col" in ops:
                outs.append(
                    functional.unfold(
                        h, kernel_size=(2, 3), dilation=2, stride=(2, 3), padding=(1, 2)
                    )
                )
            if "conv1d" in ops:
                flat = h.flatten(2)
                outs.append(self.conv1d(flat))
                outs.append(self.up1d(flat))
            return tuple(outs)

    return ConvOps().eval()


CONV_OPS = [
    "grouped_pad",
    "rect",
    "pad_modes",
    "conv_transpose",
    "pixel_shuffle3",
    "im2col",
    "conv1d",
]
CONV_BINDINGS = [
    {"batch": 1, "height": 3, "width": 2},
    {"batch": 3, "height": 11, "width": 17},
    {"batch": 2, "height": 8, "width": 5},
]
_conv = _hand5(
    conv_module,
    CONV_OPS,
    {},
    CONV_BINDINGS,
    "convolutions over x [batch, 3, height, width]: grouped dilated strided behind "
    "asymmetric pads, (5, 2) kernels, replicate / reflect / circular pads, ConvTranspose "
    "with output_padding (groups, dilation), pixel_shuffle 3, dilated im2col, conv1d over "
    "the flattened plane",
    {"x": ((2, 3, 12, 14), "randn")},
    {"x": {0: "batch", 2: "height", 3: "width"}},
    _image_dims(2),
)


# ----------------------------------------------------------------------------
# grid_sample on a grid of another size
# ----------------------------------------------------------------------------
def sample_module(torch, ops):
    functional = torch.nn.functional

    class SampleOps(torch.nn.Module):
        def forward(self, x, grid):
            outs = []
            g = grid.tanh()
            if "bilinear" in ops:
                outs.append(functional.grid_sample(x, g, align_corners=False))
                outs.append(
                    functional.grid_sample(
                        x, g, mode="bilinear", padding_mode="border", align_corners=True
                    )
                )
            if "nearest" in ops:
                outs.append(
                    functional.grid_sample(
                        x, g * 1.5, mode="nearest", padding_mode="zeros", align_corners=False
                    )
                )
            if "bicubic" in ops:
                outs.append(
                    functional.grid_sample(
                        x, g, mode="bicubic", padding_mode="reflection", align_corners=False
                    )
                )
            if "subgrid" in ops:
                outs.append(functional.grid_sample(x, g[:, ::2, 1:], align_corners=True))
            return tuple(outs)

    return SampleOps().eval()


SAMPLE_BINDINGS = [
    {"batch": 1, "height": 1, "width": 5, "out_h": 1, "out_w": 2},
    {"batch": 3, "height": 9, "width": 4, "out_h": 6, "out_w": 11},
    {"batch": 2, "height": 13, "width": 7, "out_h": 3, "out_w": 3},
]


def _sample_dims(torch):
    d = _image_dims(1)(torch)
    d["out_h"] = torch.export.Dim("out_h", min=1, max=64)
    d["out_w"] = torch.export.Dim("out_w", min=2, max=64)
    return d


_sample = _hand5(
    sample_module,
    ["bilinear", "nearest", "bicubic", "subgrid"],
    {},
    SAMPLE_BINDINGS,
    "grid_sample of x [batch, 3, height, width] on grid [batch, out_h, out_w, 2]",
    {"x": ((2, 3, 8, 10), "randn"), "grid": ((2, 5, 6, 2), "randn")},
    {"x": {0: "batch", 2: "height", 3: "width"}, "grid": {0: "batch", 1: "out_h", 2: "out_w"}},
    _sample_dims,
)


# ----------------------------------------------------------------------------
# A YOLO-like detector head
# ----------------------------------------------------------------------------
def yolo_module(torch, ops):
    functional = torch.nn.functional
    n_cls, n_anchor = 3, 2

    class Yolo(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.c1 = torch.nn.Conv2d(3, 8, 3, stride=2, padding=1)
            self.c2 = torch.nn.Conv2d(8, 16, 3, stride=2, padding=1)
            self.c3 = torch.nn.Conv2d(16, 16, 3, stride=2, padding=1)
            self.lat = torch.nn.Conv2d(16, 16, 1)
            self.heads = torch.nn.ModuleList(
                [torch.nn.Conv2d(16, n_anchor * (5 + n_cls), 1) for _ in range(2)]
            )
            self.register_buffer("anchors", torch.tensor([[1.0, 2.0], [2.0, 1.0]]))

        def decode(self, p, stride):
            b, _, ny, nx = p.shape
            p = p.view(b, n_anchor, 5 + n_cls, ny, nx).permute(0, 1, 3, 4, 2)
            ys, xs = torch.meshgrid(torch.arange(ny), torch.arange(nx), indexing="ij")
            grid = torch.stack((xs, ys), 2).view(1, 1, ny, nx, 2).float()
            xy = (p[..., :2].sigmoid() + grid) * stride
            wh = p[..., 2:4].exp() * self.anchors.view(1, n_anchor, 1, 1, 2)
            return torch.cat((xy, wh, p[..., 4:].sigmoid()), -1).reshape(b, -1, 5 + n_cls)

        def forward(self, x):
            f1 = self.c2(self.c1(x).relu()).relu()  # stride 4
            f2 = self.c3(f1).relu()  # stride 8
            if "fpn" in ops:
                f1 = f1 + functional.interpolate(
                    self.lat(f2), size=f1.shape[-2:], mode="nearest"
                )
            preds = torch.cat(
                (self.decode(self.heads[0](f1), 4), self.decode(self.heads[1](f2), 8)), 1
            )
            outs = [preds]
            if "topk" in ops:
                conf = preds[..., 4] * preds[..., 5:].amax(-1)
                k = min(20, preds.shape[1])
                scores, idx = conf.topk(k, dim=1)
                outs.append(scores)
                outs.append(preds.gather(1, idx.unsqueeze(-1).expand(-1, -1, 5 + n_cls)))
            if "threshold" in ops:
                keep = preds[0, :, 4] > 0.5
                outs.append(preds[0][keep])
            return tuple(outs)

    return Yolo().eval()


YOLO_BINDINGS = [
    {"batch": 1, "height": 9, "width": 1},
    {"batch": 3, "height": 37, "width": 50},
    {"batch": 2, "height": 17, "width": 8},
]
_yolo = _hand5(
    yolo_module,
    ["fpn", "topk", "threshold"],
    {"legacy": {"topk"}},  # TorchScript bakes k = min(20, anchors) at the example
    YOLO_BINDINGS,
    "YOLO-like head over x [batch, 3, height, width]: strides 4 and 8 (k3 s2 p1 convs), FPN "
    "nearest upsampling to the lateral's size, anchors decoded on a meshgrid, TopK of "
    "min(20, anchors), boxes of image 0 above a threshold",
    {"x": ((2, 3, 40, 48), "randn")},
    {"x": {0: "batch", 2: "height", 3: "width"}},
    _image_dims(1),
)


# ----------------------------------------------------------------------------
# Chained data-dependent sizes
# ----------------------------------------------------------------------------
def chain_module(torch, ops):
    class ChainOps(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(6, 6)

        def forward(self, x, ids):
            h = self.lin(x)  # [B, L, 6]
            b, n, d = h.shape
            outs = []
            if "nonzero_gather_reshape" in ops:
                rows = torch.nonzero(h[..., 0] > 0)  # [nnz, 2]
                picked = h[rows[:, 0], rows[:, 1]]  # [nnz, 6]
                outs.append(picked.reshape(-1, 3, 2))
                outs.append(rows.t().reshape(-1))
            if "topk_dim" in ops:
                k = n // 2 + 1
                vals, idx = h[..., 1].topk(k, dim=1)
                outs.append(vals)
                outs.append(torch.gather(h, 1, idx.unsqueeze(-1).expand(b, k, d)))
            if "unique_counts" in ops:
                u, counts = torch.unique(ids, return_counts=True)
                outs.append(u.repeat_interleave(counts))
                outs.append(counts)
            if "masked_view" in ops:
                mask = (h[..., :1] > 0).expand(b, n, d)
                outs.append(torch.masked_select(h, mask).view(-1, d))
            if "repeat_tensor" in ops:
                reps = ids[0] % 3  # [L] repeats in 0..2
                outs.append(h[0].repeat_interleave(reps, dim=0))
            if "index_add" in ops:
                idx = ids[0]  # in [0, 5)
                outs.append(torch.zeros(n + 4, d).index_add(0, idx, h[0]))
                outs.append(torch.zeros(5, d).index_put((idx,), h[0], accumulate=True))
            if "where_nonzero_chain" in ops:
                pos = torch.where(h[..., 2] > 0.3)[1]  # [nnz]
                second = torch.nonzero(pos > n // 2).squeeze(1)
                outs.append(pos[second])
            return tuple(outs)

    return ChainOps().eval()


CHAIN_OPS = [
    "nonzero_gather_reshape",
    "topk_dim",
    "unique_counts",
    "masked_view",
    "repeat_tensor",
    "index_add",
    "where_nonzero_chain",
]
CHAIN_BINDINGS = [
    {"batch": 1, "seq_len": 1},
    {"batch": 3, "seq_len": 7},
    {"batch": 2, "seq_len": 12},
    {"batch": 4, "seq_len": 3},
]
_chain = _hand5(
    chain_module,
    CHAIN_OPS,
    {"dynamo": {"masked_view"}},
    CHAIN_BINDINGS,
    "chained data-dependent sizes over x [batch, seq_len, 6] and ids [batch, seq_len]",
    {"x": ((3, 9, 6), "randn"), "ids": ((3, 9), "int:5")},
    {"x": {0: "batch", 1: "seq_len"}, "ids": {0: "batch", 1: "seq_len"}},
    _seq_dims,
    gens={"x": ("randn",), "ids": ("int", 0, 5)},
)


# ----------------------------------------------------------------------------
# torch.export Dim relations between inputs
# ----------------------------------------------------------------------------
def relations_module(torch, ops):
    class Relations(torch.nn.Module):
        def forward(self, a, b, c, d):
            # a [B, s, 4], b [B, 2s, 4], c [B, s + 1, 4], d [B, 3s - 1, 4]
            n = a.shape[1]
            outs = [
                b.view(b.shape[0], n, 8) + torch.cat((a, a), 2),
                c[:, 1:] * a,
                torch.cat((a, c), 1)[:, ::2],
                d[:, : 2 * n] - b,
                d[:, n - 1 :].reshape(-1, 2, 4)[:, 0],
                torch.cat((b, c, d), 1).sum(1),
                torch.cat((a, b), 1).unflatten(1, (3, n)),
            ]
            return tuple(outs)

    return Relations().eval()


def relations_conv_module(torch, ops):
    functional = torch.nn.functional

    class RelationsConv(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.down = torch.nn.Conv1d(4, 4, 3, stride=2, padding=1)
            self.pair = torch.nn.Conv1d(4, 4, 2)
            self.up = torch.nn.ConvTranspose1d(4, 4, 2, stride=2)

        def forward(self, a, b, c, d):
            # channels first: a [B, 4, s], b [B, 4, 2s], c [B, 4, s + 1], d [B, 4, 3s - 1]
            n = a.shape[2]
            half = self.down(b)  # ceil(2s / 2) = s
            outs = [
                half + a,
                self.pair(c) * a,  # (s + 1) - 1 = s
                self.up(a) - b,  # 2s
                functional.interpolate(a, scale_factor=2.0, mode="nearest") + b,
                functional.pad(d, (0, 1)).view(d.shape[0], 4, 3, n).sum(2) + a,
                torch.cat((b, c), 2)[..., n:]
                + torch.cat((a, c[..., :1], a), 2)[..., : 2 * n + 1],
                functional.max_pool1d(functional.pad(d, (0, 1)), 3, 3) + a,
            ]
            return tuple(outs)

    return RelationsConv().eval()


def b_relations_conv(tmp):
    torch = dc._torch()
    w = relations_conv_module(torch, set())
    s = torch.export.Dim("s", min=1, max=40)
    batch = torch.export.Dim("batch", min=1, max=8)
    args = [
        torch.randn(2, 4, 5),
        torch.randn(2, 4, 10),
        torch.randn(2, 4, 6),
        torch.randn(2, 4, 14),
    ]
    names = ["a", "b", "c", "d"]
    ds = {
        "a": {0: batch, 2: s},
        "b": {0: batch, 2: 2 * s},
        "c": {0: batch, 2: s + 1},
        "d": {0: batch, 2: 3 * s - 1},
    }
    path = cc._path(tmp)
    with torch.no_grad():
        outs = w(*args)
        torch.onnx.export(
            w,
            tuple(args),
            dynamo=True,
            dynamic_shapes=ds,
            input_names=names,
            output_names=[f"out{i}" for i in range(len(outs))],
        ).save(path)
    return cc._spec(
        path,
        dc.torch_ref(w, names),
        REL_BINDINGS,
        {"*": ("randn",)},
        "hand-written: derived Dims 2*s, s+1, 3*s-1 (channels first) meeting through convs: a "
        "stride-2 conv of the 2s input, a k2 conv of the s+1 input, a stride-2 ConvTranspose "
        "and a nearest x2 upsampling of the s input, the 3s-1 input padded to 3s and viewed "
        "as [B, 4, 3, s] or max-pooled by 3 (dynamo)",
    )


REL_BINDINGS = [
    {"batch": 1, "s": 1, "s2": 2, "s1": 2, "s3": 2},
    {"batch": 3, "s": 7, "s2": 14, "s1": 8, "s3": 20},
    {"batch": 2, "s": 4, "s2": 8, "s1": 5, "s3": 11},
]


def b_relations(tmp):
    torch = dc._torch()
    w = relations_module(torch, set())
    s = torch.export.Dim("s", min=1, max=40)
    batch = torch.export.Dim("batch", min=1, max=8)
    args = [
        torch.randn(2, 5, 4),
        torch.randn(2, 10, 4),
        torch.randn(2, 6, 4),
        torch.randn(2, 14, 4),
    ]
    names = ["a", "b", "c", "d"]
    ds = {
        "a": {0: batch, 1: s},
        "b": {0: batch, 1: 2 * s},
        "c": {0: batch, 1: s + 1},
        "d": {0: batch, 1: 3 * s - 1},
    }
    path = cc._path(tmp)
    with torch.no_grad():
        torch.onnx.export(
            w,
            tuple(args),
            dynamo=True,
            dynamic_shapes=ds,
            input_names=names,
            output_names=[f"out{i}" for i in range(7)],
        ).save(path)
    return cc._spec(
        path,
        dc.torch_ref(w, names),
        REL_BINDINGS,
        {"*": ("randn",)},
        "hand-written: torch.export derived Dims 2*s, s+1, 3*s-1 on four inputs "
        "(the exporter names the input dims by the expressions); views, slices and "
        "concats that only agree through the relations (dynamo)",
    )


# ----------------------------------------------------------------------------
# Scripted control flow (TorchScript): loops, decode loops, If on shapes
# ----------------------------------------------------------------------------
def _scripted_loops(torch):

    @torch.jit.script
    def tri(x: torch.Tensor):
        pieces: list[torch.Tensor] = []
        for i in range(x.shape[1]):
            pieces.append(x[:, : i + 1].sum(1, keepdim=True) * x[:, i : i + 1])  # noqa: PERF401
        rows: list[torch.Tensor] = []
        for i in range(x.shape[0]):
            rows.append(x[i, : i + 1])  # noqa: PERF401
        steps: list[torch.Tensor] = []
        for t in range(0, x.shape[1], 2):
            steps.append(x[:, t : t + 2].mean(1))  # noqa: PERF401
        grown = x[:, :1]
        for t in range(x.shape[1] // 3):
            grown = torch.cat([grown, x[:, t : t + 2]], 1)
        return torch.cat(pieces, 1), torch.cat(rows, 0), torch.stack(steps, 1), grown

    return tri


def _scripted_decode(torch):

    @torch.jit.script
    def greedy(h0: torch.Tensor, emb: torch.Tensor, w: torch.Tensor, prompt: torch.Tensor):
        tokens = prompt[:, -1:]
        h = h0
        scores: list[torch.Tensor] = []
        for _ in range(prompt.shape[1]):
            h = torch.tanh(emb[tokens[:, -1]] + h @ w)
            logits = h @ emb.t()
            nxt = logits.argmax(-1, keepdim=True)
            tokens = torch.cat([tokens, nxt], 1)
            scores.append(logits.max(-1)[0])
        return tokens, torch.stack(scores, 1)

    @torch.jit.script
    def until_eos(h0: torch.Tensor, emb: torch.Tensor, w: torch.Tensor, max_steps: int):
        tokens = torch.zeros(h0.shape[0], 1, dtype=torch.long)
        done = torch.zeros(h0.shape[0], dtype=torch.bool)
        h = h0
        i = 0
        while i < max_steps and not bool(done.all()):
            h = torch.tanh(emb[tokens[:, -1]] + h @ w)
            nxt = (h @ emb.t()).argmax(-1)
            done = done | (nxt < 6)
            tokens = torch.cat([tokens, nxt.unsqueeze(1)], 1)
            i += 1
        return tokens

    @torch.jit.script
    def beam(h0: torch.Tensor, emb: torch.Tensor, w: torch.Tensor, prompt: torch.Tensor):
        k = 3
        b = h0.shape[0]
        v = emb.shape[0]
        h = h0.unsqueeze(1).expand(b, k, h0.shape[1]).reshape(b * k, h0.shape[1])
        scores = torch.zeros(b, k)
        scores[:, 1:] = -1e9
        tokens = prompt[:, -1:].repeat_interleave(k, 0)
        for _ in range(prompt.shape[1] // 2 + 1):
            h = torch.tanh(emb[tokens[:, -1]] + h @ w)
            logp = torch.log_softmax(h @ emb.t(), -1)
            cand = (scores.reshape(b * k, 1) + logp).reshape(b, k * v)
            top, idx = cand.topk(k, dim=1)
            base = (torch.arange(b) * k).unsqueeze(1)
            sel = (base + torch.div(idx, v, rounding_mode="floor")).reshape(-1)
            tokens = torch.cat([tokens.index_select(0, sel), (idx % v).reshape(-1, 1)], 1)
            h = h.index_select(0, sel)
            scores = top
        return tokens.reshape(b, k, -1), scores

    return greedy, until_eos, beam


def _scripted_nested(torch):
    @torch.jit.script
    def nested(x: torch.Tensor):
        rows: list[torch.Tensor] = []
        for i in range(x.shape[0]):
            acc = x[i, :1]
            for j in range(1, x.shape[1]):
                if j % 2 == 1:
                    acc = torch.cat([acc, x[i, j : j + 1] * j], 0)
                else:
                    acc = acc + x[i, j : j + 1]
            rows.append(acc)
        kept = x[:, :0]
        n = 0
        while n < x.shape[1] and n < 4:
            kept = torch.cat([kept, x[:, n : n + 1].exp()], 1)
            n += 1
        return torch.stack(rows, 0), kept

    return nested


def _scripted_if(torch):
    @torch.jit.script
    def by_shape(x: torch.Tensor):
        if x.shape[1] % 2 == 1:
            x = torch.cat([x, x[:, -1:]], 1)
        if x.shape[1] > 8:
            y = x.reshape(x.shape[0], x.shape[1] // 2, 2 * x.shape[2])
        else:
            y = torch.cat([x, x], 2)[:, 1:]
        if x.shape[0] == 1:
            z = x.squeeze(0)
        else:
            z = x.sum(0)
        return x, y, z

    return by_shape


LOOP_BINDINGS = [
    {"batch": 1, "seq_len": 1},
    {"batch": 3, "seq_len": 7},
    {"batch": 2, "seq_len": 12},
    {"batch": 4, "seq_len": 2},
]
IF_BINDINGS = [
    {"batch": 1, "seq_len": 1},
    {"batch": 3, "seq_len": 7},
    {"batch": 2, "seq_len": 12},
    {"batch": 1, "seq_len": 9},
    {"batch": 4, "seq_len": 0},
]


def _legacy_script(name, make, bindings, note, inputs, gens, with_emb=False):
    def build(tmp):
        torch = dc._torch()
        fns = make(torch)

        class W(torch.nn.Module):
            def __init__(self):
                super().__init__()
                torch.manual_seed(0)
                self.lin = torch.nn.Linear(8, 8)
                if with_emb:
                    self.emb = torch.nn.Parameter(torch.randn(40, 8) * 0.5)
                    self.w = torch.nn.Parameter(torch.randn(8, 8) * 0.5)

            def forward(self, *args):
                return name(self, fns, *args)

        w = W().eval()
        names = list(inputs)
        args = [
            torch.randint(0, 40, s) if gens.get(n, ("randn",))[0] == "int" else torch.randn(*s)
            for n, s in inputs.items()
        ]
        axes = {n: {0: "batch", 1: "seq_len"} for n in names}
        path = cc._path(tmp)
        with torch.no_grad():
            outs = w(*args)
        torch.onnx.export(
            w,
            tuple(args),
            path,
            dynamo=False,
            input_names=names,
            output_names=[f"out{i}" for i in range(len(outs))],
            dynamic_axes=axes,
            opset_version=17,
        )
        return cc._spec(path, dc.torch_ref(w, names), bindings, gens, note)

    return build


def _fwd_loops(self, fns, x):
    return fns(self.lin(x))


def _fwd_greedy(self, fns, x, prompt):
    greedy, until_eos, _beam = fns
    h0 = self.lin(x).mean(1)
    tokens, scores = greedy(h0, self.emb, self.w, prompt)
    t2 = until_eos(h0, self.emb, self.w, prompt.shape[1] + 2)
    return tokens, scores, t2, t2.shape[1] * h0


def _fwd_beam(self, fns, x, prompt):
    beam = fns[2]
    return beam(self.lin(x).mean(1), self.emb, self.w, prompt)


def _fwd_nested(self, fns, x):
    return fns(self.lin(x))


def _fwd_if(self, fns, x):
    return fns(self.lin(x))


b_loops_legacy = _legacy_script(
    _fwd_loops,
    _scripted_loops,
    LOOP_BINDINGS,
    "hand-written scripted loops over x [batch, seq_len, 8] (TorchScript opset 17): a scan of "
    "prefix sums (Loop trip count seq_len, SequenceInsert + ConcatFromSequence), a loop over "
    "the batch whose pieces x[i, :i+1] have per-iteration sizes (sum of min(i+1, L)), a "
    "range(0, L, 2) loop stacked (ceil(L/2)), a loop-carried tensor grown by 2 columns over "
    "L // 3 iterations",
    {"x": (3, 9, 8)},
    {"*": ("randn",)},
)
b_greedy_legacy = _legacy_script(
    _fwd_greedy,
    _scripted_decode,
    LOOP_BINDINGS,
    "hand-written scripted decode loops (TorchScript opset 17): greedy decoding of seq_len "
    "steps (tokens grow by one column per iteration, scores stacked), a while loop until every "
    "row emits a token < 6 or seq_len + 2 steps (data-dependent length)",
    {"x": (3, 9, 8), "prompt": (3, 9)},
    {"x": ("randn",), "prompt": ("int", 0, 40)},
    with_emb=True,
)
b_beam_legacy = _legacy_script(
    _fwd_beam,
    _scripted_decode,
    LOOP_BINDINGS,
    "hand-written scripted beam search (TorchScript opset 17): 3 beams, seq_len // 2 + 1 "
    "steps, TopK over beams x vocab, index_select of the surviving beams, tokens grow by one "
    "column per step",
    {"x": (3, 9, 8), "prompt": (3, 9)},
    {"x": ("randn",), "prompt": ("int", 0, 40)},
    with_emb=True,
)
b_nested_legacy = _legacy_script(
    _fwd_nested,
    _scripted_nested,
    LOOP_BINDINGS,
    "hand-written scripted nested loops (TorchScript opset 17): per batch row an inner loop "
    "over 1..L-1 that appends a row on odd j and adds on even j (ceil(L / 2) rows, an If inside "
    "a Loop inside a Loop), rows stacked; a while loop of min(L, 4) steps growing a tensor from "
    "an empty slice",
    {"x": (3, 9, 8)},
    {"*": ("randn",)},
)
b_if_legacy = _legacy_script(
    _fwd_if,
    _scripted_if,
    IF_BINDINGS,
    "hand-written scripted If on shapes (TorchScript opset 17): pad to an even length when "
    "odd, reshape to [B, L/2, 16] when longer than 8 else duplicate features and drop the first "
    "row, squeeze the batch when it is 1 else sum it; seq_len 0 in the bindings",
    {"x": (3, 9, 8)},
    {"*": ("randn",)},
)


# ----------------------------------------------------------------------------
# Hand-written ONNX (onnx.parser): control flow and ops no exporter writes
# ----------------------------------------------------------------------------
HAND_LOOP_SCAN = """<ir_version: 9, opset_import: ["" : 17]>
loop_scan (float[N,L] x, float[N,T,D] z) => (float[N,L] fin, float[?,?] scan_rows, float[?,?,?] scan_full, float[?] scanned, float[?,?,?,?] scan_out, float[?,?] branch) {
  s = Shape (x)
  i1 = Constant <value = int64[1] {1}> ()
  lg = Gather <axis = 0> (s, i1)
  l0 = Squeeze (lg)
  t = Constant <value = bool {1}> ()
  fin, scan_rows, scan_full = Loop (l0, t, x) <body = body (int64 i, bool c, float[N,L] acc) => (bool co, float[N,L] acc2, float[N] row, float[N,L] full) {
      two = Constant <value = int64 {2}> ()
      co = Less (i, two)
      acc2 = Add (acc, acc)
      one = Constant <value = int64[1] {1}> ()
      row = ReduceSum <keepdims = 0> (acc, one)
      full = Identity (acc)
  }>
  init = Constant <value = float[1] {0.0}> ()
  st = ReduceSum <keepdims = 0> (z)
  one1 = Constant <value = int64[1] {1}> ()
  st1 = Reshape (st, one1)
  scanned, scan_out = Scan (st1, z) <num_scan_inputs = 1, scan_input_axes = [1], scan_output_axes = [1], scan_input_directions = [1], body = sbody (float[1] carry, float[N,D] zi) => (float[1] carry2, float[N,D,D] outer) {
      o1 = Constant <value = int64[1] {1}> ()
      r = ReduceSum <keepdims = 0> (zi)
      r1 = Reshape (r, o1)
      carry2 = Add (carry, r1)
      ax2 = Constant <value = int64[1] {2}> ()
      zu = Unsqueeze (zi, ax2)
      ax1 = Constant <value = int64[1] {1}> ()
      zv = Unsqueeze (zi, ax1)
      outer = Mul (zu, zv)
  }>
  four = Constant <value = int64 {4}> ()
  big = Greater (l0, four)
  branch = If (big) <then_branch = tb () => (float[N,?] y1) {
      k = Constant <value = int64[1] {4}> ()
      zero = Constant <value = int64[1] {0}> ()
      a1 = Constant <value = int64[1] {1}> ()
      y1 = Slice (x, zero, k, a1)
  }, else_branch = eb () => (float[?,L] y2) {
      y2 = Concat <axis = 0> (x, x, x)
  }>
}"""
HAND_LOOP_BINDINGS = [
    {"N": 1, "L": 1, "T": 1, "D": 2},
    {"N": 2, "L": 0, "T": 3, "D": 1},
    {"N": 3, "L": 5, "T": 2, "D": 3},
    {"N": 1, "L": 9, "T": 4, "D": 2},
]

HAND_SEQUENCES = """<ir_version: 9, opset_import: ["" : 17]>
seqs (float[N,L] x) => (float[?,?] cat0, float[?,?,?] stack1, float[?,?] last, int64 count, float[?,?] chunks, float[?,?] rng_rows, float[?,?] kd0) {
  s = Shape (x)
  i1 = Constant <value = int64[1] {1}> ()
  lg = Gather <axis = 0> (s, i1)
  two = Constant <value = int64[1] {2}> ()
  rest = Sub (lg, two)
  sizes = Concat <axis = 0> (two, rest)
  sq = SplitToSequence <axis = 1> (x, sizes)
  z0 = Constant <value = int64 {0}> ()
  first = SequenceAt (sq, z0)
  sq2 = SequenceInsert (sq, x, z0)
  m1 = Constant <value = int64 {-1}> ()
  sq3 = SequenceErase (sq2, m1)
  cat0 = ConcatFromSequence <axis = 1> (sq3)
  sq4 = SequenceConstruct (x, x, x)
  stack1 = ConcatFromSequence <axis = 1, new_axis = 1> (sq4)
  three = Constant <value = int64 {3}> ()
  sq5 = SplitToSequence <axis = 1> (x, three)
  last = SequenceAt (sq5, m1)
  count = SequenceLength (sq5)
  chunks = ConcatFromSequence <axis = 1> (sq5)
  one = Constant <value = int64 {1}> ()
  zero = Constant <value = int64 {0}> ()
  r = Range (zero, count, one)
  rf = Cast <to = 1> (r)
  ru = Unsqueeze (rf, i1)
  z1 = Constant <value = int64[1] {0}> ()
  fr = ReduceSum <keepdims = 1> (first, z1)
  rng_rows = Mul (ru, fr)
  sq6 = SplitToSequence <axis = 0, keepdims = 0> (x)
  kd0 = ConcatFromSequence <axis = 0, new_axis = 1> (sq6)
}"""
HAND_SEQ_BINDINGS = [{"N": 1, "L": 2}, {"N": 3, "L": 7}, {"N": 2, "L": 9}, {"N": 4, "L": 3}]

HAND_IMAGE_OPS = """<ir_version: 10, opset_import: ["" : 21]>
image_ops (float[N,4,H,W] x) => (float[?,?,?,?] crop, float[?,?,?,?] not_larger, float[?,?,?,?] not_smaller, float[?,?,?,?] scaled, float[?,?,?,?] padded, float[?,?,?,?] ct_same, float[?,?,?,?] ct_out, float[?,?,?,?] pool_dil, float[?,?,?,?] lp_ceil, float[?,?,?,?] conv_same, float[?,?,?,?] avg_same) {
  cs = Constant <value = int64[2] {3, 4}> ()
  ax = Constant <value = int64[2] {2, 3}> ()
  crop = CenterCropPad <axes = [2, 3]> (x, cs)
  sz = Constant <value = int64[2] {7, 10}> ()
  not_larger = Resize <keep_aspect_ratio_policy = "not_larger", axes = [2, 3]> (x, , , sz)
  not_smaller = Resize <keep_aspect_ratio_policy = "not_smaller", axes = [2, 3]> (x, , , sz)
  sc = Constant <value = float[2] {2.5, 1.5}> ()
  scaled = Resize <axes = [3, 2], mode = "linear"> (x, , sc)
  p = Constant <value = int64[4] {-1, 2, 1, 3}> ()
  padded = Pad <mode = "constant"> (x, p, , ax)
  w = Constant <value = float[4, 2, 3, 3] {1,1,1,1,1,1,1,1,1, 1,1,1,1,1,1,1,1,1, 1,1,1,1,1,1,1,1,1, 1,1,1,1,1,1,1,1,1, 1,1,1,1,1,1,1,1,1, 1,1,1,1,1,1,1,1,1, 1,1,1,1,1,1,1,1,1, 1,1,1,1,1,1,1,1,1}> ()
  ct_same = ConvTranspose <auto_pad = "SAME_UPPER", strides = [2, 3]> (x, w)
  ct_out = ConvTranspose <output_padding = [1, 2], strides = [2, 3], pads = [1, 0, 0, 2], dilations = [2, 1]> (x, w)
  pool_dil = MaxPool <kernel_shape = [2, 2], dilations = [2, 3], strides = [1, 2], pads = [1, 1, 1, 1], ceil_mode = 1> (x)
  lp_ceil = LpPool <kernel_shape = [2, 3], strides = [2, 2], pads = [1, 1, 0, 1], ceil_mode = 1> (x)
  wc = Constant <value = float[2, 4, 3, 2] {1,1,1,1,1,1, 1,1,1,1,1,1, 1,1,1,1,1,1, 1,1,1,1,1,1, 1,1,1,1,1,1, 1,1,1,1,1,1, 1,1,1,1,1,1, 1,1,1,1,1,1}> ()
  conv_same = Conv <auto_pad = "SAME_LOWER", strides = [3, 2]> (x, wc)
  avg_same = AveragePool <kernel_shape = [3, 2], auto_pad = "SAME_UPPER", strides = [3, 2], ceil_mode = 1> (x)
}"""
HAND_IMAGE_BINDINGS = [
    {"N": 1, "H": 3, "W": 2},
    {"N": 2, "H": 7, "W": 9},
    {"N": 1, "H": 13, "W": 6},
    {"N": 0, "H": 4, "W": 5},
]


def _hand_onnx(text, bindings, note):
    def build(tmp):
        return dc._hand(tmp, text, bindings, note)

    return build


b_hand_loop_scan = _hand_onnx(
    HAND_LOOP_SCAN,
    HAND_LOOP_BINDINGS,
    "hand-written (onnx.parser): a Loop of trip count L whose condition stops it after 3 "
    "iterations (scan outputs of min(L, 3) rows, none when L is 0), a Scan over axis 1 of z "
    "in reverse with scan output axis 1 (outer products [N, T, D, D]), an If on L > 4 whose "
    "branches give [N, min(L, 4)] and [3N, L]",
)
b_hand_sequences = _hand_onnx(
    HAND_SEQUENCES,
    HAND_SEQ_BINDINGS,
    "hand-written (onnx.parser): SplitToSequence by sizes [2, L - 2] and by 3 (uneven last "
    "chunk), SequenceInsert / SequenceErase / SequenceAt(-1), SequenceLength feeding a Range, "
    "ConcatFromSequence with and without new_axis, SplitToSequence keepdims 0",
)
b_hand_image_ops = _hand_onnx(
    HAND_IMAGE_OPS,
    HAND_IMAGE_BINDINGS,
    "hand-written (onnx.parser, opset 21): CenterCropPad, Resize with keep_aspect_ratio_policy "
    "not_larger / not_smaller and axes, Resize scales on permuted axes, Pad with negative pads "
    "and axes, ConvTranspose SAME_UPPER and with output_padding + dilations, MaxPool ceil_mode "
    "with dilations, LpPool ceil_mode, Conv SAME_LOWER strided, AveragePool SAME_UPPER ceil; "
    "batch 0 in the bindings",
)


# ----------------------------------------------------------------------------
# Exporter switch: a dynamo builder exported by TorchScript instead
# ----------------------------------------------------------------------------
def as_legacy(builder, opset=17):
    """The same builder with ``dc.export_dynamo`` replaced by a TorchScript export.

    ``dynamic_shapes`` become ``dynamic_axes`` (a ``"past"`` tuple names the remaining inputs,
    an ``*args`` wrapper's are given by ``in_names``); output dims are left to the exporter.
    """

    def build(tmp):
        orig = dc.export_dynamo

        def export_legacy(module, args, path, input_names, output_names, dynamic_shapes, **_):
            if getattr(module, "in_names", None) is not None:
                axes = {n: dynamic_shapes.get(n) for n in module.in_names}
            else:
                axes, rest = {}, list(input_names)
                for k, v in dynamic_shapes.items():
                    if k == "past":
                        tail = rest[-len(v) :]
                        axes.update(dict(zip(tail, v)))
                    else:
                        axes[k] = v
            axes = {k: v for k, v in axes.items() if v}
            dc.export_legacy(module, args, path, input_names, output_names, axes, opset=opset)

        dc.export_dynamo = export_legacy
        try:
            spec = builder(tmp)
        finally:
            dc.export_dynamo = orig
        spec["note"] = spec["note"].replace("(dynamo)", "") + f"; TorchScript opset {opset}"
        return spec

    return build


# ----------------------------------------------------------------------------
# HuggingFace models (random weights, tiny)
# ----------------------------------------------------------------------------
ED1_BINDINGS = [
    {"batch": 1, "seq_len": 1, "past_seq_len": 0, "enc_seq_len": 1},
    {"batch": 3, "seq_len": 7, "past_seq_len": 4, "enc_seq_len": 12},
    {"batch": 1, "seq_len": 1, "past_seq_len": 9, "enc_seq_len": 5},
    {"batch": 2, "seq_len": 3, "past_seq_len": 0, "enc_seq_len": 6},
]
ENCDEC1_BINDINGS = [
    {"batch": 1, "enc_seq_len": 1, "dec_seq_len": 1},
    {"batch": 3, "enc_seq_len": 6, "dec_seq_len": 11},
    {"batch": 2, "enc_seq_len": 13, "dec_seq_len": 4},
]

# decoders with an empty past, seq_len 1, batch 1 (KV1 bindings), past up to 9
b_bloom_kv1_legacy = with_bindings(pc.b_bloom_kv_legacy, KV1_BINDINGS, "KV1 bindings")
b_falcon_alibi_kv1 = with_bindings(ab.b_falcon_alibi_kv, KV1_BINDINGS, "KV1 bindings")
b_gptneo_kv1 = with_bindings(ab.b_gptneo_kv, KV1_BINDINGS, "KV1 bindings (window 6 crossed)")
b_codegen_kv1_legacy = with_bindings(pc.b_codegen_kv_legacy, KV1_BINDINGS, "KV1 bindings")
b_cohere2_swa_kv1 = with_bindings(ab.b_cohere2_swa_kv, KV1_BINDINGS, "KV1 bindings")
b_t5_kv1 = with_bindings(
    pc.b_t5_kv, ED1_BINDINGS, "batch 1, seq_len 1, empty past, enc_seq_len 1"
)
b_bart_kv1_legacy = with_bindings(
    as_legacy(pc.b_bart_kv), ED1_BINDINGS, "batch 1, seq_len 1, empty past, enc_seq_len 1"
)
b_t5_kv1_legacy = with_bindings(
    as_legacy(pc.b_t5_kv), ED1_BINDINGS, "batch 1, seq_len 1, empty past, enc_seq_len 1"
)
b_marian_kv1_legacy = with_bindings(
    as_legacy(ab.b_marian_kv), ED1_BINDINGS, "batch 1, seq_len 1, empty past, enc_seq_len 1"
)
b_falcon_alibi_kv1_legacy = with_bindings(
    as_legacy(ab.b_falcon_alibi_kv), KV1_BINDINGS, "KV1 bindings"
)

GEMMA3_SW = HF(
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
    sliding_window=5,
    layer_types=["sliding_attention", "full_attention"],
    query_pre_attn_scalar=8,
    final_logit_softcapping=30.0,
    attn_logit_softcapping=None,
    **TOKENS,
)
b_gemma3_sw5_kv1 = with_bindings(
    kv(
        GEMMA3_SW,
        1,
        8,
        "Gemma3ForCausalLM 2 layers, sliding window 5 (sliding + full layers), "
        "MQA 4/1, KV ({exporter})",
        attn="eager",
    ),
    KV1_BINDINGS,
    "KV1 bindings: total_seq_len below and above the window",
)

LLAMA_NTK = HF(
    "LlamaForCausalLM",
    "LlamaConfig",
    vocab_size=400,
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=6,
    rope_scaling={"rope_type": "dynamic", "factor": 2.0},
    **TOKENS,
)
b_llama_ntk_kv1 = with_bindings(
    kv(
        LLAMA_NTK,
        2,
        8,
        "LlamaForCausalLM 2 layers, dynamic-NTK rope (factor 2, max positions 6: "
        "the rope base grows with the sequence past 6), KV ({exporter})",
    ),
    KV1_BINDINGS,
    "KV1 bindings",
)
b_llama_ntk_kv1_legacy = with_bindings(
    kv(
        LLAMA_NTK,
        2,
        8,
        "LlamaForCausalLM 2 layers, dynamic-NTK rope (factor 2, max positions 6), "
        "KV, eager ({exporter} opset 17)",
        attn="eager",
        exporter="legacy",
    ),
    KV1_BINDINGS,
    "KV1 bindings",
)
PHI3_LONGROPE = HF(
    "Phi3ForCausalLM",
    "Phi3Config",
    vocab_size=448,
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=64,
    original_max_position_embeddings=8,
    rope_scaling={
        "rope_type": "longrope",
        "short_factor": [1.0, 1.1, 1.2, 1.5],
        "long_factor": [2.0, 2.5, 3.0, 4.0],
    },
    pad_token_id=0,
    bos_token_id=1,
    eos_token_id=2,
    sliding_window=None,
)
b_phi3_longrope_kv1 = with_bindings(
    kv(
        PHI3_LONGROPE,
        2,
        8,
        "Phi3ForCausalLM 2 layers, longrope (short/long factors switched at "
        "8 positions), KV ({exporter})",
    ),
    KV1_BINDINGS,
    "KV1 bindings",
)

LONGFORMER = HF(
    "LongformerModel",
    "LongformerConfig",
    vocab_size=400,
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=4,
    intermediate_size=64,
    attention_window=4,
    max_position_embeddings=80,
    pad_token_id=1,
    type_vocab_size=1,
)
b_longformer = with_bindings(
    seq(
        LONGFORMER,
        ["last_hidden_state", "pooler_output"],
        "LongformerModel 2 layers, sliding-chunk attention window 4 (sequence padded to a "
        "multiple of 4, chunks of 2 * 2 overlapping) (dynamo)",
        attn="eager",
        token_types=False,
    ),
    SEQ1_BINDINGS,
)
b_longformer_legacy = with_bindings(
    seq(
        LONGFORMER,
        ["last_hidden_state", "pooler_output"],
        "LongformerModel 2 layers, attention window 4 (TorchScript opset 17)",
        attn="eager",
        token_types=False,
        exporter="legacy",
        out_dyn={
            "last_hidden_state": {0: "batch", 1: "seq_len"},
            "pooler_output": {0: "batch"},
        },
    ),
    SEQ1_BINDINGS,
)
PROPHETNET = HF(
    "ProphetNetForConditionalGeneration",
    "ProphetNetConfig",
    vocab_size=400,
    hidden_size=32,
    encoder_ffn_dim=64,
    decoder_ffn_dim=64,
    num_encoder_layers=1,
    num_decoder_layers=1,
    num_encoder_attention_heads=4,
    num_decoder_attention_heads=4,
    ngram=2,
    num_buckets=8,
    relative_max_distance=16,
    max_position_embeddings=64,
    pad_token_id=0,
    bos_token_id=1,
    eos_token_id=2,
)
b_prophetnet = with_bindings(
    cc.encdec(
        PROPHETNET,
        "ProphetNetForConditionalGeneration 1+1 layers, ngram 2 (main + 2 predict streams), "
        "relative buckets 8 (dynamo)",
        attn="eager",
    ),
    ENCDEC1_BINDINGS,
)
BIGBIRD = HF(
    "BigBirdModel",
    "BigBirdConfig",
    vocab_size=400,
    hidden_size=32,
    num_hidden_layers=1,
    num_attention_heads=4,
    intermediate_size=64,
    max_position_embeddings=128,
    attention_type="block_sparse",
    block_size=2,
    num_random_blocks=1,
    type_vocab_size=2,
    pad_token_id=0,
)
BIGBIRD_BINDINGS = [
    {"batch": 1, "seq_len": 16},
    {"batch": 3, "seq_len": 17},
    {"batch": 2, "seq_len": 31},
]


def _bigbird(exporter):
    def build(tmp):
        m, _ = BIGBIRD.new("eager")
        names = ["input_ids", "attention_mask"]
        gens = {"input_ids": ("int", 3, 400), "attention_mask": ("ones",)}
        path, ref = dc._seq_model(
            tmp,
            m,
            names,
            ["last_hidden_state"],
            exporter,
            gens,
            example_seq=24,
            out_dyn={"last_hidden_state": {0: "batch", 1: "seq_len"}},
        )
        return cc._spec(
            path,
            ref,
            BIGBIRD_BINDINGS,
            gens,
            "BigBirdModel 1 layer, block_sparse attention taken (block 2, 1 random "
            "block, seq_len > 14; padded to a block multiple), exported at 24 "
            f"({exporter})",
        )

    return build


MOBILEVIT_ODD = [
    {"batch": 1, "height": 65, "width": 97},
    {"batch": 2, "height": 50, "width": 70},
    {"batch": 1, "height": 33, "width": 129},
]
b_mobilevit_odd = with_bindings(
    pc.b_mobilevit, MOBILEVIT_ODD, "odd sizes: patches interpolated to a multiple of 2"
)
MOBILEVITV2 = HF(
    "MobileViTV2Model",
    "MobileViTV2Config",
    image_size=64,
    num_channels=3,
    width_multiplier=0.25,
    patch_size=2,
    conv_kernel_size=3,
    mlp_ratio=2.0,
    n_attn_blocks=[1, 1, 1],
    base_attn_unit_dims=[16, 24, 32],
)
b_mobilevitv2 = image(
    MOBILEVITV2,
    ["last_hidden_state", "pooler_output"],
    (64, 96),
    "MobileViTV2Model width 0.25: separable linear attention over unfolded 2x2 patches "
    "(F.unfold / F.fold, the plane interpolated to a multiple of 2) (dynamo)",
    attn="eager",
    bindings=MOBILEVIT_ODD,
)
b_prophetnet_legacy = as_legacy(b_prophetnet)
LED = HF(
    "LEDForConditionalGeneration",
    "LEDConfig",
    vocab_size=400,
    d_model=32,
    encoder_layers=1,
    decoder_layers=1,
    encoder_attention_heads=4,
    decoder_attention_heads=4,
    encoder_ffn_dim=64,
    decoder_ffn_dim=64,
    attention_window=4,
    max_encoder_position_embeddings=64,
    max_decoder_position_embeddings=64,
    pad_token_id=1,
    bos_token_id=0,
    eos_token_id=2,
    decoder_start_token_id=2,
)
b_led_legacy = with_bindings(
    as_legacy(
        cc.encdec(
            LED,
            "LEDForConditionalGeneration 1+1 layers, Longformer encoder attention window 4 "
            "(input padded to a multiple of 4)",
            attn="eager",
        )
    ),
    ENCDEC1_BINDINGS,
)
b_mobilevitv2_legacy = as_legacy(b_mobilevitv2, opset=18)  # col2im: opset 18
CONVNEXT_ODD = [
    {"batch": 1, "height": 35, "width": 45},
    {"batch": 3, "height": 67, "width": 33},
    {"batch": 2, "height": 97, "width": 130},
]
b_convnextv2_odd = with_bindings(
    pc.b_convnextv2, CONVNEXT_ODD, "odd sizes (not stride multiples)"
)


ODD_SMALL = [
    {"batch": 1, "height": 33, "width": 47},
    {"batch": 3, "height": 50, "width": 35},
    {"batch": 2, "height": 67, "width": 95},
]
b_resnet_odd = with_bindings(cc.b_resnet, ODD_SMALL, "odd sizes, batch 1")
b_poolformer_odd = with_bindings(cc.b_poolformer, ODD_SMALL, "odd sizes, batch 1")
b_efficientnet_odd = with_bindings(cc.b_efficientnet, ODD_SMALL, "odd sizes, batch 1")
b_convnext_odd = with_bindings(cc.b_convnext, ODD_SMALL, "odd sizes, batch 1")
b_dinov2_odd = with_bindings(cc.b_dinov2, ODD_SMALL, "odd sizes (patch 8 floors), batch 1")
b_regnet_odd = with_bindings(pc.b_regnet, ODD_SMALL, "odd sizes, batch 1")
b_yolos_odd = with_bindings(pc.b_yolos, ODD_SMALL, "odd sizes, batch 1")
b_glpn_odd = with_bindings(a2.b_glpn, ODD_SMALL, "odd sizes, batch 1")
b_segformer_odd = with_bindings(dc.b_segformer, ODD_SMALL, "odd sizes, batch 1")


# ----------------------------------------------------------------------------
# Registry
# ----------------------------------------------------------------------------
ATTACK5 = [
    ("loops_legacy", b_loops_legacy),
    ("nested_loops_legacy", b_nested_legacy),
    ("greedy_decode_legacy", b_greedy_legacy),
    ("beam_decode_legacy", b_beam_legacy),
    ("if_shape_legacy", b_if_legacy),
    ("hand_loop_scan", b_hand_loop_scan),
    ("hand_sequences", b_hand_sequences),
    ("hand_image_ops", b_hand_image_ops),
    ("pool_ops_dynamo", _pool("dynamo")),
    ("pool_ops_legacy", _pool("legacy")),
    ("resize_ops_dynamo", _resize("dynamo")),
    ("resize_ops_legacy", _resize("legacy")),
    ("conv_ops_dynamo", _conv("dynamo")),
    ("conv_ops_legacy", _conv("legacy")),
    ("sample_ops_dynamo", _sample("dynamo")),
    ("sample_ops_legacy", _sample("legacy")),
    ("yolo_head_dynamo", _yolo("dynamo")),
    ("yolo_head_legacy", _yolo("legacy")),
    ("chain_ops_dynamo", _chain("dynamo")),
    ("chain_ops_legacy", _chain("legacy")),
    ("dim_relations_dynamo", b_relations),
    ("dim_relations_conv_dynamo", b_relations_conv),
    ("bloom_kv1_legacy", b_bloom_kv1_legacy),
    ("gptneo_kv1_dynamo", b_gptneo_kv1),
    ("codegen_kv1_legacy", b_codegen_kv1_legacy),
    ("cohere2_swa_kv1_dynamo", b_cohere2_swa_kv1),
    ("gemma3_sw5_kv1_dynamo", b_gemma3_sw5_kv1),
    ("llama_ntk_kv1_legacy", b_llama_ntk_kv1_legacy),
    ("phi3_longrope_kv1_dynamo", b_phi3_longrope_kv1),
    ("t5_kv1_dynamo", b_t5_kv1),
    ("t5_kv1_legacy", b_t5_kv1_legacy),
    ("bart_kv1_legacy", b_bart_kv1_legacy),
    ("marian_kv1_legacy", b_marian_kv1_legacy),
    ("prophetnet_legacy", b_prophetnet_legacy),
    ("convnextv2_odd_dynamo", b_convnextv2_odd),
    ("resnet_odd_dynamo", b_resnet_odd),
    ("poolformer_odd_dynamo", b_poolformer_odd),
    ("efficientnet_odd_dynamo", b_efficientnet_odd),
    ("convnext_odd_dynamo", b_convnext_odd),
    ("dinov2_odd_dynamo", b_dinov2_odd),
    ("regnet_odd_dynamo", b_regnet_odd),
    ("yolos_odd_dynamo", b_yolos_odd),
    ("glpn_odd_dynamo", b_glpn_odd),
    ("segformer_odd_dynamo", b_segformer_odd),
]
#: Export or onnxruntime failures (``--only NAME`` reproduces them; see the module docstring).
EXTRA = [
    ("falcon_alibi_kv1_dynamo", b_falcon_alibi_kv1),
    ("falcon_alibi_kv1_legacy", b_falcon_alibi_kv1_legacy),
    ("llama_ntk_kv1_dynamo", b_llama_ntk_kv1),
    ("longformer_dynamo", b_longformer),
    ("longformer_legacy", b_longformer_legacy),
    ("bigbird_sparse24_dynamo", _bigbird("dynamo")),
    ("bigbird_sparse24_legacy", _bigbird("legacy")),
    ("mobilevit_odd_dynamo", b_mobilevit_odd),
    ("prophetnet_dynamo", b_prophetnet),
    ("mobilevitv2_odd_dynamo", b_mobilevitv2),
    ("mobilevitv2_odd_legacy", b_mobilevitv2_legacy),
    ("led_legacy", b_led_legacy),
]

dc.MODELS.clear()
dc.EXTRAS.clear()
for _name, _fn in ATTACK5:
    dc.MODELS[_name] = (_fn, {})
for _name, _fn in EXTRA:
    dc.EXTRAS[_name] = (_fn, {})


def main(argv=None):
    return cc.corpus_main(argv, "/work/attack5_corpus", __doc__)


if __name__ == "__main__":
    sys.exit(main())
