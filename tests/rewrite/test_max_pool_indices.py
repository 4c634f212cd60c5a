"""A ``MaxPool``'s unused ``Indices`` output stays through ``optimize``.

onnxruntime runs a single-output float ``MaxPool`` on another kernel (MLAS), which starts
its maximum at ``-FLT_MAX`` and skips NaN: a window of ``-inf`` or NaN gave ``-3.4e38``
where the original's two-output kernel gives ``-inf`` and NaN. Found by helper-81 with
``python -m tests.rewrite.test_optimize_fuzz 233000 233500 --fusions onnx`` (seed 233032).
onnxruntime is the oracle.
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


@pytest.mark.parametrize("fill", [-np.inf, np.nan], ids=["minus_inf", "nan"])
def test_an_unused_max_pool_indices_output_is_kept(fill):
    m = model(MAX_POOL_UNUSED_INDICES)
    before = proto(m)
    OptimizePass()(m)
    feeds = {"x": lambda sizes: np.full([1, 1, sizes["N"]], fill, np.float32)}
    assert_equivalent(before, m, [{"N": 1}, {"N": 3}], given=feeds)
