"""The compute precision (and whether to XLA-compile) for the machine in use.

`choose("auto")` picks bf16 compute (`mixed_bfloat16`: bf16 matmuls, fp32
variables; our layers keep LayerNorm, softmax and the losses in fp32) where
it is fast, and fp32 elsewhere:

- a GPU: `mixed_bfloat16` from compute capability 8.0 (Ampere), else
  `mixed_float16` from 7.0, else `float32`;
- a CPU with bf16 dot products (AVX512_BF16 or AMX) and TensorFlow's oneDNN
  kernels on: `mixed_bfloat16` (oneDNN runs its matmuls on those
  instructions; without oneDNN, TensorFlow's bf16 matmul is slower than
  fp32);
- any other CPU: `float32`.

XLA follows the precision: XLA's CPU backend has no fast bf16 matmul while
oneDNN has, and fp32 is as fast or faster with XLA (the measurements are in
bench/RESULTS_BF16.md). Explicit
settings always win: a named policy is used as given, and
`jit_compile=True/False` overrides.

"auto" is the default wherever a precision can be named and is not
(`precision=None`, `RuntimeConfig.mixed_precision=None`, the CLIs' flags
left out): fine-tuning in bf16 scores as fp32 does (bench/FINETUNING.md),
and a reduced serving precision passes an accuracy gate first. The
environment variable BERT_PRECISION (auto, fp32 or bf16) replaces that
default for a whole program, a CI job or a test suite; a precision named in
the call, a gin file or a flag always wins. Pre-training's bundled configs
name fp32 (bf16 cost masked-LM accuracy there: bench/PRETRAINING.md).

What is detected is injectable (`cpu_flags`, `onednn`, `gpu`), so every
branch runs on any machine.
"""

import dataclasses
import os
from typing import FrozenSet, Optional, Tuple

from bert import hardware
from bert.validation import ConfigError

# The one vocabulary of precisions: training (`RuntimeConfig.mixed_precision`,
# `--mixed_precision`), `from_pretrained(precision=)` and export
# (`--precision`) all take these names, mapped here once.
NAMES = ("fp32", "bf16", "fp16", "int8")
CHOICES = ("auto",) + NAMES
TRAINING = ("fp32", "bf16", "fp16")   # what a model computes in
SERVING = ("fp32", "bf16", "int8")    # what an export runs in
# The environment variable that replaces the default precision ("auto").
DEFAULT_ENV = "BERT_PRECISION"
DEFAULTS = ("auto", "fp32", "bf16")   # what it may say
# The tf_keras policy each training precision computes in.
POLICY = {"fp32": "float32", "bf16": "mixed_bfloat16", "fp16": "mixed_float16"}
POLICIES = tuple(POLICY.values())
# The names of earlier releases (tf_keras policy names) still read, so that
# saved operative_config.gin files and scripts keep working.
_FORMER = {policy: name for name, policy in POLICY.items()}
# bf16 weights as well as bf16 compute: for inference copies only (a frozen
# bf16 serving network, `bert.serving.frozen`), never for training.
INFERENCE_BF16 = "bfloat16"


def canonical(value, owner: str = "precision", allowed=CHOICES) -> str:
  """`value` as one of `allowed` (a name of this vocabulary, or an earlier
  name of one); a ConfigError naming `owner` and the choices otherwise."""
  name = _FORMER.get(value, value) if isinstance(value, str) else value
  if name in allowed:
    return name
  why = ""
  if name in NAMES:
    why = (" (int8 is a serving precision: train in fp32 or bf16, export with "
           "--precision=int8)" if name == "int8" else
           f" ({name} is not an export precision)")
  raise ConfigError(f"{owner} must be one of {', '.join(allowed)}{why}; got "
                    f"{value!r}")


def default(requested: Optional[str] = None) -> str:
  """`requested`, or where it is None the default precision: "auto", or the
  value of BERT_PRECISION (a ConfigError naming it if it is not one of
  auto, fp32, bf16)."""
  if requested is not None:
    return requested
  return canonical(os.environ.get(DEFAULT_ENV, "auto"),
                   f"the environment variable {DEFAULT_ENV}", DEFAULTS)


def _default_reason(requested: Optional[str]) -> str:
  """How a resolved precision was asked for, for `describe`."""
  if requested is not None:
    return "as configured"
  if DEFAULT_ENV in os.environ:
    return f"the default, from {DEFAULT_ENV}"
  return "the default"


# Whether XLA makes a policy's train step faster on a CPU (bench/run.py;
# bench/RESULTS.md: fp32 XLA >= fp32; RESULTS_BF16.md: bf16 XLA < fp32 XLA
# < bf16 through oneDNN).
_CPU_XLA_FASTER = {"float32": True, "mixed_bfloat16": False,
                   "mixed_float16": False}


