"""Attention passes of the export's graph clean-up (run by ``export_graph.optimise``).

- :func:`fuse_attention`: scaled dot-product attention over heads (Reshape -> Transpose -> MatMul -> scale ->
  Softmax -> MatMul -> Transpose -> Reshape) becomes ``com.microsoft.MultiHeadAttention``.
- :func:`attention_with_projection`: ``MultiHeadAttention`` fed by column ranges of one Gemm becomes
  ``com.microsoft.Attention`` with the query, key and value weights inside it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx
from onnx import helper

from na_training.onnx_graph import MS_DOMAIN, Graph, PassReport, attribute, gemm_bias, plain_gemm_weight, prune, rebuild


def _heads(g: Graph, name: str) -> tuple[str, int] | None:
    """``name`` = Transpose(0, 2, 1, 3)(Reshape(x, [-1, L, H, d])): (x, H)."""
    transpose = g.source(name, "Transpose")
    if transpose is None or list(attribute(transpose, "perm", [])) != [0, 2, 1, 3]:
        return None
    reshape = g.source(transpose.input[0], "Reshape")
    shape = g.constant(reshape.input[1]) if reshape is not None else None
    if shape is None or len(shape) != 4 or shape[0] != -1:
        return None
    return reshape.input[0], int(shape[2])


def fuse_attention(model: onnx.ModelProto, report: PassReport) -> None:
    count = 0
    while True:
        g = Graph(model.graph)
        match = None
        for softmax in model.graph.node:
            if softmax.op_type != "Softmax" or attribute(softmax, "axis", -1) not in (-1, 3):
                continue
            scale_node = g.producer.get(softmax.input[0])
            if scale_node is None or scale_node.op_type not in ("Div", "Mul"):
                continue
            factor = g.constant(scale_node.input[1])
            scores = g.source(scale_node.input[0], "MatMul")
            if factor is None or factor.size != 1 or scores is None:
                continue
            scale = float(1.0 / factor.reshape(-1)[0]) if scale_node.op_type == "Div" else float(factor.reshape(-1)[0])
            query = _heads(g, scores.input[0])
            key_t = g.source(scores.input[1], "Transpose")
            if query is None or key_t is None or list(attribute(key_t, "perm", [])) != [0, 1, 3, 2]:
                continue
            key = _heads(g, key_t.input[0])
            weighted = g.only_consumer(softmax.output[0], "MatMul")
            if key is None or weighted is None or weighted.input[0] != softmax.output[0]:
                continue
            value = _heads(g, weighted.input[1])
            merge_t = g.only_consumer(weighted.output[0], "Transpose")
            if value is None or merge_t is None or list(attribute(merge_t, "perm", [])) != [0, 2, 1, 3]:
                continue
            merge = g.only_consumer(merge_t.output[0], "Reshape")
            merged_shape = g.constant(merge.input[1]) if merge is not None else None
            if merged_shape is None or len(merged_shape) != 3 or query[1] != key[1] or key[1] != value[1]:
                continue
            match = (scores, softmax, merge, query, key, value, scale)
            break
        if match is None:
            break
        scores, softmax, merge, query, key, value, scale = match
        node = helper.make_node("MultiHeadAttention", [query[0], key[0], value[0]], [merge.output[0]],
                                domain=MS_DOMAIN, num_heads=query[1], scale=scale, name=g.fresh("attention"))
        rebuild(model.graph, [merge], {id(merge): [node]})      # the chain before it is left to prune
        count += 1
        prune(model, PassReport())
    if count and not any(o.domain == MS_DOMAIN for o in model.opset_import):
        model.opset_import.append(helper.make_opsetid(MS_DOMAIN, 1))
    report.add("MultiHeadAttention", count)


def _column_slices(g: Graph, gemm: onnx.NodeProto, width: int
                   ) -> tuple[dict[str, tuple[int, int]], list[onnx.NodeProto]] | None:
    """Every value that is a range of a 2-D Gemm output's columns through Splits along its last axis
    (name -> (start, stop)), and those Splits. None where such a Split's sizes are not constant."""
    slices = {gemm.output[0]: (0, width)}
    splits: list[onnx.NodeProto] = []
    pending = [gemm.output[0]]
    while pending:
        name = pending.pop()
        for node in g.consumers[name]:
            if node.op_type != "Split" or attribute(node, "axis", 0) not in (1, -1):
                continue
            sizes = g.constant(node.input[1]) if len(node.input) > 1 and node.input[1] else attribute(node, "split")
            if sizes is None or len(sizes) != len(node.output):
                return None
            splits.append(node)
            start = slices[name][0]
            for out, size in zip(node.output, (int(s) for s in sizes), strict=True):
                slices[out] = (start, start + size)
                start += size
                pending.append(out)
    return slices, splits


