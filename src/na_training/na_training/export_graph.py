"""Graph clean-up of the traced NeuralActuator ONNX graph before ONNX Runtime sees it (used by ``export.py``).

jax2onnx traces every ``Linear`` on a ``[batch, L, d]`` tensor as Reshape -> Gemm -> Reshape whose target
shapes are computed at run time (Shape -> Slice/Gather -> Concat), and attention as a chain of
Reshape/Transpose/MatMul/Softmax nodes. ONNX Runtime's own optimiser folds none of it (the shapes depend on
the symbolic batch), so a one-sample inference runs ~330 kernels. Each pass here is generic over the graph it
finds, leaves anything it does not recognise as it is, and reports how often it applied; ``export.py`` checks
the result against JAX like any other graph.

- :func:`static_reshapes`: a Reshape whose target only depends on the batch size gets a constant target
  (batch dimension -1), found by evaluating the targets at two batch sizes; the shape arithmetic becomes dead.
- :func:`gemm_to_matmul`: Reshape([-1, K]) -> Gemm(W, b) -> Reshape([-1, L, N]) becomes MatMul(W) + Add(b)
  on the 3-D tensor (for the int8 variants: ONNX Runtime's dynamic quantiser handles MatMul, not Gemm).
- ``export_attention.fuse_attention``: scaled dot-product attention over heads (Reshape -> Transpose -> MatMul ->
  scale -> Softmax -> MatMul -> Transpose -> Reshape) becomes ``com.microsoft.MultiHeadAttention``.
- :func:`flat_tokens`: keeps ``[batch, L, N]`` token tensors as ``[batch * L, N]`` wherever the ops only work
  along the last axis, so the Reshape pair around every Gemm goes; tensors are made 3-D again only for the ops
  that need it (attention, pooling over L).
- :func:`merge_sibling_gemms`: Gemms with constant weights that read the same input (query, key and value;
  the output heads) become one wider Gemm and a Split.
- ``export_attention.attention_with_projection``: ``MultiHeadAttention`` fed by column ranges of one Gemm
  becomes ``com.microsoft.Attention`` with the query, key and value weights inside it.
- ``onnx_graph.prune``: nodes and initialisers nothing reads any more (``onnx_graph`` also holds what every
  pass works with: producer/consumer maps, evaluation of intermediate tensors).
"""

from __future__ import annotations

import copy
from collections import defaultdict

import numpy as np
import onnx
from onnx import helper

from na_training.export_attention import attention_with_projection, fuse_attention
from na_training.onnx_graph import (
    Graph,
    Pass,
    PassReport,
    attribute,
    evaluate,
    gemm_bias,
    plain_gemm_weight,
    prune,
    rebuild,
)


# ---------------------------------------------------------------- passes
def static_reshapes(model: onnx.ModelProto, report: PassReport) -> None:
    g = Graph(model.graph)
    dynamic = [n for n in model.graph.node if n.op_type == "Reshape" and g.constant(n.input[1]) is None]
    if not dynamic:
        return
    names = sorted({n.input[1] for n in dynamic})
    at2, at3 = evaluate(model, names, 2), evaluate(model, names, 3)
    count = 0
    for node in dynamic:
        a, b = at2[node.input[1]].astype(np.int64), at3[node.input[1]].astype(np.int64)
        if a.shape != b.shape or np.any(a <= 0) or np.any(b <= 0):
            continue
        varying = np.flatnonzero(a != b)
        if len(varying) > 1:
            continue
        target = a.copy()
        target[varying] = -1
        node.input[1] = g.add_initializer("shape", target)
        count += 1
    report.add("static reshape", count)


def matmul_name(gemm_name: str) -> str:
    """The name :func:`gemm_to_matmul` gives the MatMul that replaces the Gemm ``gemm_name``."""
    return f"{gemm_name}/matmul"


