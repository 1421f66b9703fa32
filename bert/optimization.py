"""Optimisers and learning-rate schedules, built on Model Garden's.

BERT's recipe: AdamW (weight decay 0.01, not on LayerNorm weights or biases),
or LAMB for large batches; a linear warmup from 0 to `learning_rate` over the
first `warmup_steps`, then polynomial (power 1 = linear) decay to
`end_learning_rate` at `num_train_steps` (the schedule of Hugging Face's
`get_linear_schedule_with_warmup`: the peak is the configured rate);
global-norm clipping to 1.0.

Adam's epsilon is the epsilon of Algorithm 1 of Kingma & Ba, added to the
bias-corrected sqrt(v_hat), as in PyTorch's AdamW, optax and Hugging Face.
Keras' Adam adds it to the uncorrected sqrt(v) instead ("epsilon hat"),
which is the same as an epsilon 1/sqrt(1 - beta_2^t) times larger: 32x at
step 1, still 2x after 300 steps. With clipped gradients most parameters
have |g| of 1e-6..1e-4, so that larger epsilon damps their updates through a
whole fine-tuning run (measured with `bench/step_parity.py`: a WNUT-17 run's
loss lagged the PyTorch recipe's from the second step on).

Clipping is done by the training loop on the *aggregated* gradient (after the
sum over replicas and micro-batches), so the optimiser itself is built with
clipping off: Model Garden's AdamWeightDecay would otherwise clip each
replica's partial gradient, which changes the update with the replica count.
"""

import dataclasses
from typing import Optional, Tuple

import gin
import tensorflow as tf
import tf_keras
from official.modeling.optimization import legacy_adamw
from official.modeling.optimization import optimizer_factory
from official.modeling.optimization.configs import optimization_config

from official.modeling.optimization import lr_schedule

from bert.validation import ConfigError, check_choice, check_float, check_int

# Model Garden's schedules are plain Keras schedules without a registered
# name; registered here, a saved model's optimizer loads back
# (`tf_keras.models.load_model`) without custom_objects.
for _schedule in (lr_schedule.PolynomialDecayWithOffset, lr_schedule.LinearWarmup):
  tf_keras.utils.get_custom_objects().setdefault(_schedule.__name__, _schedule)

OPTIMIZERS = ("adamw", "lamb")
# Substrings of variable names exempt from weight decay: every LayerNorm
# weight and every bias (our layers name LayerNorm weights "layer_norm/...").
NO_DECAY = ("layer_norm", "LayerNorm", "bias")


@tf_keras.utils.register_keras_serializable(package="bert")
class AdamWeightDecay(legacy_adamw.AdamWeightDecay):
  """Model Garden's AdamWeightDecay with epsilon added to sqrt(v_hat).

  The fused Adam kernel computes var -= lr_t * m / (sqrt(v) + eps') with
  lr_t = lr * sqrt(1 - beta_2^t) / (1 - beta_1^t); passing
  eps' = epsilon * sqrt(1 - beta_2^t) makes that exactly
  lr * m_hat / (sqrt(v_hat) + epsilon). Same slots and checkpoints.
  """

  def _prepare_local(self, var_device, var_dtype, apply_state):
    super()._prepare_local(var_device, var_dtype, apply_state)
    coefficients = apply_state[(var_device, var_dtype)]
    coefficients["epsilon"] = coefficients["epsilon"] * tf.sqrt(
        1 - coefficients["beta_2_power"])


