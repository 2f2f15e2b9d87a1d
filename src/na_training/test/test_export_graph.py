"""Graph passes on small hand-built graphs: the outputs stay what ONNX Runtime computes on the original graph, and
the passes remove the kernels they are for."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from na_training.export_attention import attention_with_projection
from na_training.export_graph import flat_tokens, merge_sibling_gemms
from na_training.onnx_graph import PassReport, prune

TOKENS, WIDTH, HIDDEN = 4, 6, 8


def _const(name: str, value: np.ndarray) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(value), name)


def _token_mlp() -> onnx.ModelProto:
    """x [B, 4, 6] -> LayerNorm -> (flatten, Gemm, unflatten) x3 siblings -> Gelu / Sigmoid gate -> residual Add ->
    flatten, Gemm, unflatten -> mean over the tokens; the shapes as a tracer writes them."""
    rng = np.random.default_rng(3)
    inits = [
        _const("flat6", np.array([-1, WIDTH], np.int64)), _const("tok8", np.array([-1, TOKENS, HIDDEN], np.int64)),
        _const("flat8", np.array([-1, HIDDEN], np.int64)), _const("tok6", np.array([-1, TOKENS, WIDTH], np.int64)),
        _const("ln_scale", rng.standard_normal(WIDTH).astype(np.float32)),
        _const("ln_bias", rng.standard_normal(WIDTH).astype(np.float32)),
        _const("position", rng.standard_normal((TOKENS, WIDTH)).astype(np.float32)),   # not last-axis only
        _const("offset", rng.standard_normal((1, 1, HIDDEN)).astype(np.float32)),
        _const("axes", np.array([1], np.int64)),
    ]
    for k in range(3):
        inits += [_const(f"w{k}", rng.standard_normal((WIDTH, HIDDEN)).astype(np.float32)),
                  _const(f"b{k}", rng.standard_normal(HIDDEN).astype(np.float32))]
    inits += [_const("w_out", rng.standard_normal((HIDDEN, WIDTH)).astype(np.float32)),
              _const("b_out", rng.standard_normal(WIDTH).astype(np.float32))]
    nodes = [
        helper.make_node("Add", ["x", "position"], ["stream"]),
        helper.make_node("LayerNormalization", ["stream", "ln_scale", "ln_bias"], ["normed"], axis=2),
    ]
    for k in range(3):                       # each Linear flattens on its own, as traced
        nodes += [helper.make_node("Reshape", ["normed", "flat6"], [f"in{k}"]),
                  helper.make_node("Gemm", [f"in{k}", f"w{k}", f"b{k}"], [f"g{k}"]),
                  helper.make_node("Reshape", [f"g{k}", "tok8"], [f"h{k}"])]
    nodes += [
        helper.make_node("Gelu", ["h0"], ["act"], domain="com.microsoft"),
        helper.make_node("Sigmoid", ["h1"], ["gate"]),
        helper.make_node("Mul", ["act", "gate"], ["gated"]),
        helper.make_node("Add", ["gated", "offset"], ["shifted"]),
        helper.make_node("Add", ["shifted", "h2"], ["mixed"]),
        helper.make_node("Reshape", ["mixed", "flat8"], ["mixed_flat"]),
        helper.make_node("Gemm", ["mixed_flat", "w_out", "b_out"], ["proj"]),
        helper.make_node("Reshape", ["proj", "tok6"], ["proj3"]),
        helper.make_node("Add", ["stream", "proj3"], ["out3"]),
        helper.make_node("ReduceMean", ["out3", "axes"], ["pooled"], keepdims=0),
    ]
    graph = helper.make_graph(
        nodes, "token_mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", TOKENS, WIDTH])],
        [helper.make_tensor_value_info("pooled", TensorProto.FLOAT, ["batch", WIDTH]),
         helper.make_tensor_value_info("gate", TensorProto.FLOAT, ["batch", TOKENS, HIDDEN])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18),
                                                    helper.make_opsetid("com.microsoft", 1)])
    onnx.checker.check_model(model)
    return model


def _run(model: onnx.ModelProto, x: np.ndarray) -> list[np.ndarray]:
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return session.run(None, {"x": x})


@pytest.fixture(scope="module")
def passed() -> tuple[onnx.ModelProto, onnx.ModelProto, PassReport]:
    original = _token_mlp()
    model = onnx.ModelProto()
    model.CopyFrom(original)
    report = PassReport()
    for run in (flat_tokens, merge_sibling_gemms, prune):
        run(model, report)
    onnx.checker.check_model(model)
    return original, model, report


@pytest.mark.parametrize("batch", [1, 2, 5])
def test_outputs_are_unchanged_at_any_batch_size(passed, batch):
    original, model, _ = passed
    x = np.random.default_rng(batch).standard_normal((batch, TOKENS, WIDTH)).astype(np.float32)
    for before, after in zip(_run(original, x), _run(model, x), strict=True):
        assert before.shape == after.shape
        np.testing.assert_allclose(after, before, rtol=1e-5, atol=1e-5)


def test_reshapes_around_gemms_go_and_sibling_gemms_become_one(passed):
    original, model, report = passed
    ops_before = [n.op_type for n in original.graph.node]
    ops_after = [n.op_type for n in model.graph.node]
    assert ops_before.count("Gemm") == 4 and ops_after.count("Gemm") == 2, report.describe()
    assert ops_before.count("Reshape") == 8
    # Left: the traced flatten of the LayerNorm's output, one flatten of the stream for the residual Add (the
    # position Add broadcasts over the tokens, so the stream starts 3-D), and the 3-D forms the graph output
    # 'gate' and the mean over the tokens need.
    assert ops_after.count("Reshape") == 4, ops_after
    assert ops_after.count("Split") == 1


SEQ, MODEL, HEADS = 3, 8, 2


def _gated_attention(key_from_own_gemm: bool = False) -> onnx.ModelProto:
    """x [B, 3, 8] flattened -> one Gemm whose columns are query | gate | key | value (a Split, then a Split of the
    first part) -> query, key and value made 3-D -> MultiHeadAttention (2 heads, a scale of its own) -> flattened,
    times Sigmoid(gate). With ``key_from_own_gemm`` the key comes from another Gemm instead."""
    rng = np.random.default_rng(5)
    inits = [_const("flat", np.array([-1, MODEL], np.int64)), _const("tok", np.array([-1, SEQ, MODEL], np.int64)),
             _const("w", rng.standard_normal((MODEL, 4 * MODEL)).astype(np.float32)),
             _const("b", rng.standard_normal(4 * MODEL).astype(np.float32)),
             _const("wk", rng.standard_normal((MODEL, MODEL)).astype(np.float32)),
             _const("parts", np.array([2 * MODEL, MODEL, MODEL], np.int64)),
             _const("halves", np.array([MODEL, MODEL], np.int64))]
    key = "k_own" if key_from_own_gemm else "k"
    nodes = [helper.make_node("Reshape", ["x", "flat"], ["x_flat"]),
             helper.make_node("Gemm", ["x_flat", "w", "b"], ["wide"]),
             helper.make_node("Split", ["wide", "parts"], ["qg", "k", "v"], axis=1),
             helper.make_node("Split", ["qg", "halves"], ["q", "gate"], axis=-1),
             helper.make_node("Gemm", ["x_flat", "wk"], ["k_own"]),
             helper.make_node("Reshape", ["q", "tok"], ["q3"]),
             helper.make_node("Reshape", [key, "tok"], ["k3"]),
             helper.make_node("Reshape", ["v", "tok"], ["v3"]),
             helper.make_node("MultiHeadAttention", ["q3", "k3", "v3"], ["attended"], domain="com.microsoft",
                              num_heads=HEADS, scale=0.3),
             helper.make_node("Reshape", ["attended", "flat"], ["attended_flat"]),
             helper.make_node("Sigmoid", ["gate"], ["gate_open"]),
             helper.make_node("Mul", ["attended_flat", "gate_open"], ["y"])]
    graph = helper.make_graph(
        nodes, "gated_attention", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", SEQ, MODEL])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["tokens", MODEL]),
         helper.make_tensor_value_info("gate", TensorProto.FLOAT, ["tokens", MODEL])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18),
                                                    helper.make_opsetid("com.microsoft", 1)])
    prune(model, PassReport())
    onnx.checker.check_model(model)
    return model


def _with_projection(original: onnx.ModelProto) -> tuple[onnx.ModelProto, PassReport]:
    model = onnx.ModelProto()
    model.CopyFrom(original)
    report = PassReport()
    attention_with_projection(model, report)
    prune(model, report)
    onnx.checker.check_model(model)
    return model, report


@pytest.mark.parametrize("batch", [1, 2, 5])
def test_attention_takes_the_projection_and_the_outputs_stay(batch):
    original = _gated_attention()
    model, report = _with_projection(original)
    ops = [n.op_type for n in model.graph.node]
    assert "MultiHeadAttention" not in ops and ops.count("Attention") == 1, report.describe()
    assert "Split" not in ops and ops.count("Gemm") == 1, ops          # the gate's own Gemm is left
    assert ops.count("Reshape") == 3, ops           # the traced flatten, the 3-D form for Attention, its output flat
    x = np.random.default_rng(batch).standard_normal((batch, SEQ, MODEL)).astype(np.float32)
    for before, after in zip(_run(original, x), _run(model, x), strict=True):
        assert before.shape == after.shape
        np.testing.assert_allclose(after, before, rtol=1e-5, atol=1e-5)


def test_attention_over_two_gemms_is_left_as_it_is():
    original = _gated_attention(key_from_own_gemm=True)
    model, report = _with_projection(original)
    assert [n.op_type for n in model.graph.node] == [n.op_type for n in original.graph.node], report.describe()
