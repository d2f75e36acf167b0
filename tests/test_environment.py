"""The machine record beside every number: the CPU signature tells apart CPUs that share a model name."""

from __future__ import annotations

from factorbench.benchmark.environment import SPEED_FLAGS, cpu_signature, environment_record

ZEN4 = """processor\t: 0
vendor_id\t: AuthenticAMD
cpu family\t: 25
model\t\t: 17
model name\t: AMD EPYC
stepping\t: 1
flags\t\t: fpu sse2 avx avx2 avx512f avx512dq avx512_bf16 avx512_vnni

processor\t: 1
vendor_id\t: AuthenticAMD
cpu family\t: 26
model\t\t: 99
model name\t: AMD EPYC
stepping\t: 7
flags\t\t: fpu avx2 amx_bf16
"""

ZEN3 = ZEN4.split("\n\n")[0].replace("model\t\t: 17", "model\t\t: 1").replace(
    "avx512f avx512dq avx512_bf16 avx512_vnni", "")


def test_two_cpus_of_one_model_name_get_different_signatures():
    assert cpu_signature(ZEN4) == "AuthenticAMD family 25 model 17 stepping 1; avx2 avx512f avx512_bf16"
    assert cpu_signature(ZEN3) == "AuthenticAMD family 25 model 1 stepping 1; avx2"


def test_the_signature_reads_the_first_processor_only_and_names_missing_units():
    # the second block's family and AMX flag are not mixed into the first's
    assert "amx_bf16" not in cpu_signature(ZEN4) and "family 26" not in cpu_signature(ZEN4)
    bare = "vendor_id\t: GenuineIntel\nflags\t\t: fpu sse2\n"
    assert cpu_signature(bare) == "GenuineIntel; none of " + " ".join(SPEED_FLAGS)
    assert cpu_signature("") == "" and cpu_signature("\n\n") == ""


def test_a_result_environment_carries_the_signature_where_there_is_a_cpuinfo():
    assert environment_record().get("cpu_signature") == (cpu_signature() or None)
