"""`runtime="auto"`: the fastest way to serve that passes the accuracy gate,
measured on the machine that exports.

Every candidate (a runtime at a precision, `bert.serving.writer`) is
checked by the gate against the fp32 SavedModel; the ones that pass serve
the gate's first `ROWS` rows in batches of `BATCH`, in `ROUNDS` interleaved
rounds (the order rotating each round, so a slower stretch of the machine
falls on all alike), and the highest median throughput wins. The manifest
keeps the figures, the refusals and the CPU they were measured on.
"""

import statistics
import time
from typing import Callable, Dict, List, Mapping, Sequence, Tuple

from bert import hardware
from bert.serving.gate import AccuracyGate, AccuracyGateError

ROWS = 256
BATCH = 32
ROUNDS = 3


def throughput_pass(serve: Callable, inputs: Mapping[str, Sequence[str]]
                    ) -> float:
  """Seconds for `serve` to answer every row of `inputs` in batches of
  BATCH."""
  n = len(next(iter(inputs.values())))
  start = time.perf_counter()
  for i in range(0, n, BATCH):
    serve(**{k: list(v[i:i + BATCH]) for k, v in inputs.items()})
  return time.perf_counter() - start


def measure(serves: Mapping[str, Callable], inputs: Mapping[str, Sequence[str]],
            rounds: int = ROUNDS) -> Dict[str, List[float]]:
  """Rows per second of each serving callable, one figure per round."""
  n = len(next(iter(inputs.values())))
  names = list(serves)
  rates: Dict[str, List[float]] = {name: [] for name in names}
  for r in range(rounds):
    k = r % len(names)
    for name in names[k:] + names[:k]:
      rates[name].append(n / throughput_pass(serves[name], inputs))
  return rates


def choose(candidates: Sequence, gate: AccuracyGate,
           serve_of: Callable, reference: Callable) -> Tuple[object, Dict, Dict]:
  """(the fastest candidate that passes `gate`, its gate figures, the
  manifest's `auto` record). `serve_of(candidate)` builds its serving
  callable; `reference` is the fp32 SavedModel's. A candidate the gate
  refuses is recorded with the reason; fp32 on TensorFlow always passes."""
  score = gate.evaluate(reference)
  passing: Dict[str, Tuple[object, Callable, Dict]] = {}
  refused: Dict[str, str] = {}
  for candidate in candidates:
    label = candidate.label
    if (candidate.runtime, candidate.precision) == ("saved_model", "fp32"):
      figures = dict(metric=gate.metric, source=gate.source,
                     fp32=round(score, 4), max_drop=gate.max_drop)
      passing[label] = (candidate, reference, figures)
      continue
    serve = serve_of(candidate)
    try:
      figures = gate.check(reference, serve, label, reference_score=score)
    except AccuracyGateError as e:
      refused[label] = str(e)
      continue
    passing[label] = (candidate, serve, figures)
  if not passing:
    raise AccuracyGateError("runtime=auto: the accuracy gate refused every "
                            "export: " + "; ".join(refused.values()))
  rows = {k: list(v[:ROWS]) for k, v in gate.inputs.items()}
  rates = measure({label: serve for label, (_, serve, _) in passing.items()},
                  rows)
  medians = {label: statistics.median(r) for label, r in rates.items()}
  best = max(medians, key=medians.get)
  candidate, _, figures = passing[best]
  record = dict(
      cpu=hardware.describe(), rows=len(next(iter(rows.values()))),
      batch_size=BATCH, rounds=ROUNDS,
      rows_per_second={k: round(v, 2) for k, v in medians.items()},
      spread={k: [round(min(r), 2), round(max(r), 2)] for k, r in rates.items()},
      refused=refused, chosen=best,
      why=(f"the highest median throughput of the {len(passing)} exports "
           f"that pass the gate, measured on this CPU"))
  return candidate, dict(figures, candidate=best), record
