"""Int8 variants whose accuracy check does not hold on this CPU: 8-bit weights on an x86 CPU without VNNI.

Without the VNNI instructions ONNX Runtime's x86 int8 kernels multiply uint8 activations by int8 weights and add
each pair of products into a 16-bit integer with saturation; 2 x 255 x 127 does not fit, 2 x 255 x 64 does. A
variant exported with 8-bit weights on a VNNI workstation passed its check there and can miss it by far on such a
CPU (0.35 N against 0.027 N measured: src/na_estimator/benchmarks/README.md), so ``auto`` does not choose it.
The exporter writes 7-bit weights since (na_training.export), which saturate nowhere.
"""

from __future__ import annotations

from collections.abc import Mapping

from na_common.machine import CpuInfo
from na_description.model_package import int8_weight_bits

SATURATION_FREE_BITS = 7
VNNI_FLAGS = ("avx512_vnni", "avx_vnni")


def sums_int8_pairs_in_16_bits(cpu: CpuInfo) -> bool:
    """True on an x86 CPU without VNNI (AVX2, or AVX-512 without its VNNI extension)."""
    return cpu.x86 and not any(flag in cpu.isa for flag in VNNI_FLAGS)


def saturating_variants(metadata: Mapping[str, str], cpu: CpuInfo) -> dict[str, str]:
    """Variant name -> one-line reason, for each int8 variant of the package whose weights can saturate on ``cpu``."""
    if not sums_int8_pairs_in_16_bits(cpu):
        return {}
    return {name: (f"inference variant '{name}' has {bits}-bit int8 weights, whose products saturate on this CPU "
                   f"without VNNI ({cpu.model}), so its accuracy check does not hold here; export the model again "
                   "for 7-bit weights")
            for name, bits in int8_weight_bits(metadata).items() if bits > SATURATION_FREE_BITS}
