"""Reproducers of helper-81's hunt (stop 44) for code outside the hunt's files.

Each is a strict xfail: it fails today and passes once the bug is fixed (then remove the
mark). Found by ``python -m tests.rewrite.test_optimize_fuzz 233000 233500 --fusions onnx``
(seed 233032, which differs with every option, no fusions included).
"""

from __future__ import annotations

import numpy as np
import pytest

from onnx_symdims.rewrite import OptimizePass
from tests.rewrite._rewrite_testing import assert_equivalent, model, proto

#: A MaxPool whose Indices output nothing reads.
MAX_POOL_UNUSED_INDICES = """
    g (float[1, 1, N] x) => (float[1, 1, N] y) {
        y, unused = MaxPool<kernel_shape = [1]>(x)
    }
"""


@pytest.mark.xfail(
    strict=True,
    reason="_pipeline.py keeps a MaxPool's unused Indices output only where SAME_* pads may "
    "be negative (_pool_indices_at_risk); onnxruntime runs the single-output float MaxPool "
    "on another kernel (MLAS), which starts its max at -FLT_MAX and skips NaN: a window "
    "of -inf gives -3.4028235e+38 and a window of NaN gives -3.4028235e+38 where the "
    "two-output kernel of the original gives -inf and NaN (double is unaffected). Keeping "
    "the Indices output of every float/float16 MaxPool would fix it",
)
@pytest.mark.parametrize("fill", [-np.inf, np.nan], ids=["minus_inf", "nan"])
def test_dropping_an_unused_max_pool_indices_output_keeps_its_values(fill):
    m = model(MAX_POOL_UNUSED_INDICES)
    before = proto(m)
    OptimizePass()(m)
    feeds = {"x": lambda sizes: np.full([1, 1, sizes["N"]], fill, np.float32)}
    assert_equivalent(before, m, [{"N": 1}, {"N": 3}], given=feeds)
