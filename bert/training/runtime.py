"""How a run is executed, apart from its task and optimiser: `RuntimeConfig`
(steps, checkpoints, strategy, precision, seed) and `setup`, which applies
it before anything is built."""

import dataclasses
from typing import Optional

import gin
import tensorflow as tf
import tf_keras

from bert import precision as precision_lib
from bert.training import distribute
from bert.validation import (ConfigError, check_bool, check_choice, check_int,
                             check_str)


@gin.configurable
@dataclasses.dataclass
class RuntimeConfig:
  """How a run is executed (the task and optimiser are configured apart)."""
  train_steps: Optional[int] = None   # None: the task's (e.g. from epochs)
  steps_per_loop: int = 100           # steps per tf.function call / log line
  checkpoint_interval: int = 1000     # steps; 0 = only at the end
  max_checkpoints: int = 5
  summary_interval: Optional[int] = None   # default: every loop
  eval_steps: int = -1                # -1 = the whole eval set
  eval_interval: int = 1000           # steps, for train_and_eval
  grad_accumulation_steps: int = 1
  max_skipped_steps: int = 20         # mixed_float16 overflow steps in a row
  strategy: str = "auto"              # one_device unless >1 GPU is visible
  tpu: Optional[str] = None
  # "auto": bf16 where the hardware runs it fast, else fp32, and XLA by
  # what is faster for that precision (`bert.precision.choose`). None: the
  # default, "auto" unless the environment variable BERT_PRECISION names
  # another (the pre-training configs name fp32).
  mixed_precision: Optional[str] = None   # auto, fp32, bf16, fp16
  jit_compile: Optional[bool] = None  # None: off, or auto's choice
  seed: Optional[int] = 42
  deterministic: bool = False         # tf.config op determinism (slower)
  peer_timeout_seconds: int = 60      # multi-worker: a silent worker is lost

  def __post_init__(self):
    owner = "RuntimeConfig"
    check_int(owner, "train_steps", self.train_steps, minimum=1, optional=True)
    for name in ("steps_per_loop", "max_checkpoints", "eval_interval",
                 "grad_accumulation_steps", "max_skipped_steps"):
      check_int(owner, name, getattr(self, name), minimum=1)
    check_int(owner, "checkpoint_interval", self.checkpoint_interval, minimum=0)
    check_int(owner, "summary_interval", self.summary_interval, minimum=1,
              optional=True)
    if self.eval_steps != -1 and not (
        isinstance(self.eval_steps, int) and not isinstance(self.eval_steps, bool)
        and self.eval_steps >= 1):
      raise ConfigError(f"{owner}.eval_steps must be an integer >= 1, or -1 "
                        f"for the whole eval set; got {self.eval_steps!r}")
    check_choice(owner, "strategy", self.strategy, distribute.STRATEGIES)
    check_str(owner, "tpu", self.tpu, optional=True)
    # Earlier names (mixed_bfloat16, ...) read as their fp32/bf16/fp16 names.
    if self.mixed_precision is not None:
      self.mixed_precision = precision_lib.canonical(
          self.mixed_precision, f"{owner}.mixed_precision",
          ("auto",) + precision_lib.TRAINING)
    if self.jit_compile is not None:
      check_bool(owner, "jit_compile", self.jit_compile)
    check_int(owner, "seed", self.seed, minimum=0, optional=True)
    check_bool(owner, "deterministic", self.deterministic)
    check_int(owner, "peer_timeout_seconds", self.peer_timeout_seconds,
              minimum=1)

  def precision(self) -> precision_lib.PrecisionChoice:
    """The policy and XLA setting this run uses (resolves "auto")."""
    return precision_lib.choose(self.mixed_precision, self.jit_compile)


def setup(runtime: RuntimeConfig, log_fn=print) -> tf.distribute.Strategy:
  """Seeds, determinism and precision of `runtime`, and its strategy.

  `run_experiment` calls it unless given the strategy. A multi-worker
  strategy must be created before TensorFlow's runtime starts (before any
  tensor exists), so a program that builds its task first (tokenizing
  data, loading a checkpoint) calls this first and passes the strategy on,
  as `bert-train` does.
  """
  if runtime.seed is not None:
    tf_keras.utils.set_random_seed(runtime.seed)
  if runtime.deterministic:
    tf.config.experimental.enable_op_determinism()
  choice = runtime.precision()
  distribute.set_precision(choice.policy)
  if log_fn:
    log_fn(choice.describe())
  return distribute.get_strategy(runtime.strategy, runtime.tpu,
                                 runtime.peer_timeout_seconds)
