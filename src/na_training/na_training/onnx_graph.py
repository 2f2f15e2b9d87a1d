"""What the export's graph passes work with (``export_graph``, ``export_attention``): producer/consumer maps and
initialiser access over an ONNX graph, node attributes, rebuilding the node list, evaluating intermediate tensors
with ONNX Runtime, pruning what nothing reads, and the report of what a pass applied."""

from __future__ import annotations

import copy
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import helper, numpy_helper

MS_DOMAIN = "com.microsoft"


@dataclass
class PassReport:
    applied: dict[str, int] = field(default_factory=dict)

    def add(self, name: str, count: int) -> None:
        self.applied[name] = self.applied.get(name, 0) + count

    def describe(self) -> str:
        return ", ".join(f"{name} x{count}" for name, count in self.applied.items()) or "none applied"


class Graph:
    """Producer/consumer maps and initialiser access over an ``onnx.GraphProto`` (rebuilt on demand)."""

    def __init__(self, graph: onnx.GraphProto) -> None:
        self.graph = graph
        used = [n.name for n in graph.node] + [i.name for i in graph.initializer] + \
            [name for n in graph.node for name in n.output]
        self._counter = max((int(name.rsplit("_", 1)[1]) for name in used
                             if name.startswith("na_opt_") and name.rsplit("_", 1)[1].isdigit()), default=0)
        self.refresh()

    def refresh(self) -> None:
        self.producer: dict[str, onnx.NodeProto] = {}
        self.consumers: dict[str, list[onnx.NodeProto]] = defaultdict(list)
        for node in self.graph.node:
            for name in node.output:
                self.producer[name] = node
            for name in node.input:
                self.consumers[name].append(node)
        self.initializers = {i.name: i for i in self.graph.initializer}
        self.outputs = {o.name for o in self.graph.output}

    def constant(self, name: str) -> np.ndarray | None:
        if name in self.initializers:
            return numpy_helper.to_array(self.initializers[name])
        node = self.producer.get(name)
        if node is not None and node.op_type == "Constant":
            return numpy_helper.to_array(node.attribute[0].t)
        return None

    def fresh(self, stem: str) -> str:
        self._counter += 1
        return f"na_opt_{stem}_{self._counter}"

    def add_initializer(self, stem: str, value: np.ndarray) -> str:
        name = self.fresh(stem)
        self.graph.initializer.append(numpy_helper.from_array(np.ascontiguousarray(value), name))
        self.initializers[name] = self.graph.initializer[-1]
        return name

    def only_consumer(self, name: str, op_type: str) -> onnx.NodeProto | None:
        users = self.consumers.get(name, [])
        if len(users) == 1 and users[0].op_type == op_type and name not in self.outputs:
            return users[0]
        return None

    def source(self, name: str, op_type: str) -> onnx.NodeProto | None:
        node = self.producer.get(name)
        return node if node is not None and node.op_type == op_type else None


def attribute(node: onnx.NodeProto, name: str, default=None):
    for a in node.attribute:
        if a.name == name:
            return helper.get_attribute_value(a)
    return default



def plain_gemm_weight(g: Graph, node: onnx.NodeProto) -> np.ndarray | None:
    """The constant weight of a plain Gemm (``x @ W + b``: A not transposed, alpha and beta 1) as ``[K, N]``
    (a transposed B undone); None for any other node."""
    if node.op_type != "Gemm" or attribute(node, "transA", 0) or attribute(node, "alpha", 1.0) != 1.0 \
            or attribute(node, "beta", 1.0) != 1.0:
        return None
    weight = g.constant(node.input[1])
    if weight is None or weight.ndim != 2:
        return None
    return weight.T if attribute(node, "transB", 0) else weight


def gemm_bias(g: Graph, node: onnx.NodeProto, width: int) -> np.ndarray | None:
    """A Gemm's constant bias as ``[width]`` (zeros without one); None when it is not constant or not a vector
    (or scalar) of that width."""
    bias = g.constant(node.input[2]) if len(node.input) > 2 and node.input[2] else np.zeros(width)
    if bias is None or bias.size not in (1, width) or bias.ndim > 1:
        return None
    return np.broadcast_to(bias.reshape(-1), (width,))

def rebuild(graph: onnx.GraphProto, removed: Iterable[onnx.NodeProto],
            inserted: dict[int, list[onnx.NodeProto]]) -> None:
    """Drop ``removed`` and put ``inserted[id(node)]`` where ``node`` was (in the node order)."""
    gone = {id(n) for n in removed}
    nodes: list[onnx.NodeProto] = []
    for node in graph.node:
        nodes += inserted.get(id(node), [])
        if id(node) not in gone:
            nodes.append(copy.deepcopy(node))
    del graph.node[:]
    graph.node.extend(nodes)


# ---------------------------------------------------------------- evaluation of intermediate tensors
def evaluate(model: onnx.ModelProto, names: list[str], batch: int, input_value: float = 0.0
             ) -> dict[str, np.ndarray]:
    """Values of the tensors ``names`` for an input of ``batch`` samples (ONNX Runtime, no optimisation)."""
    import onnxruntime as ort

    probe = copy.deepcopy(model)
    known = {o.name for o in probe.graph.output}
    for name in names:
        if name not in known:
            probe.graph.output.append(onnx.ValueInfoProto(name=name))
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 3
    session = ort.InferenceSession(probe.SerializeToString(), options, providers=["CPUExecutionProvider"])
    (feed,) = session.get_inputs()
    shape = [batch if not isinstance(d, int) else d for d in feed.shape]
    values = session.run(names, {feed.name: np.full(shape, input_value, np.float32)})
    return dict(zip(names, values, strict=True))


def prune(model: onnx.ModelProto, report: PassReport) -> None:
    graph = model.graph
    needed = {o.name for o in graph.output}
    kept: list[onnx.NodeProto] = []
    for node in reversed(list(graph.node)):
        if any(name in needed for name in node.output):
            kept.append(node)
            needed.update(name for name in node.input if name)
    removed = len(graph.node) - len(kept)
    if removed:
        del graph.node[:]
        graph.node.extend(reversed(kept))
    initializers = [i for i in graph.initializer if i.name in needed]
    if len(initializers) != len(graph.initializer):
        del graph.initializer[:]
        graph.initializer.extend(initializers)
    report.add("pruned node", removed)


Pass = Callable[[onnx.ModelProto, PassReport], None]
