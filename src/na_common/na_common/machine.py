"""The CPU a figure was measured on: model name and the instruction sets that decide inference and simulation
speed (AVX2, AVX-512, VNNI, BF16, AMX; on ARM the dot-product and matrix extensions).

One implementation for every benchmark's "machine" line and for the estimator's variant cache key: a speed
figure without the CPU it was measured on cannot be compared with another machine's.
"""

from __future__ import annotations

import functools
import os
import platform
from dataclasses import dataclass
from pathlib import Path

CPUINFO = Path("/proc/cpuinfo")
# Instruction-set flags (as /proc/cpuinfo spells them) that change which kernels ONNX Runtime, XLA and
# MuJoCo run. Absent ones are not listed; an x86 CPU without AVX-512 says so explicitly.
RELEVANT_ISA = ("avx2", "fma", "avx512f", "avx512bw", "avx512_vnni", "avx_vnni", "avx512_bf16", "amx_bf16",
                "amx_int8", "asimd", "asimddp", "i8mm", "bf16", "sve")


@dataclass(frozen=True)
class CpuInfo:
    model: str
    isa: tuple[str, ...]          # the RELEVANT_ISA flags this CPU has, in that order
    logical_cpus: int
    x86: bool

    def isa_text(self) -> str:
        """``avx2 fma avx512f ...``; on x86 without AVX-512 ending in ``, no AVX-512``."""
        text = " ".join(self.isa) or "no SIMD extension listed"
        return text + (", no AVX-512" if self.x86 and "avx512f" not in self.isa else "")

    def describe(self) -> str:
        return f"{self.model} with {self.isa_text()}, {self.logical_cpus} logical CPUs"


def parse_cpuinfo(text: str) -> CpuInfo:
    """The first processor's model name and flags from ``/proc/cpuinfo`` text (x86 ``flags``, ARM ``Features``).
    On x86 the model name gets the family and model numbers: a virtual machine often reports only "AMD EPYC",
    which names neither the generation nor its vector units."""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    flags = set((fields.get("flags") or fields.get("Features") or "").split())
    model = fields.get("model name") or fields.get("Hardware") or fields.get("cpu model") or ""
    if model and "cpu family" in fields and "model" in fields:
        model += f" (family {fields['cpu family']}, model {fields['model']})"
    x86 = platform.machine().lower() in ("x86_64", "amd64", "i686") or "sse2" in flags
    return CpuInfo(model or platform.processor() or platform.machine() or "unknown CPU",
                   tuple(f for f in RELEVANT_ISA if f in flags), os.cpu_count() or 1, x86)


@functools.cache
def cpu_info() -> CpuInfo:
    """This machine's CPU (read once)."""
    try:
        text = CPUINFO.read_text()
    except OSError:
        text = ""
    return parse_cpuinfo(text)


def machine_line() -> str:
    """CPU model, ISA flags, logical CPUs and the load average now: what every benchmark prints as its machine."""
    load = ", ".join(f"{v:.2f}" for v in os.getloadavg())
    return f"{cpu_info().describe()}, load average {load} (1/5/15 min)"
