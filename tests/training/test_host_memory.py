"""The fixed glibc mmap threshold really gives freed blocks back (and without it they stay resident)."""

from __future__ import annotations

import subprocess
import sys

import pytest

# Allocates 7 freed 20 MiB blocks below a live one (so heap trimming cannot return them) after one 30 MiB
# free has raised glibc's dynamic threshold; prints how much of the freed memory is still resident.
SCRIPT = r"""
import ctypes, sys
from embodied_r.training.host_memory import fix_mmap_threshold
libc = ctypes.CDLL(None)
libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
if sys.argv[1] == "fixed":
    assert fix_mmap_threshold()
def rss():
    return int(open("/proc/self/statm").read().split()[1]) * 4096
first = libc.malloc(30 << 20); ctypes.memset(first, 1, 30 << 20); libc.free(first)
before = rss()
blocks = []
for _ in range(8):
    block = libc.malloc(20 << 20); ctypes.memset(block, 1, 20 << 20); blocks.append(block)
for block in blocks[:-1]:
    libc.free(block)
print((rss() - before) >> 20)
"""


def resident_after_free(mode: str) -> int:
    done = subprocess.run([sys.executable, "-c", SCRIPT, mode], capture_output=True, text=True, check=True)
    return int(done.stdout.strip())


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc only")
def test_fixed_threshold_returns_freed_blocks() -> None:
    if not subprocess.run([sys.executable, "-c", "import ctypes; ctypes.CDLL(None).mallopt"],
                          capture_output=True).returncode == 0:
        pytest.skip("not glibc")
    assert resident_after_free("dynamic") >= 100  # glibc's default keeps the freed 140 MiB resident
    assert resident_after_free("fixed") <= 30     # only the live 20 MiB block remains
