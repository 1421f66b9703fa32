"""Faults of multi-worker runs: preemption, and workers that are lost.

A run on several workers (MultiWorkerMirroredStrategy) fails as a whole or
stops as a whole, never with one worker gone and the others waiting in a
collective forever:

- SIGTERM to any worker (a preemption notice): TensorFlow's
  `PreemptionCheckpointHandler` has every worker agree, through the
  coordination service, on the end of one loop; all save a checkpoint there
  and the run returns with `stopped_at_step`, so each worker exits 0 and
  the same command resumes.
- A worker that dies (SIGKILL, a crash, a lost machine) stops sending
  heartbeats to the coordination service; after `peer_timeout_seconds` the
  service declares it failed and aborts the collectives of the others, which
  then raise `WorkerLostError` naming it. A watchdog thread covers a worker
  that is blocked outside a collective (e.g. waiting for the lost worker to
  acknowledge a preemption): it ends the process.
"""

import json
import os
import re
import sys
import threading
from typing import Callable, List, Optional

import tensorflow as tf

from bert.training.trainer import TrainingStopped

# Errors a collective raises when a peer is gone or the service aborted it.
CLUSTER_ERRORS = (tf.errors.UnavailableError, tf.errors.DeadlineExceededError,
                  tf.errors.AbortedError, tf.errors.CancelledError)
# Jobs of TF_CONFIG whose tasks take part in the collectives.
_COLLECTIVE_JOBS = ("chief", "worker")
_TASK = re.compile(r"/job:\w+/replica:\d+/task:\d+")


class WorkerLostError(RuntimeError):
  """A worker of a multi-worker run stopped; the message names it."""


def _cluster_jobs() -> List[tuple]:
  """(job name, task count) of the collective jobs in TF_CONFIG."""
  cluster = json.loads(os.environ.get("TF_CONFIG", "{}")).get("cluster", {})
  return [(job, len(cluster[job])) for job in _COLLECTIVE_JOBS
          if cluster.get(job)]


def configure_peer_timeout(seconds: int) -> None:
  """Has the coordination service declare a worker failed after `seconds`
  without a heartbeat. Must run before MultiWorkerMirroredStrategy is
  created (it starts the service with TensorFlow's defaults otherwise)."""
  from tensorflow.compiler.xla.tsl.protobuf import coordination_config_pb2  # pylint: disable=g-import-not-at-top
  from tensorflow.python.eager import context  # pylint: disable=g-import-not-at-top
  ctx = context.context()
  if ctx.coordination_service is not None:   # configured by an earlier run
    return
  jobs = _cluster_jobs()
  if not jobs:
    return
  leader = f"/job:{jobs[0][0]}/replica:0/task:0"
  ms = int(seconds * 1000)
  ctx.configure_coordination_service(
      service_type="standalone", service_leader=leader,
      enable_health_check=True, heartbeat_timeout_in_ms=ms,
      shutdown_barrier_timeout_in_ms=ms,
      coordinated_jobs=[coordination_config_pb2.CoordinatedJob(
          name=job, num_tasks=n) for job, n in jobs])


def is_multi_worker(strategy: tf.distribute.Strategy) -> bool:
  return (getattr(strategy.extended, "_num_workers", 1) or 1) > 1  # pylint: disable=protected-access


def _own_task() -> str:
  task = json.loads(os.environ.get("TF_CONFIG", "{}")).get("task", {})
  return f"/job:{task.get('type')}/replica:0/task:{task.get('index')}"


def describe_lost(error: BaseException, timeout: int) -> str:
  """A cluster error as one line naming the lost task(s)."""
  text = str(error)
  # Tasks the error names, but not this one (it names its own device too).
  tasks = sorted(set(_TASK.findall(text)) - {_own_task()})
  # The reason, without TensorFlow's "{{function_node ...}}" prefix.
  reason = re.sub(r"\{\{[^}]*\}\}\s*", "", text.strip().splitlines()[0]
                  if text.strip() else type(error).__name__)
  first = reason.strip()
  who = ", ".join(tasks) if tasks else "a worker"
  return (f"lost {who}: {type(error).__name__}: {first[:300]} (a worker "
          f"silent for {timeout} s counts as lost: "
          "RuntimeConfig.peer_timeout_seconds); run the same command on every "
          "worker to resume from the newest checkpoint")