def gemm_to_matmul(model: onnx.ModelProto, report: PassReport, only: set[str] | None = None) -> None:
    """Reshape(x -> [-1, K]) -> Gemm(W, b) -> Reshape(-> [-1, L, N]) with x [B, L, K]: MatMul + Add on x (the
    Gemms named in ``only``, default all); the MatMul is named :func:`matmul_name` of the Gemm."""
    g = Graph(model.graph)
    candidates = []
    for gemm in model.graph.node:
        if only is not None and matmul_name(gemm.name) not in only:
            continue
        weight = plain_gemm_weight(g, gemm)
        bias = g.constant(gemm.input[2]) if len(gemm.input) > 2 and gemm.input[2] else None
        flatten = g.source(gemm.input[0], "Reshape")
        unflatten = g.only_consumer(gemm.output[0], "Reshape")
        if weight is None or flatten is None or unflatten is None:
            continue
        flat_shape, out_shape = g.constant(flatten.input[1]), g.constant(unflatten.input[1])
        if flat_shape is None or out_shape is None or len(out_shape) != 3 or out_shape[0] != -1 \
                or list(flat_shape) != [-1, weight.shape[0]] or out_shape[2] != weight.shape[1]:
            continue
        if bias is not None and bias.shape != (weight.shape[1],):
            continue
        candidates.append((gemm, flatten, unflatten, weight, bias))
    if not candidates:
        return
    inputs = evaluate(model, sorted({c[1].input[0] for c in candidates}), 2)
    removed: list[onnx.NodeProto] = []
    inserted: dict[int, list[onnx.NodeProto]] = {}
    for gemm, flatten, unflatten, weight, bias in candidates:
        x = flatten.input[0]
        if inputs[x].shape != (2, int(g.constant(unflatten.input[1])[1]), weight.shape[0]):
            continue
        out = unflatten.output[0]
        weight_name = g.add_initializer("weight", weight.astype(np.float32))
        if bias is None:
            nodes = [helper.make_node("MatMul", [x, weight_name], [out], name=matmul_name(gemm.name))]
        else:
            product = g.fresh("product")
            nodes = [helper.make_node("MatMul", [x, weight_name], [product], name=matmul_name(gemm.name)),
                     helper.make_node("Add", [product, g.add_initializer("bias", bias.astype(np.float32))], [out],
                                      name=g.fresh("bias"))]
        removed += [gemm, unflatten]
        inserted[id(gemm)] = nodes
    rebuild(model.graph, removed, inserted)
    report.add("Gemm -> MatMul", len(inserted))


# Ops that act on each element, or along the last axis only: the same on [B, L, N] and on [B * L, N].
ELEMENTWISE = {"Add", "Sub", "Mul", "Div", "Gelu", "Sigmoid", "Relu", "Tanh", "Erf", "Identity", "QuickGelu",
               "FastGelu"}
LAST_AXIS = {"LayerNormalization": 0, "Split": 0, "Softmax": 0}     # op -> the input it splits or normalises


def _last_axis_only(node: onnx.NodeProto) -> bool:
    """On a 3-D token tensor, the op works along the last axis alone (or on each element)."""
    if node.op_type in ELEMENTWISE:
        return True
    return node.op_type in LAST_AXIS and attribute(node, "axis", -1) in (-1, 2)