@dataclasses.dataclass(frozen=True)
class PrecisionChoice:
  """A resolved precision: the tf_keras policy, XLA or not, and why."""
  policy: str
  jit_compile: bool
  reason: str

  @property
  def bf16(self) -> bool:
    return self.policy == "mixed_bfloat16"

  @property
  def name(self) -> str:
    """The precision's name (fp32, bf16, fp16)."""
    return _FORMER[self.policy]

  def describe(self) -> str:
    """The log line: e.g. "precision: mixed_bfloat16, XLA off (auto (the
    default): the CPU has avx512_bf16 and oneDNN is on; ...)"."""
    return (f"precision: {self.policy}, XLA {'on' if self.jit_compile else 'off'}"
            f" ({self.reason})")


def onednn_enabled() -> bool:
  """Whether TensorFlow runs its oneDNN CPU kernels (TF_ENABLE_ONEDNN_OPTS,
  whose default depends on the CPU)."""
  try:
    from tensorflow.python.util import _pywrap_util_port  # pylint: disable=g-import-not-at-top
    return bool(_pywrap_util_port.IsMklEnabled())
  except (ImportError, AttributeError):
    return os.environ.get("TF_ENABLE_ONEDNN_OPTS", "0") == "1"


def gpu_capability() -> Optional[Tuple[int, int]]:
  """The first visible GPU's compute capability, or None without a GPU."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  gpus = tf.config.list_physical_devices("GPU")
  if not gpus:
    return None
  details = tf.config.experimental.get_device_details(gpus[0])
  return tuple(details.get("compute_capability") or (0, 0))


def _auto_policy(cpu_flags, onednn, capability) -> Tuple[str, str]:
  """(policy, reason) that "auto" resolves to."""
  if capability is not None:
    name = f"GPU of compute capability {capability[0]}.{capability[1]}"
    if tuple(capability) >= (8, 0):
      return "mixed_bfloat16", f"{name} has bf16 tensor cores"
    if tuple(capability) >= (7, 0):
      return "mixed_float16", f"{name} has fp16 tensor cores, no bf16"
    return "float32", f"{name} has no fp16/bf16 tensor cores"
  present = hardware.flags() if cpu_flags is None else frozenset(cpu_flags)
  found = [f for f in ("amx_bf16", "avx512_bf16") if f in present]
  if not found:
    return "float32", "the CPU has neither AVX512_BF16 nor AMX"
  if not onednn:
    return "float32", (f"the CPU has {found[0]} but TensorFlow's oneDNN kernels "
                       "are off (TF_ENABLE_ONEDNN_OPTS=0), and bf16 is slower "
                       "than fp32 without them")
  return "mixed_bfloat16", f"the CPU has {found[0]} and oneDNN is on"


def choose(requested: Optional[str] = None, jit_compile: Optional[bool] = None, *,
           cpu_flags: Optional[FrozenSet[str]] = None,
           onednn: Optional[bool] = None,
           gpu: Optional[Tuple[int, int]] = "detect") -> PrecisionChoice:
  """The precision and XLA setting for `requested` (one of CHOICES; None:
  the default, `default()`).

  `jit_compile` None: XLA where the resolved policy is faster with it (on a
  CPU; GPUs: off, as before) when `requested` is "auto", off otherwise;
  True/False: as given. `cpu_flags`, `onednn`, `gpu` (a compute
  capability, or None for no GPU) replace what is detected.
  """
  asked = _default_reason(requested)
  requested = canonical(default(requested), "mixed_precision",
                        ("auto",) + TRAINING)
  if jit_compile is not None and not isinstance(jit_compile, bool):
    raise ValueError(f"jit_compile must be True, False or None; got "
                     f"{jit_compile!r}")
  if requested != "auto":
    return PrecisionChoice(POLICY[requested], bool(jit_compile), asked)
  capability = gpu_capability() if gpu == "detect" else gpu
  policy, reason = _auto_policy(cpu_flags,
                                onednn_enabled() if onednn is None else onednn,
                                capability)
  if jit_compile is None:
    xla = capability is None and _CPU_XLA_FASTER[policy]
    why = ("faster for fp32 on a CPU" if xla else
           "bf16 runs slower under XLA's CPU backend than through oneDNN"
           if capability is None and policy == "mixed_bfloat16" else "the default")
    reason += f"; XLA {'on' if xla else 'off'}: {why}"
  else:
    xla = jit_compile
    reason += f"; XLA {'on' if xla else 'off'} as configured"
  label = "auto" if asked == "as configured" else f"auto ({asked})"
  return PrecisionChoice(policy, xla, f"{label}: " + reason)


class policy_scope:  # pylint: disable=invalid-name
  """Keras layers built inside take `policy` (restored on exit): a layer's
  compute dtype is fixed when it is built."""

  def __init__(self, precision: str):
    # A training precision, or the tf_keras policy it maps to.
    self.policy = POLICY.get(precision, precision)
    if self.policy not in POLICIES + (INFERENCE_BF16,):
      raise ValueError(f"policy must be one of {', '.join(TRAINING)}; got "
                       f"{precision!r}")
    self._previous = None

  def __enter__(self):
    import tf_keras  # pylint: disable=g-import-not-at-top
    self._previous = tf_keras.mixed_precision.global_policy()
    tf_keras.mixed_precision.set_global_policy(self.policy)
    return self

  def __exit__(self, *exc):
    import tf_keras  # pylint: disable=g-import-not-at-top
    tf_keras.mixed_precision.set_global_policy(self._previous)
