"""Checks of config fields, and the error they raise.

Every config of the library (dataclasses, task constructors, gin bindings,
command-line flags) checks its fields where it is defined, with these
helpers, so a wrong value stops at once with a message that names the class
and field (`RuntimeConfig.train_steps must be an integer >= 1, got 0`),
never later as a ZeroDivisionError or a tf.data trace. This module imports
nothing heavy: the command-line tools use it before TensorFlow is loaded.
"""

import functools
import numbers
import re
from typing import Any, Iterable, Optional
from bert.errors import UserError


class ConfigError(UserError, ValueError):
  """A config field has a wrong type or value; the message names it."""


def _is_int(value) -> bool:
  # bool is an int subclass, but True is never meant as a count.
  return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _is_real(value) -> bool:
  return isinstance(value, numbers.Real) and not isinstance(value, bool)


def check_int(owner: str, name: str, value: Any, minimum: Optional[int] = None,
              maximum: Optional[int] = None, optional: bool = False):
  """`value` as an int in [minimum, maximum]; `optional` also allows None."""
  if value is None and optional:
    return None
  bounds = _bounds(minimum, maximum, False, False)
  if not _is_int(value) or (minimum is not None and value < minimum) or (
      maximum is not None and value > maximum):
    kind = "an integer" + bounds + (" or None" if optional else "")
    raise ConfigError(f"{owner}.{name} must be {kind}, got {value!r}")
  return int(value)


def check_float(owner: str, name: str, value: Any,
                minimum: Optional[float] = None, maximum: Optional[float] = None,
                min_open: bool = False, max_open: bool = False,
                optional: bool = False):
  """`value` as a float in the range (open ends excluded; NaN never passes)."""
  if value is None and optional:
    return None
  ok = _is_real(value) and value == value   # NaN != NaN
  if ok and minimum is not None:
    ok = value > minimum if min_open else value >= minimum
  if ok and maximum is not None:
    ok = value < maximum if max_open else value <= maximum
  if not ok:
    kind = ("a number" + _bounds(minimum, maximum, min_open, max_open)
            + (" or None" if optional else ""))
    raise ConfigError(f"{owner}.{name} must be {kind}, got {value!r}")
  return float(value)


def _check_type(owner, name, value, kind, what, optional):
  if value is None and optional:
    return None
  if not isinstance(value, kind):
    raise ConfigError(f"{owner}.{name} must be {what}"
                      f"{' or None' if optional else ''}, got {value!r}")
  return value


def check_bool(owner: str, name: str, value: Any, optional: bool = False):
  return _check_type(owner, name, value, bool, "True or False", optional)


def check_choice(owner: str, name: str, value: Any, choices: Iterable[Any]):
  choices = tuple(choices)
  if value not in choices:
    raise ConfigError(f"{owner}.{name} must be one of "
                      f"{', '.join(map(repr, choices))}; got {value!r}")
  return value


def check_str(owner: str, name: str, value: Any, optional: bool = False):
  return _check_type(owner, name, value, str, "a string", optional)


def _bounds(minimum, maximum, min_open, max_open) -> str:
  if minimum is not None and maximum is not None:
    return (f" in {'(' if min_open else '['}{minimum}, {maximum}"
            f"{')' if max_open else ']'}")
  if minimum is not None:
    return f" {'>' if min_open else '>='} {minimum}"
  if maximum is not None:
    return f" {'<' if max_open else '<='} {maximum}"
  return ""


def check_labels(owner: str, labels: Any, name: str = "labels"):
  """A list of distinct, non-empty label names, or None."""
  if labels is None:
    return None
  if (isinstance(labels, (str, bytes)) or not hasattr(labels, "__iter__")
      or not all(isinstance(x, str) and x for x in labels)):
    raise ConfigError(f"{owner}.{name} must be a list of non-empty strings, "
                      f"got {labels!r}")
  labels = list(labels)
  repeated = sorted({x for x in labels if labels.count(x) > 1})
  if repeated:
    raise ConfigError(f"{owner}.{name} repeats {', '.join(repeated)}: "
                      f"{labels!r}")
  return labels


def gin_error_line(error: BaseException) -> str:
  """A gin error as one line: gin appends where the binding is ("In file
  "f.gin", line 3" or "In bindings string line 2", then the line itself)
  or "In call to configurable ..."; the place is kept as `(f.gin:3)` or
  `(binding 'X.y = 1')`, the rest dropped."""
  lines = [line.strip() for line in str(error).splitlines() if line.strip()]
  if not lines:
    return type(error).__name__
  text, places = lines[0], []
  for i, line in enumerate(lines[1:], 1):
    match = re.match(r'In file "(.*)", line (\d+)', line)
    if match:
      places.append(f"{match.group(1)}:{match.group(2)}")
    if re.match(r"In bindings string line \d+", line) and i + 1 < len(lines):
      places.append(f"binding {lines[i + 1]!r}")
  filename = getattr(error, "filename", None)
  if isinstance(error, SyntaxError) and filename and not places:
    places.append(f"{filename}:{error.lineno}")
  return text + (f" ({', '.join(places)})" if places else "")


def error_type(error: BaseException) -> type:
  """The class of `error` as raised: gin re-raises an error from inside a
  configurable as a proxy subclass that appends where the call was."""
  kind = type(error)
  while kind.__init__.__qualname__.startswith(
      "augment_exception_message_and_reraise"):
    kind = kind.__mro__[1]
  return kind


class _NotGiven:
  """The default of a config's former field name: not a literal, so gin
  leaves it out of operative configs, and never a value a user gives."""

  def __repr__(self):
    return "<not given>"


NOT_GIVEN = _NotGiven()


def former_field(owner: str, new: str, value: Any, old: str, former: Any,
                 default: Any = None):
  """The value of field `new` of a config that also takes its former name
  `old` (a `dataclasses.InitVar` defaulting to NOT_GIVEN, so that saved gin
  configs binding the old name still read); a ConfigError if both are given
  and differ."""
  if former is NOT_GIVEN:
    return value
  if value != default and value != former:
    raise ConfigError(f"{owner}.{old} is the former name of {owner}.{new}; "
                      f"given both ({former!r} and {value!r}): give {new} "
                      "only")
  return former


def renamed_keywords(still_read: bool = False, **renames):
  """Decorates a function whose keyword arguments `old=new` were renamed: a
  call with an old name is a TypeError naming the new one, or with
  `still_read` (an argument users' code and docs pass) is passed on as the
  new one (a TypeError when both are given)."""

  def decorate(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
      for old, new in renames.items():
        if old not in kwargs:
          continue
        if not still_read or new in kwargs:
          raise TypeError(f"{fn.__name__}({old}=...): the argument is now "
                          f"named {new}" + (f"; give {new} only"
                                            if still_read else ""))
        kwargs[new] = kwargs.pop(old)
      return fn(*args, **kwargs)
    return wrapper
  return decorate