def flat_tokens(model: onnx.ModelProto, report: PassReport) -> None:
    """Token tensors (``[B, L, N]``, B the batch) stay flat (``[B * L, N]``) through ops that act on the last axis
    alone; the flat form comes from the Reshape that made the 3-D tensor (its input) or from a Reshape added
    where none exists. A Reshape that flattens a token tensor is then redundant, and a 3-D form is made again
    (one Reshape) only for a consumer that needs it. Shapes come from running the graph at two batch sizes."""
    graph = model.graph
    g = Graph(graph)
    produced = [name for node in graph.node for name in node.output if name]
    at2, at3 = evaluate(model, produced, 2), evaluate(model, produced, 3)

    def token(name: str) -> tuple[int, int] | None:
        """(L, N) of a token tensor [B, L, N] (B the batch), else None."""
        a, b = at2.get(name), at3.get(name)
        if a is None or b is None or a.ndim != 3 or b.ndim != 3 or (a.shape[0], b.shape[0]) != (2, 3) \
                or a.shape[1:] != b.shape[1:]:
            return None
        return a.shape[1], a.shape[2]

    def flat_of_batch(name: str, tokens: tuple[int, int]) -> bool:
        """``name`` is [B * L, N] for the token shape (L, N)."""
        a, b = at2.get(name), at3.get(name)
        return a is not None and b is not None and a.shape == (2 * tokens[0], tokens[1]) \
            and b.shape == (3 * tokens[0], tokens[1])

    flat: dict[str, str] = {}                 # token tensor -> its flat form
    materialised: set[str] = set(produced)    # token tensors whose 3-D form the new graph computes
    rename: dict[str, str] = {}
    nodes: list[onnx.NodeProto] = []
    targets: dict[tuple[int, ...], str] = {}   # Reshape targets [-1, *dims], one initialiser each
    changed = 0

    def target(dims: tuple[int, ...]) -> str:
        if dims not in targets:
            targets[dims] = g.add_initializer("shape", np.array([-1, *dims], np.int64))
        return targets[dims]

    def need_3d(name: str) -> None:
        if name not in materialised:
            nodes.append(helper.make_node("Reshape", [flat[name], target(token(name))], [name], name=g.fresh("tokens")))
            materialised.add(name)

    def need_flat(name: str) -> str:
        if name not in flat:
            flat[name] = g.fresh("flat")
            nodes.append(helper.make_node("Reshape", [name, target((token(name)[1],))], [flat[name]],
                                          name=g.fresh("flatten")))
        return flat[name]

    for original in graph.node:
        node = copy.deepcopy(original)
        for k, name in enumerate(node.input):
            node.input[k] = rename.get(name, name)
        out = node.output[0] if node.output else ""
        if node.op_type == "Reshape" and g.constant(node.input[1]) is not None:
            source, made = node.input[0], token(out)
            if made is not None and flat_of_batch(source, made):                 # unflatten: keep it flat
                flat[out] = source
                materialised.discard(out)
                changed += 1
                continue
            tokens = token(source)
            if tokens is not None and source in flat and flat_of_batch(out, tokens) and out not in g.outputs:
                # a flatten of a tensor that already has its flat form
                rename[out] = flat[source]
                changed += 1
                continue
        tokens_in = [name for name in node.input if name and token(name) is not None]
        outputs_ok = all(token(name) is not None for name in node.output if name)
        others_ok = all(g.constant(name) is not None and (node.op_type not in ELEMENTWISE or
                                                          _broadcasts_on_last_axis(g.constant(name)))
                        for name in node.input if name and name not in tokens_in)
        if node.op_type in LAST_AXIS and node.input[LAST_AXIS[node.op_type]] not in tokens_in:
            others_ok = False
        if tokens_in and outputs_ok and others_ok and any(name in flat for name in tokens_in) \
                and _last_axis_only(node):
            for k, name in enumerate(node.input):
                if name in tokens_in:
                    node.input[k] = need_flat(name)
                elif name and node.op_type in ELEMENTWISE and g.constant(name).ndim > 1:
                    # [1, 1, N] would broadcast a 2-D tensor to 3-D: the same values as [N]
                    node.input[k] = g.add_initializer("last_axis", g.constant(name).reshape(-1))
            if node.op_type in LAST_AXIS:
                _set_axis(node, -1)
            for k, name in enumerate(node.output):
                flat[name] = node.output[k] = g.fresh("flat")
                materialised.discard(name)
            nodes.append(node)
            continue
        for name in node.input:
            if name and token(name) is not None:
                need_3d(name)
        nodes.append(node)
        source = node.input[0] if node.input else ""
        tokens = token(source) if node.op_type == "Reshape" else None
        if tokens is not None and source not in flat and flat_of_batch(out, tokens):
            flat[source] = out                                                   # a flat form to reuse
    for output in graph.output:
        if token(output.name) is not None:
            need_3d(output.name)
    del graph.node[:]
    graph.node.extend(nodes)
    report.add("flat token tensors", changed)


