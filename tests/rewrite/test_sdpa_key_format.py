"""``fusions="ort"``: an attention whose key is given sequence first (SDPA ``key_format="BSHd"``).

onnxscript's cross-attention ``MultiHeadAttention`` rule reads an SDPA's key as
``[B, H, Skv, Dh]`` whatever its ``key_format``. A key transposed straight from
``[B, Skv, H, Dh]`` to ``[B, H, Dh, Skv]`` (one ``Transpose<perm=[0,2,3,1]>``) passed its
shape check when ``Skv == H`` (Perceiver's decoder: 8 latents, 8 heads), and the fused
attention mixed heads and positions (outputs off by 2 % of their scale). The guard now
gives every SDPA key heads first before the MHA rules run. Compared in onnxruntime.
"""

from __future__ import annotations

import pytest

from onnx_symdims.rewrite import OptimizePass
from tests.rewrite._rewrite_testing import proto
from tests.rewrite.test_packed_attention import _assert_close, _block


@pytest.mark.parametrize("memory", ["2", "3", "mem"])
def test_a_key_given_sequence_first_is_fused_right(memory):
    """Two memory positions and two heads: the case the MHA rule took for heads first.

    Values of 4 per head beside keys of 8: only the cross-attention rule takes them.
    """
    m = _block(cross=True, memory=memory, value_size=4)
    before = proto(m)
    result = OptimizePass(fusions="ort")(m)
    assert result.fired["fusion.sdpa"] == 1
    assert [n.op_type for n in m.graph if n.domain == "com.microsoft"] == [
        "MultiHeadAttention"
    ]
    _assert_close(before, m)
