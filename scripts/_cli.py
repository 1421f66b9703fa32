"""Shared start-up and error reporting of the `bert-*` console scripts.

A user error (a bad flag, file, config field, gin binding or checkpoint)
ends a command with one line on stderr, `error: <what, where>`, and exit
status 2; `--verbose` (or the environment variable BERT_VERBOSE=1) prints the
traceback above it. A training run that fails (a non-finite loss) prints its
one line and exits 1. Anything else is a bug: it keeps its traceback.
Library logs below WARNING are off unless --verbose (or --verbosity) is
given; the commands' own progress goes to stdout.
"""

import logging as pylogging
import os
import sys
import traceback

from absl import app
from absl import flags
from absl import logging

flags.DEFINE_bool("verbose", False, "On an error, print the Python traceback "
                  "as well as the one-line message (also: BERT_VERBOSE=1).")

USAGE_EXIT = 2
FAILURE_EXIT = 1


def _user_errors():
  """Exception types that mean the input is wrong, not the library: the
  library's `UserError`s, and the OS's errors about a path (a missing,
  existing, read-only or wrong-kind file or folder; the library's own
  messages name the path, and `one_line` adds it to the OS's)."""
  # Imported here: loading bert imports TensorFlow, which --help and flag
  # errors do without.
  from bert.errors import UserError  # pylint: disable=g-import-not-at-top
  return (app.UsageError, UserError, OSError)


def _run_failures():
  from bert.training.multi_worker import WorkerLostError  # pylint: disable=g-import-not-at-top
  from bert.training.trainer import NonFiniteLossError  # pylint: disable=g-import-not-at-top
  from bert.serving.gate import AccuracyGateError  # pylint: disable=g-import-not-at-top
  return (NonFiniteLossError, WorkerLostError, AccuracyGateError)


def one_line(error: BaseException) -> str:
  """The message of `error` on one line (gin's source echo dropped)."""
  from bert.validation import gin_error_line  # pylint: disable=g-import-not-at-top
  if (isinstance(error, OSError) and error.filename is not None
      and error.strerror):
    # The OS's own `[Errno 13] Permission denied: 'x'`, as the library's
    # errors read: the path first, then what is wrong with it.
    text = f"{error.filename}: {error.strerror}"
    if error.filename2 is not None:
      text += f" (-> {error.filename2})"
    return text
  text = gin_error_line(error)
  return " ".join(text.split()) or type(error).__name__


def config_of_flags(cls, **flag_of):
  """`cls(field=FLAGS.<flag>, ...)` for `flag_of` {field: flag name}; an
  error in a field names the flag the user typed (`--max_seq_length must be
  an integer >= 5, got 3`), not the config's field it fills."""
  from bert.validation import ConfigError  # pylint: disable=g-import-not-at-top
  try:
    return cls(**{field: flags.FLAGS[flag].value
                  for field, flag in flag_of.items()})
  except ConfigError as e:
    message = str(e)
    for field, flag in flag_of.items():
      message = message.replace(f"{cls.__name__}.{field} ", f"--{flag} ")
    raise ConfigError(message) from e


def _verbose() -> bool:
  if os.environ.get("BERT_VERBOSE", "") not in ("", "0"):
    return True
  return flags.FLAGS.is_parsed() and flags.FLAGS.verbose


def fail(message: str, code: int = USAGE_EXIT):
  """Ends the command with `error: message` on stderr."""
  sys.stdout.flush()
  sys.stderr.write(f"error: {message}\n")
  sys.stderr.flush()
  sys.exit(code)


def _parse_flags(argv):
  """absl's parsing, with its errors (unknown flag, bad value, missing
  required flag) and stray positional arguments as one-line errors."""
  try:
    rest = flags.FLAGS(argv)
  except flags.Error as e:
    fail(" ".join(str(e).split()))
  if len(rest) > 1:
    fail(f"unexpected argument {rest[1]!r} (flags are written --name=value)")
  if not _verbose() and not flags.FLAGS["verbosity"].present:
    # The commands print their progress on stdout; library INFO logs (gin
    # includes, checkpoint notices) would bury a one-line error on stderr.
    logging.set_verbosity(logging.WARNING)
    pylogging.getLogger("tensorflow").setLevel(pylogging.WARNING)
  return rest


def _guarded(main):
  def guarded_main(argv):
    try:
      return main(argv)
    except KeyboardInterrupt:
      fail("interrupted", 130)
    except Exception as e:  # pylint: disable=broad-except
      if isinstance(e, _user_errors()):
        code = USAGE_EXIT
      elif isinstance(e, _run_failures()):
        code = FAILURE_EXIT
      else:
        raise   # a bug: the traceback is the report
      if _verbose():
        traceback.print_exc()
      fail(one_line(e), code)
  return guarded_main


def run(main, module_name: str):
  """`app.run(main)`, with `--help` listing the flags of `module_name` and
  user errors reported in one line."""
  # absl's --help lists the flags defined in the main module, which for a
  # console script is the wrapper file, not the module that defines them.
  for flag in flags.FLAGS.get_flags_for_module(module_name):
    flags.FLAGS.register_key_flag_for_module(sys.argv[0], flag)
  flags.FLAGS.register_key_flag_for_module(sys.argv[0], flags.FLAGS["verbose"])
  # --help starts with the main module's docstring: make it the script's.
  main_module = sys.modules["__main__"]
  if not getattr(main_module, "__doc__", None):
    main_module.__doc__ = sys.modules[module_name].__doc__
  app.run(_guarded(main), flags_parser=_parse_flags)