def merge_sibling_gemms(model: onnx.ModelProto, report: PassReport) -> None:
    """Gemms that read the same input with constant weights (and biases) are one Gemm over the concatenated
    weights followed by a Split: one wider matrix product instead of several narrow ones."""
    g = Graph(model.graph)
    groups: dict[str, list[tuple[onnx.NodeProto, np.ndarray, np.ndarray]]] = defaultdict(list)
    for node in model.graph.node:
        weight = plain_gemm_weight(g, node)
        bias = gemm_bias(g, node, weight.shape[1]) if weight is not None else None
        if bias is None:
            continue
        groups[node.input[0]].append((node, weight, bias))
    removed: list[onnx.NodeProto] = []
    inserted: dict[int, list[onnx.NodeProto]] = {}
    for source, members in groups.items():
        if len(members) < 2:
            continue
        weight = np.concatenate([w for _, w, _ in members], axis=1).astype(np.float32)
        bias = np.concatenate([b for _, _, b in members]).astype(np.float32)
        wide = g.fresh("wide")
        first = members[0][0]
        sizes = g.add_initializer("sizes", np.array([w.shape[1] for _, w, _ in members], np.int64))
        inserted[id(first)] = [
            helper.make_node("Gemm", [source, g.add_initializer("weight", weight), g.add_initializer("bias", bias)],
                             [wide], name=g.fresh("gemm")),
            helper.make_node("Split", [wide, sizes], [node.output[0] for node, _, _ in members], axis=1,
                             name=g.fresh("split"))]
        removed += [node for node, _, _ in members]
    # The merged Gemm goes where the first member was; every member's input is produced before it.
    rebuild(model.graph, removed, inserted)
    report.add("merged Gemms", sum(len(m) for m in groups.values() if len(m) > 1))


def _broadcasts_on_last_axis(value: np.ndarray) -> bool:
    return value.ndim <= 1 or all(d == 1 for d in value.shape[:-1])


def _set_axis(node: onnx.NodeProto, axis: int) -> None:
    for a in node.attribute:
        if a.name == "axis":
            a.i = axis
            return
    node.attribute.append(helper.make_attribute("axis", axis))


# The fp32 graph keeps Gemm (bias fused; faster than MatMul + Add here); the graph the int8 variants start from
# has MatMul + Add, which ONNX Runtime's quantisers handle (dynamic quantisation has no Gemm).
FP32_BASE_PASSES: tuple[Pass, ...] = (static_reshapes, prune, fuse_attention, prune)
# The layout passes run last: they remove the Reshape -> Gemm -> Reshape pattern that gemm_to_matmul looks for,
# so a graph that is to have some Gemms as MatMul (int8-mixed) gets them after that conversion.
# attention_with_projection needs the Gemms merged; it leaves an attention whose projection is a MatMul (an int8
# layer of int8-mixed) as it is, and the quantisers are told to quantise MatMuls only.
LAYOUT_PASSES: tuple[Pass, ...] = (flat_tokens, merge_sibling_gemms, prune, attention_with_projection, prune)
FP32_PASSES: tuple[Pass, ...] = FP32_BASE_PASSES + LAYOUT_PASSES
MATMUL_PASSES: tuple[Pass, ...] = (static_reshapes, prune, gemm_to_matmul, prune, fuse_attention, prune)


def optimise(model: onnx.ModelProto, passes: tuple[Pass, ...] = FP32_PASSES) -> tuple[onnx.ModelProto, PassReport]:
    """A cleaned-up copy of ``model`` and what was applied (the input is not changed)."""
    out = copy.deepcopy(model)
    report = PassReport()
    for run in passes:
        run(out, report)
    del out.graph.value_info[:]                  # stale shapes of renamed or removed values
    onnx.checker.check_model(out)
    return out, report
