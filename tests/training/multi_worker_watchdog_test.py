"""The watchdog of multi-worker runs ends a worker that is stuck while the
coordination service reports a peer failed, and leaves a healthy one alone
(in process, with the service's answers stubbed; the real service is
exercised by tests/training/multi_worker_faults_test.py)."""

import json
import time

import tensorflow as tf

from bert.training import multi_worker


class FakeContext:

  def __init__(self, states):
    self.states = states
    self.polls = 0

  def get_task_states(self, jobs):
    assert jobs == [("worker", 2)]
    self.polls += 1
    return self.states


def watch(monkeypatch, states, seconds):
  monkeypatch.setenv("TF_CONFIG", json.dumps({
      "cluster": {"worker": ["127.0.0.1:1", "127.0.0.1:2"]},
      "task": {"type": "worker", "index": 0}}))
  exits = []
  monkeypatch.setattr(multi_worker.os, "_exit", exits.append)
  watchdog = multi_worker.Watchdog(interval_seconds=0.01, grace_seconds=0.05)
  watchdog._context = FakeContext(states)   # pylint: disable=protected-access
  with watchdog:
    deadline = time.time() + seconds
    while not exits and time.time() < deadline:
      time.sleep(0.01)
  return exits, watchdog._context.polls     # pylint: disable=protected-access


def test_a_failed_peer_ends_a_stuck_worker_naming_it(monkeypatch, capsys):
  lost = tf.errors.UnavailableError(None, None, "heartbeat timeout")
  exits, _ = watch(monkeypatch, [None, lost], seconds=5)
  assert exits == [1]
  err = capsys.readouterr().err.strip().splitlines()
  assert len(err) == 1 and err[0].startswith("error: lost /job:worker/replica:0/"
                                             "task:1 (heartbeat timeout)")


def test_healthy_peers_are_left_alone(monkeypatch, capsys):
  exits, polls = watch(monkeypatch, [None, None], seconds=0.5)
  assert exits == [] and polls >= 5          # it did poll, and found nothing
  assert capsys.readouterr().err == ""
