"""tf.distribute strategies by name, and the mixed-precision policy."""

import json
import os
from typing import Optional

import tensorflow as tf
import tf_keras

from bert import precision

STRATEGIES = ("auto", "one_device", "mirrored", "multi_worker_mirrored", "tpu")


def get_strategy(name: str = "auto", tpu: Optional[str] = None,
                 peer_timeout_seconds: int = 60) -> tf.distribute.Strategy:
  """The strategy called `name` (one of STRATEGIES).

  `auto`: `mirrored` when more than one GPU is visible, else `one_device`.
  `one_device`: the first GPU, else the CPU. `mirrored`: all local GPUs (or
  the CPU). `multi_worker_mirrored`: the workers of the TF_CONFIG environment
  variable (each process runs the same command with its own task index).
  `tpu`: the TPU at `tpu` ("" or "local" for a TPU VM's own chips).
  `peer_timeout_seconds`: multi-worker only; a worker silent that long is
  declared lost and the others stop with an error naming it.
  """
  if name not in STRATEGIES:
    raise ValueError(f"strategy must be one of {STRATEGIES}, got {name!r}")
  if name == "auto":
    name = ("mirrored" if len(tf.config.list_logical_devices("GPU")) > 1
            else "one_device")
  if name == "one_device":
    gpus = tf.config.list_logical_devices("GPU")
    return tf.distribute.OneDeviceStrategy(gpus[0].name if gpus else "/cpu:0")
  if name == "mirrored":
    return tf.distribute.MirroredStrategy()
  if name == "multi_worker_mirrored":
    if "TF_CONFIG" not in os.environ:
      raise ValueError("strategy multi_worker_mirrored needs the TF_CONFIG "
                       "environment variable (cluster and this task's index)")
    try:
      json.loads(os.environ["TF_CONFIG"])
    except json.JSONDecodeError as e:
      raise ValueError(f"TF_CONFIG is not valid JSON: {e}") from None
    from bert.training import multi_worker  # pylint: disable=g-import-not-at-top
    multi_worker.configure_peer_timeout(peer_timeout_seconds)
    return tf.distribute.MultiWorkerMirroredStrategy()
  # TPU: cannot run on this machine; the standard resolver/initialise path.
  resolver = tf.distribute.cluster_resolver.TPUClusterResolver(
      tpu="" if tpu in (None, "local") else tpu)
  if tpu not in (None, "", "local"):
    tf.config.experimental_connect_to_cluster(resolver)
  tf.tpu.experimental.initialize_tpu_system(resolver)
  return tf.distribute.TPUStrategy(resolver)


def set_precision(policy: str) -> None:
  """Sets the global tf_keras mixed-precision policy (a training precision,
  fp32/bf16/fp16, or its tf_keras policy name)."""
  policy = precision.POLICY.get(policy, policy)
  if policy not in precision.POLICIES:
    raise ValueError(f"mixed_precision must be one of "
                     f"{', '.join(precision.TRAINING)}, got {policy!r}")
  tf_keras.mixed_precision.set_global_policy(policy)


def is_chief(strategy: tf.distribute.Strategy) -> bool:
  """Whether this process writes checkpoints and summaries."""
  resolver = getattr(strategy, "cluster_resolver", None)
  if resolver is None or not getattr(resolver, "task_type", None):
    return True
  return (resolver.task_type == "chief"
          or (resolver.task_type == "worker" and resolver.task_id == 0))
