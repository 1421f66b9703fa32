"""Damaged copies of real files, and the rule every reader must keep.

The fuzz tests of issue 42 feed each reader of the library (checkpoints,
records, manifests, text data, serving exports) seeded truncations and byte
flips of a real, valid file. Every outcome must be a correct load or one of
the library's user errors (`bert.errors.UserError`, or an OSError subclass
such as FileNotFoundError) whose message names the file; any other exception
type is a bug, and so is a hang.

Typical use, one test per format, default tier and slow tier:

    CASES = corruption.corrupt_cases(data, corruption.FUZZ_CASES[1], seed=0)

    @pytest.mark.parametrize("label,blob", CASES[:corruption.FUZZ_CASES[0]])
    def test_fuzz(tmp_path, label, blob): ...

    @pytest.mark.slow
    @pytest.mark.parametrize("label,blob", CASES[corruption.FUZZ_CASES[0]:])
    def test_fuzz_slow(tmp_path, label, blob): ...

(or a loop over the cases inside one test, which is cheaper to collect).
"""

import contextlib
import os
import random
import signal
from typing import Callable, List, Optional, Sequence, Tuple, Type

from bert.errors import UserError

# (default tier, slow tier) cases per format.
FUZZ_CASES = (50, 500)

# What a reader may raise for a damaged file: the library's user errors and
# the OS's own file errors (each with a message naming the path).
READER_ERRORS: Tuple[Type[BaseException], ...] = (UserError, OSError)

TIMEOUT_SECONDS = 60


def corrupt_cases(data: bytes, count: int, seed: int = 0
                  ) -> List[Tuple[str, bytes]]:
  """`count` damaged copies of `data`, each with a label saying what was done
  (the label is the test id, so a failure can be reproduced by hand).

  The first cases are the edge cuts (empty, one byte, one byte short, half);
  the rest mix random truncations, single-bit flips, random-byte runs and
  zeroed runs at random offsets. Deterministic for a given seed.
  """
  n = len(data)
  if n == 0:
    raise ValueError("corrupt_cases needs a non-empty file")
  rng = random.Random(seed)
  cases = [("truncate@0", b""), ("truncate@1", data[:1]),
           (f"truncate@{n - 1}", data[:n - 1]), (f"truncate@{n // 2}",
                                                  data[:n // 2])]
  seen = {blob for _, blob in cases}
  attempts = 0
  while len(cases) < count and attempts < count * 20:
    attempts += 1
    kind = rng.choice(("truncate", "bitflip", "bitflip", "random", "zero"))
    at = rng.randrange(n)
    if kind == "truncate":
      label, blob = f"truncate@{at}", data[:at]
    elif kind == "bitflip":
      bit = rng.randrange(8)
      blob = data[:at] + bytes([data[at] ^ (1 << bit)]) + data[at + 1:]
      label = f"bitflip@{at}.{bit}"
    else:
      length = min(rng.choice((1, 2, 4, 16, 64)), n - at)
      fill = (bytes(rng.randrange(256) for _ in range(length))
              if kind == "random" else bytes(length))
      blob = data[:at] + fill + data[at + length:]
      label = f"{kind}{length}@{at}"
    if blob == data or blob in seen:
      continue
    seen.add(blob)
    cases.append((label, blob))
  return cases[:count]


class ReaderHung(Exception):
  pass


@contextlib.contextmanager
def _alarm(seconds: int):
  def ring(signum, frame):
    raise ReaderHung(f"no outcome after {seconds} s")
  previous = signal.signal(signal.SIGALRM, ring)
  signal.alarm(seconds)
  try:
    yield
  finally:
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


def names_path(message: str, path: str) -> bool:
  """Whether `message` names `path`: the path itself, its real path, or its
  basename (a file inside a named folder counts for the folder too)."""
  path = os.fspath(path)
  candidates = {path, os.path.abspath(path), os.path.realpath(path),
                os.path.basename(path.rstrip(os.sep))}
  return any(c and c in message for c in candidates)


def check_reader(load: Callable[[str], object], path: str, label: str,
                 errors: Sequence[Type[BaseException]] = READER_ERRORS,
                 names: Optional[Sequence[str]] = None):
  """Runs `load(path)` under a timeout. Returns "ok" if it returned, or the
  error if it raised one of `errors` naming `path` (or one of `names`, the
  damaged file inside a folder, say); anything else fails the test with
  `label` and the exception."""
  try:
    with _alarm(TIMEOUT_SECONDS):
      load(path)
    return "ok"
  except tuple(errors) as e:
    message = str(e)
    if "\n" in message.strip():
      raise AssertionError(f"{label}: {type(e).__name__} is not one line: "
                           f"{message!r}") from e
    if not any(names_path(message, p) for p in [path, *(names or ())]):
      raise AssertionError(f"{label}: {type(e).__name__} does not name "
                           f"{path}: {message!r}") from e
    return e
  except ReaderHung as e:
    raise AssertionError(f"{label}: {e}") from None
  except BaseException as e:  # pylint: disable=broad-except
    raise AssertionError(f"{label}: {type(e).__name__} is not a library "
                         f"error: {str(e)[:500]!r}") from e