@gin.configurable
@dataclasses.dataclass
class OptimizerConfig:
  """Optimiser, schedule and clipping of a training run.

  The defaults are BERT's fine-tuning recipe, the one recipe of this
  library: AdamW (epsilon on the bias-corrected second moment, see
  `AdamWeightDecay`), lr 5e-5, weight decay 0.01 except LayerNorm weights
  and biases, linear warmup over the first 10% of the steps, then linear
  decay to 0 at `num_train_steps`, global-norm clipping to 1.0.
  `Model.compile()` of the task models, `run_experiment` and `bert-train`
  all start from these defaults; the gin configs state only what differs
  (pre-training's rates and warmup, SWAG's 2e-5).
  """
  optimizer: str = "adamw"
  learning_rate: float = 5e-5
  num_train_steps: Optional[int] = None   # decay end; None = the run's steps
  warmup_steps: Optional[int] = None      # None: warmup_fraction of the steps
  warmup_fraction: float = 0.1
  end_learning_rate: float = 0.0
  power: float = 1.0                  # polynomial decay power; 1 = linear
  weight_decay: float = 0.01
  no_decay: Tuple[str, ...] = NO_DECAY
  beta_1: float = 0.9
  beta_2: float = 0.999
  epsilon: float = 1e-6
  clip_norm: float = 1.0              # global norm; 0 disables

  def __post_init__(self):
    owner = "OptimizerConfig"
    check_choice(owner, "optimizer", self.optimizer, OPTIMIZERS)
    check_float(owner, "learning_rate", self.learning_rate, 0, min_open=True)
    check_int(owner, "num_train_steps", self.num_train_steps, minimum=1,
              optional=True)
    check_int(owner, "warmup_steps", self.warmup_steps, minimum=0,
              maximum=self.num_train_steps, optional=True)
    check_float(owner, "warmup_fraction", self.warmup_fraction, 0, 1)
    check_float(owner, "end_learning_rate", self.end_learning_rate, 0)
    check_float(owner, "power", self.power, 0, min_open=True)
    check_float(owner, "weight_decay", self.weight_decay, 0)
    if isinstance(self.no_decay, str) or not all(
        isinstance(x, str) for x in self.no_decay):
      raise ConfigError("OptimizerConfig.no_decay must be a list of variable "
                        f"name fragments, got {self.no_decay!r}")
    for name in ("beta_1", "beta_2"):
      check_float(owner, name, getattr(self, name), 0, 1, max_open=True)
    check_float(owner, "epsilon", self.epsilon, 0, min_open=True)
    check_float(owner, "clip_norm", self.clip_norm, 0)
    self.no_decay = tuple(self.no_decay)

  def with_steps(self, num_train_steps: int) -> "OptimizerConfig":
    """This config for a run of `num_train_steps` (unless already set), with
    the warmup in steps."""
    steps = self.num_train_steps or num_train_steps
    warmup = (self.warmup_steps if self.warmup_steps is not None
              else int(self.warmup_fraction * steps))
    return dataclasses.replace(self, num_train_steps=steps, warmup_steps=warmup)


def build_optimizer(config: OptimizerConfig):
  """A tf_keras (legacy) optimiser with the schedule of `config`."""
  if config.num_train_steps is None:
    raise ValueError("OptimizerConfig.num_train_steps is not set")
  config = config.with_steps(config.num_train_steps)
  # The decay starts where the warmup ends (offset), from the full rate.
  params = dict(
      learning_rate=dict(type="polynomial", polynomial=dict(
          initial_learning_rate=config.learning_rate,
          decay_steps=max(1, config.num_train_steps - config.warmup_steps),
          offset=config.warmup_steps,
          end_learning_rate=config.end_learning_rate,
          power=config.power)))
  if config.warmup_steps:
    params["warmup"] = dict(type="linear", linear=dict(
        warmup_steps=config.warmup_steps, warmup_learning_rate=0.0))
  common = dict(beta_1=config.beta_1, beta_2=config.beta_2,
                epsilon=config.epsilon, weight_decay_rate=config.weight_decay,
                exclude_from_weight_decay=list(config.no_decay))
  if config.optimizer == "lamb":   # LAMB already adds epsilon to sqrt(v_hat)
    params["optimizer"] = dict(type="lamb", lamb=dict(
        exclude_from_layer_adaptation=list(config.no_decay), **common))
  else:   # the factory builds the schedule; the optimiser is ours (below)
    params["optimizer"] = dict(type="adamw", adamw=dict(
        gradient_clip_norm=0.0, **common))
  factory = optimizer_factory.OptimizerFactory(
      optimization_config.OptimizationConfig(params))
  learning_rate = factory.build_learning_rate()
  if config.optimizer == "lamb":
    return factory.build_optimizer(learning_rate)
  return AdamWeightDecay(learning_rate=learning_rate, gradient_clip_norm=0.0,
                         **common)