def _gemm_root(g: Graph, name: str) -> onnx.NodeProto | None:
    """The Gemm (constant weights, plain ``x @ W + b``) whose output ``name`` is, or is a Split part of."""
    node = g.producer.get(name)
    while node is not None and node.op_type == "Split":
        node = g.producer.get(node.input[0])
    return node if node is not None and plain_gemm_weight(g, node) is not None else None


@dataclass
class _ProjectedAttention:
    """A MultiHeadAttention whose query, key and value are column ranges of one Gemm (see below)."""
    attention: onnx.NodeProto
    reshapes: list[onnx.NodeProto]           # query, key, value made 3-D
    splits: list[onnx.NodeProto]             # the Gemm output's Splits
    gemm: onnx.NodeProto
    weight: np.ndarray                       # [K, N], x @ weight + bias
    bias: np.ndarray                         # [N]
    columns: list[tuple[int, int]]           # query, key, value
    others: dict[str, tuple[int, int]]       # other column ranges something reads: value name -> range
    length: int                              # tokens per sample


def _projected_attention(g: Graph, mha: onnx.NodeProto) -> _ProjectedAttention | None:
    if mha.domain != MS_DOMAIN or len(mha.input) != 3 or not all(mha.input) \
            or {a.name for a in mha.attribute} - {"num_heads", "scale"}:
        return None
    reshapes = [g.source(name, "Reshape") for name in mha.input]
    targets = [g.constant(r.input[1]) if r is not None else None for r in reshapes]
    if any(t is None or len(t) != 3 or t[0] != -1 for t in targets) or len({int(t[1]) for t in targets}) != 1 \
            or any(g.consumers[r.output[0]] != [mha] for r in reshapes):
        return None
    gemm = _gemm_root(g, reshapes[0].input[0])
    if gemm is None or any(_gemm_root(g, r.input[0]) is not gemm for r in reshapes[1:]):
        return None
    weight = plain_gemm_weight(g, gemm)
    bias = gemm_bias(g, gemm, weight.shape[1])
    found = _column_slices(g, gemm, weight.shape[1])
    if bias is None or found is None:
        return None
    slices, splits = found
    columns = [slices.get(r.input[0]) for r in reshapes]
    if None in columns or len({stop - start for start, stop in columns}) != 1 \
            or (columns[0][1] - columns[0][0]) % int(attribute(mha, "num_heads")):
        return None
    others = {name: span for name, span in slices.items() if name in g.outputs
              or any(n not in splits and n not in reshapes for n in g.consumers[name])}
    if gemm.output[0] in others:
        return None
    return _ProjectedAttention(mha, reshapes, splits, gemm, weight, bias, columns, others, int(targets[0][1]))


def attention_with_projection(model: onnx.ModelProto, report: PassReport) -> None:
    """``MultiHeadAttention`` whose query, key and value are column ranges of one Gemm's output (through Splits),
    each made 3-D by a Reshape, becomes ``com.microsoft.Attention``, which does the projection itself: one kernel
    instead of the Gemm, its Splits, three Reshapes and the attention. Other column ranges of that Gemm that
    something reads (a gate beside the query) get a Gemm of their own."""
    count = 0
    while True:
        g = Graph(model.graph)
        candidates = (_projected_attention(g, n) for n in model.graph.node if n.op_type == "MultiHeadAttention")
        found = next((c for c in candidates if c is not None), None)
        if found is None:
            break
        x, (rows, _) = found.gemm.input[0], found.weight.shape
        qkv = np.concatenate([np.arange(start, stop) for start, stop in found.columns])
        tokens = g.fresh("tokens")
        nodes = [
            helper.make_node("Reshape", [x, g.add_initializer("shape", np.array([-1, found.length, rows], np.int64))],
                             [tokens], name=g.fresh("tokens")),
            helper.make_node("Attention", [tokens, g.add_initializer("weight", found.weight[:, qkv].astype(np.float32)),
                                           g.add_initializer("bias", found.bias[qkv].astype(np.float32))],
                             list(found.attention.output), domain=MS_DOMAIN, name=g.fresh("attention"),
                             **{a.name: helper.get_attribute_value(a) for a in found.attention.attribute})]
        for name, (start, stop) in found.others.items():
            nodes.append(helper.make_node(
                "Gemm", [x, g.add_initializer("weight", found.weight[:, start:stop].astype(np.float32)),
                         g.add_initializer("bias", found.bias[start:stop].astype(np.float32))], [name],
                name=g.fresh("gemm")))
        # Everything goes where the Gemm was: its input is produced before it, and what it fed comes after.
        rebuild(model.graph, [found.gemm, found.attention, *found.reshapes, *found.splits], {id(found.gemm): nodes})
        count += 1
    report.add("Attention with projection", count)
