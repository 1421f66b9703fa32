"""Optimisers and learning-rate schedules, built with Model Garden's factory.

BERT's recipe: AdamW (weight decay 0.01, not on LayerNorm weights or biases),
or LAMB for large batches; polynomial (power 1 = linear) decay from step 0 to
`end_learning_rate` at `num_train_steps`, with a linear warmup over the first
`warmup_steps` up to the decayed value there (Model Garden's LinearWarmup;
google-research ramps to the undecayed rate, a difference of
warmup_steps/num_train_steps at the peak); global-norm clipping to 1.0.

Clipping is done by the training loop on the *aggregated* gradient (after the
sum over replicas and micro-batches), so the optimiser itself is built with
clipping off: Model Garden's AdamWeightDecay would otherwise clip each
replica's partial gradient, which changes the update with the replica count.
"""

import dataclasses
from typing import Optional, Tuple

import gin
from official.modeling.optimization import optimizer_factory
from official.modeling.optimization.configs import optimization_config

OPTIMIZERS = ("adamw", "lamb")
# Substrings of variable names exempt from weight decay: every LayerNorm
# weight and every bias (our layers name LayerNorm weights "layer_norm/...").
NO_DECAY = ("layer_norm", "LayerNorm", "bias")


@gin.configurable
@dataclasses.dataclass
class OptimizerConfig:
  """Optimiser, schedule and clipping of a training run."""
  optimizer: str = "adamw"
  learning_rate: float = 1e-4
  num_train_steps: Optional[int] = None   # decay end; None = the run's steps
  warmup_steps: int = 0
  warmup_fraction: Optional[float] = None   # overrides warmup_steps
  end_learning_rate: float = 0.0
  power: float = 1.0                  # polynomial decay power; 1 = linear
  weight_decay: float = 0.01
  no_decay: Tuple[str, ...] = NO_DECAY
  beta_1: float = 0.9
  beta_2: float = 0.999
  epsilon: float = 1e-6
  clip_norm: float = 1.0              # global norm; 0 disables

  def __post_init__(self):
    if self.optimizer not in OPTIMIZERS:
      raise ValueError(f"OptimizerConfig.optimizer must be one of {OPTIMIZERS}, "
                       f"got {self.optimizer!r}")
    if self.learning_rate <= 0:
      raise ValueError("OptimizerConfig.learning_rate must be positive, got "
                       f"{self.learning_rate}")
    if self.num_train_steps is not None and self.num_train_steps < 1:
      raise ValueError("OptimizerConfig.num_train_steps must be >= 1, got "
                       f"{self.num_train_steps}")
    if self.warmup_steps < 0 or (self.num_train_steps is not None and
                                 self.warmup_steps > self.num_train_steps):
      raise ValueError(f"OptimizerConfig.warmup_steps={self.warmup_steps} must "
                       f"be in [0, num_train_steps={self.num_train_steps}]")
    if self.warmup_fraction is not None and not 0 <= self.warmup_fraction <= 1:
      raise ValueError("OptimizerConfig.warmup_fraction must be in [0, 1], got "
                       f"{self.warmup_fraction}")
    self.no_decay = tuple(self.no_decay)


def build_optimizer(config: OptimizerConfig):
  """A tf_keras (legacy) optimiser with the schedule of `config`."""
  if config.num_train_steps is None:
    raise ValueError("OptimizerConfig.num_train_steps is not set")
  if config.warmup_fraction is not None:
    config = dataclasses.replace(config, warmup_steps=int(
        config.warmup_fraction * config.num_train_steps))
  params = dict(
      learning_rate=dict(type="polynomial", polynomial=dict(
          initial_learning_rate=config.learning_rate,
          decay_steps=config.num_train_steps,
          end_learning_rate=config.end_learning_rate,
          power=config.power)))
  if config.warmup_steps:
    params["warmup"] = dict(type="linear", linear=dict(
        warmup_steps=config.warmup_steps, warmup_learning_rate=0.0))
  common = dict(beta_1=config.beta_1, beta_2=config.beta_2,
                epsilon=config.epsilon, weight_decay_rate=config.weight_decay,
                exclude_from_weight_decay=list(config.no_decay))
  if config.optimizer == "adamw":
    params["optimizer"] = dict(type="adamw", adamw=dict(
        gradient_clip_norm=0.0, **common))
  else:
    params["optimizer"] = dict(type="lamb", lamb=dict(
        exclude_from_layer_adaptation=list(config.no_decay), **common))
  factory = optimizer_factory.OptimizerFactory(
      optimization_config.OptimizationConfig(params))
  return factory.build_optimizer(factory.build_learning_rate())
