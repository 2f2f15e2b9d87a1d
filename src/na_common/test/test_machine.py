"""The machine line every benchmark prints: CPU model and the ISA flags that decide inference speed."""

from na_common.machine import cpu_info, machine_line, parse_cpuinfo

ZEN2 = """processor\t: 0
vendor_id\t: AuthenticAMD
cpu family\t: 23
model\t\t: 49
model name\t: AMD EPYC 7B12
flags\t\t: fpu sse2 ssse3 fma sse4_1 sse4_2 avx f16c avx2 bmi2
processor\t: 1
model name\t: AMD EPYC 7B12
flags\t\t: fpu sse2 avx2 avx512f
"""
ZEN4 = "model name\t: AMD EPYC 9R14\nflags\t\t: sse2 avx2 fma avx512f avx512bw avx512_vnni avx512_bf16\n"


def test_a_cpu_without_avx512_says_so() -> None:
    cpu = parse_cpuinfo(ZEN2)
    assert (cpu.model, cpu.isa) == ("AMD EPYC 7B12 (family 23, model 49)", ("avx2", "fma"))   # the first one's
    assert cpu.isa_text() == "avx2 fma, no AVX-512"


def test_a_cpu_with_vnni_lists_it() -> None:
    cpu = parse_cpuinfo(ZEN4)
    assert cpu.isa_text() == "avx2 fma avx512f avx512bw avx512_vnni avx512_bf16"
    assert cpu.describe().startswith("AMD EPYC 9R14 with avx2 fma avx512f")


def test_this_machine_is_described_with_its_load() -> None:
    line = machine_line()
    assert line.startswith(cpu_info().describe()) and "load average" in line
