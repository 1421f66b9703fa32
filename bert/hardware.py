"""What the CPU can do, for choosing a precision and for benchmark records."""

import os
import platform
import re
from typing import FrozenSet

# Flags that decide which kernels run: AVX2/FMA (fp32), AVX-512, VNNI (int8
# dot products), AVX512_BF16 / AMX (bf16 dot products).
REPORTED_FLAGS = ("avx2", "fma", "avx512f", "avx512_vnni", "avx_vnni",
                  "avx512_bf16", "amx_bf16", "amx_int8")


def _cpuinfo() -> str:
  try:
    with open("/proc/cpuinfo", encoding="utf-8") as f:
      return f.read()
  except OSError:
    return ""


def flags(cpuinfo: str = None) -> FrozenSet[str]:
  """The CPU's feature flags (empty where /proc/cpuinfo is missing)."""
  match = re.search(r"^flags\s*:\s*(.*)$", _cpuinfo() if cpuinfo is None
                    else cpuinfo, re.M)
  return frozenset(match.group(1).split()) if match else frozenset()


def has_bf16(cpu_flags: FrozenSet[str] = None) -> bool:
  """Whether the CPU has bf16 dot products (AVX512_BF16 or AMX)."""
  present = flags() if cpu_flags is None else cpu_flags
  return bool({"avx512_bf16", "amx_bf16"} & set(present))


def describe(cpuinfo: str = None) -> str:
  """e.g. "AMD EPYC [avx2 fma avx512f avx512_vnni avx512_bf16] x2"."""
  info = _cpuinfo() if cpuinfo is None else cpuinfo
  match = re.search(r"^model name\s*:\s*(.*)$", info, re.M)
  model = match.group(1).strip() if match else (platform.processor() or "CPU")
  present = flags(info)
  shown = " ".join(f for f in REPORTED_FLAGS if f in present)
  return f"{model} [{shown}] x{os.cpu_count()}"
