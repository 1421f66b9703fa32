"""The training runtime shared by all tasks: strategies, optimisers, the loop."""

from bert.training.distribute import get_strategy, set_precision
from bert.optimization import OptimizerConfig, build_optimizer
from bert.training.run import run_experiment
from bert.training.runtime import RuntimeConfig, setup
from bert.training.trainer import LossScaleCollapseError, NonFiniteLossError, Trainer

__all__ = ["LossScaleCollapseError", "NonFiniteLossError", "OptimizerConfig", "RuntimeConfig", "Trainer",
           "build_optimizer", "get_strategy", "run_experiment", "set_precision", "setup"]
