"""The wrapper's markers that ``diff`` compares: calls of generated kernels counted by name."""

from __future__ import annotations

from tuidebug.trace.diff.kernels import _markers

WRAPPER = """\
def call(args):
    buf0 = empty_strided_cpu((4, ), (1, ), torch.float32)
    cpp_fused_add_1(buf0, arg0_1)
    cpp_fused_add_10(buf0)
        cpp_fused_add_1(buf0)

cpp_fused_add_1(buf1)
    x = cpp_fused_add_1(buf0)   # not at the start of its line
    cpp_fused_add_1 (buf0)      # a space before the parenthesis: not a call as written
    ns.kernel_2(buf0)
    ns.kernel_2(buf1)
    extern_kernels.addmm(a, b, c, out=buf2)
"""


def test_each_kernels_calls_at_the_start_of_a_line() -> None:
    # cpp_fused_add_1: three lines that start with its call (any indent); cpp_fused_add_10 is
    # another kernel; a name that is not a word (ns.kernel_2) is counted as well
    assert _markers(WRAPPER, ["cpp_fused_add_1"])["cpp_kernel_calls"] == 3
    assert _markers(WRAPPER, ["cpp_fused_add_10"])["cpp_kernel_calls"] == 1
    assert _markers(WRAPPER, ["ns.kernel_2"])["cpp_kernel_calls"] == 2
    assert _markers(WRAPPER, ["cpp_fused_add_1", "cpp_fused_add_10", "ns.kernel_2",
                              "cpp_fused_mul_0"])["cpp_kernel_calls"] == 6
    assert _markers(WRAPPER, [])["cpp_kernel_calls"] == 0
    assert _markers(WRAPPER, [])["extern_kernels"] == 1