class Preemption:
  """`PreemptionCheckpointHandler` on the run's checkpoint manager, polled
  at the end of every loop (an orbit train action): when any worker got
  SIGTERM, every worker saves at the same step and `TrainingStopped(saved=
  True)` ends the loop.

  Create it after the checkpoint is restored on non-chief workers: the
  handler attaches its run counter to the checkpoint, and the workers must
  start with the same count (deferred restoration fills it in)."""

  def __init__(self, strategy, manager: tf.train.CheckpointManager,
               step_counter: tf.Variable):
    self.step_counter = step_counter
    self.handler = tf.distribute.experimental.PreemptionCheckpointHandler(
        strategy.cluster_resolver, manager,
        termination_config=tf.distribute.experimental.TerminationConfig(
            exit_fn=self._stop))

  def _stop(self):
    # Called by the handler once its checkpoint is written (by default it
    # would sys.exit(42)): the run returns normally instead.
    raise TrainingStopped(int(self.step_counter.numpy()), saved=True)

  def __call__(self, unused_train_output=None):
    self.handler.save_checkpoint_if_preempted(
        checkpoint_number=self.step_counter, check_interval=False)


class Watchdog:
  """Polls the coordination service for failed workers from a thread. The
  main thread normally learns of a lost worker from its collectives
  (`WorkerLostError`); if it has not finished `grace_seconds` after the
  service reported one (blocked outside a collective), the process ends
  with the error line and exit status 1."""

  def __init__(self, interval_seconds: float = 2.0, grace_seconds: float = 15.0,
               log_fn: Optional[Callable[[str], None]] = None):
    from tensorflow.python.eager import context  # pylint: disable=g-import-not-at-top
    self._context = context.context()
    self._jobs = _cluster_jobs()
    self._interval, self._grace = interval_seconds, grace_seconds
    self._log_fn = log_fn
    self._stop = threading.Event()
    self._thread = threading.Thread(target=self._run, daemon=True,
                                    name="bert-worker-watchdog")

  def __enter__(self):
    if self._jobs:
      self._thread.start()
    return self

  def __exit__(self, *exc):
    self._stop.set()
    if self._thread.is_alive():
      self._thread.join()   # no status RPC in flight at interpreter exit

  def _failed(self) -> Optional[str]:
    try:
      states = self._context.get_task_states(self._jobs)
    except Exception as e:  # pylint: disable=broad-except
      return (f"the coordination service is unreachable ({type(e).__name__}: "
              f"{str(e).strip().splitlines()[0][:200]})")
    names = [f"/job:{job}/replica:0/task:{i}" for job, n in self._jobs
             for i in range(n)]
    bad = [f"{name} ({str(s).strip().splitlines()[0][:200]})"
           for name, s in zip(names, states) if s is not None]
    return "; ".join(bad) or None

  def _run(self):
    misses = 0
    while not self._stop.wait(self._interval):
      failed = self._failed()
      # The service lives on task 0: one failed poll may be a hiccup.
      misses = misses + 1 if failed else 0
      if misses < 2:
        continue
      if self._log_fn:
        self._log_fn(f"worker failure reported: {failed}")
      if self._stop.wait(self._grace):
        return   # the main thread finished (it reports the error itself)
      sys.stdout.flush()
      sys.stderr.write(f"error: lost {failed}; the run is stuck, so this "
                       "worker stops; run the same command on every worker "
                       "to resume from the newest checkpoint\n")
      sys.stderr.flush()
      os._exit(1)   # pylint: disable=protected-access
      return


def exit_barrier(timeout_seconds: int, log_fn=None) -> None:
  """Waits until every worker is done: the chief hosts the coordination
  service, and a worker still saving would otherwise lose it."""
  from tensorflow.python.eager import context  # pylint: disable=g-import-not-at-top
  try:
    context.context().wait_at_barrier("bert_train_exit",
                                      int(timeout_seconds * 1000))
  except tf.errors.OpError as e:
    if log_fn:
      log_fn(f"exit barrier: {type(e).__name__}: "
             f"{str(e).strip().splitlines()[0][:200]}")
