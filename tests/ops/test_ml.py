"""ai.onnx.ml ops with a dedicated hook (ONNX gives them no shape), against onnxruntime."""

from __future__ import annotations

import onnx_ir as ir
import pytest

from tests.ops._ort_oracle import check_against_ort, infer, model_text

ML = {"ai.onnx.ml": 3}
KERNEL = 'kernel_type="LINEAR", kernel_params=[0., 0., 0.]'
ROWS = [{"N": 3}, {"N": 1}, {"N": 0}]

# (id, inputs, body, outputs, expected shapes)
CASES = [
    ("linear_regressor", "float[N, 4] x",
     "y = ai.onnx.ml.LinearRegressor<coefficients=[1., 2, 3, 4, 1, 2, 3, 4], targets=2>(x)",
     "float y", {"y": ["N", 2]}),
    ("linear_regressor_1d", "float[4] x", "y = ai.onnx.ml.LinearRegressor<coefficients=[1., 2, 3, 4]>(x)",
     "float y", {"y": [1, 1]}),
    ("linear_regressor_default_target", "float[N, 2] x", "y = ai.onnx.ml.LinearRegressor<coefficients=[1., 2]>(x)",
     "float y", {"y": ["N", 1]}),
    ("normalizer", "float[N, 4] x", 'y = ai.onnx.ml.Normalizer<norm="L2">(x)', "float y", {"y": ["N", 4]}),
    ("normalizer_1d", "float[N] x", 'y = ai.onnx.ml.Normalizer<norm="MAX">(x)', "float y", {"y": ["N"]}),
    ("scaler_int", "int64[N, 4] x", "y = ai.onnx.ml.Scaler<offset=[1.], scale=[2.]>(x)", "float y",
     {"y": ["N", 4]}),
    ("imputer", "float[N, 4] x", "y = ai.onnx.ml.Imputer<imputed_value_floats=[0.], replaced_value_float=1.>(x)",
     "float y", {"y": ["N", 4]}),
    ("imputer_int", "int64[N, 4] x", "y = ai.onnx.ml.Imputer<imputed_value_int64s=[0], replaced_value_int64=1>(x)",
     "int64 y", {"y": ["N", 4]}),
    ("feature_vectorizer", "float[N, 4] x, float[N, 2] z",
     "y = ai.onnx.ml.FeatureVectorizer<inputdimensions=[4, 2]>(x, z)", "float y", {"y": ["N", 6]}),
    ("feature_vectorizer_cut_and_pad", "float[N, 4] x, float[N, 2] z",
     "y = ai.onnx.ml.FeatureVectorizer<inputdimensions=[3, 5]>(x, z)", "float y", {"y": ["N", 8]}),
    ("svm_regressor", "float[N, 2] x",
     f"y = ai.onnx.ml.SVMRegressor<coefficients=[1., -1.], support_vectors=[0., 0., 1., 1.], n_supports=2, rho=[0.], {KERNEL}>(x)",
     "float y", {"y": ["N", 1]}),
    ("svm_regressor_linear", "float[N, 2] x",
     f"y = ai.onnx.ml.SVMRegressor<coefficients=[1., -1.], rho=[0.], {KERNEL}>(x)", "float y", {"y": ["N", 1]}),
    ("svc_2_classes", "float[N, 2] x",
     f"y, p = ai.onnx.ml.SVMClassifier<classlabels_ints=[0, 1], coefficients=[1., -1.], support_vectors=[0., 0., 1., 1.], vectors_per_class=[1, 1], rho=[0.], {KERNEL}>(x)",
     "int64 y, float p", {"y": ["N"], "p": ["N", 2]}),
    ("svc_4_classes_pairwise", "float[N, 2] x",
     f"y, p = ai.onnx.ml.SVMClassifier<classlabels_ints=[0, 1, 2, 3], coefficients=[1., 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1], support_vectors=[0., 0., 1., 1., 2, 2, 3, 3], vectors_per_class=[1, 1, 1, 1], rho=[0., 0, 0, 0, 0, 0], {KERNEL}>(x)",
     "int64 y, float p", {"y": ["N"], "p": ["N", 6]}),
    ("svc_4_classes_proba", "float[N, 2] x",
     f"y, p = ai.onnx.ml.SVMClassifier<classlabels_ints=[0, 1, 2, 3], coefficients=[1., 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1], support_vectors=[0., 0., 1., 1., 2, 2, 3, 3], vectors_per_class=[1, 1, 1, 1], rho=[0., 0, 0, 0, 0, 0], prob_a=[1., 1, 1, 1, 1, 1], prob_b=[0., 0, 0, 0, 0, 0], {KERNEL}>(x)",
     "int64 y, float p", {"y": ["N"], "p": ["N", 4]}),
    ("svm_linear_4_classes", "float[N, 2] x",
     f'y, p = ai.onnx.ml.SVMClassifier<classlabels_strings=["a", "b", "c", "d"], coefficients=[1., -1., 1, 1, 1, 1, 1, 1], rho=[0., 0, 0, 0], {KERNEL}>(x)',
     "string y, float p", {"y": ["N"], "p": ["N", 4]}),
]  # fmt: skip


@pytest.mark.parametrize(
    ("inputs", "body", "outputs", "expected"),
    [c[1:] for c in CASES],
    ids=[c[0] for c in CASES],
)
def test_ml(inputs, body, outputs, expected):
    text = model_text(17, inputs, body, outputs, domains=ML)
    # onnxruntime's FeatureVectorizer aborts the process on 0 rows.
    rows = [*ROWS[:2], {"N": 2}] if "FeatureVectorizer" in body else ROWS
    inferred = check_against_ort(text, rows if "N" in inputs else [{}])
    assert not inferred.errors and not inferred.warnings
    for name, want in expected.items():
        assert inferred.shape(name) == want


def test_svm_classifier_label_type():
    body = f'y, p = ai.onnx.ml.SVMClassifier<classlabels_strings=["a", "b"], coefficients=[1., -1., 1, 1], rho=[0., 0], {KERNEL}>(x)'
    inferred = infer(model_text(17, "float[N, 2] x", body, "string y, float p", domains=ML))
    assert inferred.dtype("y") == ir.DataType.STRING


@pytest.mark.parametrize(("inputs", "body"), [
    ("float[N, 4] x, float[N, 2] z", "y = ai.onnx.ml.FeatureVectorizer<inputdimensions=[4]>(x, z)"),
    ("float[3, 4] x, float[5, 2] z", "y = ai.onnx.ml.FeatureVectorizer<inputdimensions=[4, 2]>(x, z)"),
    ("float[N, 4, 2] x", "y = ai.onnx.ml.LinearRegressor<coefficients=[1., 2]>(x)"),
    ("float[N, 4] x", "y = ai.onnx.ml.LinearRegressor<coefficients=[1., 2], targets=0>(x)"),
])  # fmt: skip
def test_malformed_is_a_diagnostic(inputs, body):
    assert infer(model_text(17, inputs, body, domains=ML)).errors
