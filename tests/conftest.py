"""The one home of the helpers the tests share: quiet TF logs, small
configs, random BERT inputs, MiniLM's vocab, numeric and error-message
checks, the bert-* commands, small files and runs; and the tiers' hooks
(tests/_tiers.py). Task data lives in tests/tasks/_tasks.py, run folders in
tests/training/_runs.py, the output tests' tools in tests/output_checks.py."""

import json
import os
import subprocess
import sys
import tarfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# The library's default fast path (set by `import bert`), before TensorFlow.
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")
# The tests compare against fp32 references whatever the CPU, so the
# default precision ("auto": bf16 on a CPU with AVX512_BF16/AMX) is fp32 in
# them and in the commands they start; the tests of the default itself
# remove it (tests/precision_default_test.py).
os.environ["BERT_PRECISION"] = "fp32"
# Each pytest-xdist worker is a process whose TensorFlow (and PyTorch) thread
# pools would be sized to the whole machine; the cores are shared out among
# the workers instead, so their pools do not contend for the same cores.
# Commands the tests start inherit it.
_THREADS = str(max(1, (os.cpu_count() or 1) //
                   int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))))
for _pool in ("TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS", "OMP_NUM_THREADS"):
  os.environ.setdefault(_pool, _THREADS)

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402

from bert import BertConfig  # noqa: E402
import _tiers  # noqa: E402

# Where the real data and weights are: one definition, shared with bench/.
from bert.testing import minilm_dir, shared_data  # noqa: E402,F401

# The repository root (subprocess tests run commands from it).
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Where the bert-* console commands are.
BIN = os.path.dirname(sys.executable)
# Checkpoints of other libraries' formats (tests/fixtures/hub).
FIXTURES = os.path.join(REPO_ROOT, "tests", "fixtures", "hub")


def vocab() -> str:
  """MiniLM's vocab.txt (30,522 word pieces, uncased), from the real
  weights' package."""
  return os.path.join(minilm_dir(), "vocab.txt")


def family_config_vocab(kind: str, folder: str) -> str:
  """The vocabulary a family's WikiText-2 config trains (6,000 pieces on
  wiki.valid; docs/bert-family.md): `kind` of bert-train-vocab."""
  from bert.data.vocab_training import train_vocab  # pylint: disable=g-import-not-at-top
  return train_vocab(kind, [shared_data("corpus", "wikitext-2",
                                        "wiki.valid.sentences.txt")],
                     os.path.join(folder, kind), 6000)


def small_config(**overrides) -> BertConfig:
  """A 2-layer, 64-wide BERT that builds and runs in milliseconds."""
  d = dict(vocab_size=100, hidden_size=64, num_hidden_layers=2,
           num_attention_heads=4, intermediate_size=128,
           max_position_embeddings=32, type_vocab_size=2)
  d.update(overrides)
  return BertConfig(**d)


def random_inputs(batch, seq, vocab_size=100, seed=0, lengths=None):
  """Random BERT inputs with padding and both segment types.

  Each row has a real length (default: seq, seq-1, seq-3, ...) followed by
  padding; the second half of the real tokens is segment B.
  """
  rng = np.random.RandomState(seed)
  if lengths is None:
    lengths = [max(2, seq - 2 * i + (1 if i else 0)) for i in range(batch)]
  ids = rng.randint(1, vocab_size, size=(batch, seq)).astype(np.int32)
  mask = np.zeros((batch, seq), np.int32)
  types = np.zeros((batch, seq), np.int32)
  for i, n in enumerate(lengths):
    mask[i, :n] = 1
    types[i, n // 2:n] = 1
  ids = ids * mask
  return dict(input_word_ids=tf.constant(ids), input_mask=tf.constant(mask),
              input_type_ids=tf.constant(types))


def registered_gradients() -> int:
  """How many gradient functions TensorFlow's global registry holds: each
  `tf.custom_gradient` trace, and each load of a SavedModel recording one,
  adds one, never removed (and it keeps the graph it came from)."""
  from tensorflow.python.framework import ops  # pylint: disable=g-direct-tensorflow-import,g-import-not-at-top
  return len(ops._gradient_registry.list())  # pylint: disable=protected-access


def max_abs_diff(a, b) -> float:
  """max |a - b| in float64 (0 for two empty arrays)."""
  a = np.asarray(a, np.float64)
  b = np.asarray(b, np.float64)
  if a.size == 0 and b.size == 0:
    return 0.0
  return float(np.max(np.abs(a - b)))


def one_line(error, *fragments, os_error_text=False) -> str:
  """The message of `error` (an exception, or pytest's ExceptionInfo) is
  one line, holds each of `fragments` and, unless `os_error_text`, quotes
  no raw OS error ("[Errno 2] ..."); returns it."""
  message = str(getattr(error, "value", error))
  assert message and "\n" not in message, message
  assert os_error_text or "[Errno" not in message, message
  for fragment in fragments:
    assert fragment in message, (fragment, message)
  return message


def write_json(path, value):
  with open(path, "w", encoding="utf-8") as f:
    json.dump(value, f)


def unpack_fixture(name, dest) -> str:
  """Unpacks tests/fixtures/hub/<name>.tar.xz into folder `dest`; the path
  of what it held."""
  with tarfile.open(os.path.join(FIXTURES, name + ".tar.xz")) as tar:
    tar.extractall(str(dest), filter="data")
  return os.path.join(str(dest), name)


def shard_safetensors(folder):
  """The folder's model.safetensors as two shards and an index, as
  `save_pretrained(max_shard_size=...)` writes them; the weight map."""
  from safetensors.numpy import load_file, save_file  # pylint: disable=g-import-not-at-top
  tensors = load_file(os.path.join(folder, "model.safetensors"))
  os.remove(os.path.join(folder, "model.safetensors"))
  keys = sorted(tensors)
  weight_map = {}
  for i, part in enumerate((keys[:len(keys) // 2], keys[len(keys) // 2:])):
    name = f"model-0000{i + 1}-of-00002.safetensors"
    save_file({k: tensors[k] for k in part}, os.path.join(folder, name),
              metadata={"format": "pt"})
    weight_map.update({k: name for k in part})
  write_json(os.path.join(folder, "model.safetensors.index.json"),
             dict(metadata={}, weight_map=weight_map))
  return weight_map


def run_command(argv, cwd, **env):
  """Runs the bert-* command argv[0] (the installed console script) with
  argv[1:] in `cwd`; `env` adds to or (None) removes from os.environ, and
  BERT_VERBOSE is removed. The CompletedProcess, text captured."""
  env = dict(os.environ, BERT_VERBOSE=None, **env)
  env = {k: v for k, v in env.items() if v is not None}
  return subprocess.run([os.path.join(BIN, argv[0])] + argv[1:], cwd=cwd,
                        env=env, capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="session")
def tokenizer():
  """The tokenizer of MiniLM's vocab (uncased)."""
  from bert.data.tokenization import Tokenizer  # pylint: disable=g-import-not-at-top
  return Tokenizer(vocab())


@pytest.fixture
def clean_gin():
  """gin's global config empty before and after the test (bindings must
  not leak into other tests)."""
  import gin  # pylint: disable=g-import-not-at-top
  gin.clear_config()
  yield
  gin.clear_config()


@pytest.hookimpl(tryfirst=True)   # before `-m` selects by the marks
def pytest_collection_modifyitems(items):
  """The `data` and `subprocess` marks of the tiers (tests/_tiers.py)."""
  _tiers.mark_items(items)


@pytest.fixture(autouse=True)
def _tier_guard(request, monkeypatch):
  """A test without the `data` mark sees no shared data, one without
  `subprocess` starts no process (tests/_tiers.py)."""
  with _tiers.guard(request.node, monkeypatch):
    yield


@pytest.fixture(autouse=True)
def _fresh_keras_state():
  """Each test starts with a clean Keras name space and float32 policy."""
  import tf_keras
  tf_keras.backend.clear_session()
  tf_keras.mixed_precision.set_global_policy("float32")
  yield
  tf_keras.mixed_precision.set_global_policy("float32")


# Pre-training records for training-loop tests: sample_text.txt with the
# bert-base-uncased vocab, seq 64, 10 predictions, 4 shards.
PRETRAIN_SEQ, PRETRAIN_PRED = 64, 10


@pytest.fixture(scope="session")
def pretraining_records(tmp_path_factory):
  """Glob of small real pre-training TFRecords (written once per session)."""
  from bert import data as pd  # pylint: disable=g-import-not-at-top
  folder = str(tmp_path_factory.mktemp("pretraining_records"))
  config = pd.PretrainingDataConfig(dupe_factor=3, seq_length=PRETRAIN_SEQ,
                                    max_predictions_per_seq=PRETRAIN_PRED)
  pd.create_pretraining_data(shared_data("corpus", "sample_text.txt"), folder,
                             vocab(), config,
                             num_shards=4, log=lambda *_: None)
  return os.path.join(folder, "*.tfrecord")


def tiny_pretraining_config(dropout=0.1) -> BertConfig:
  """small_config with the real vocab and room for PRETRAIN_SEQ."""
  return small_config(vocab_size=30522, max_position_embeddings=PRETRAIN_SEQ,
                      hidden_dropout_prob=dropout,
                      attention_probs_dropout_prob=dropout)


def pretraining_task(records, dropout=0.0, batch=8, task_class=None, seed=3):
  """A tiny `PretrainingTask` (or `task_class`) on the records glob
  `records` (train and eval), PRETRAIN_SEQ/PRETRAIN_PRED, batch `batch`."""
  from bert.tasks import PretrainingTask  # pylint: disable=g-import-not-at-top
  from bert.tasks.configs import EncoderSource, PretrainingInputs  # pylint: disable=g-import-not-at-top
  return (task_class or PretrainingTask)(
      encoder=EncoderSource(bert_config=tiny_pretraining_config(dropout)),
      inputs=PretrainingInputs(train_files=records, eval_files=records,
                               seq_length=PRETRAIN_SEQ,
                               max_predictions_per_seq=PRETRAIN_PRED,
                               global_batch_size=batch, seed=seed))


def write_run(folder, bindings):
  """A `bert-train` run folder as its loaders read it: the gin-built task's
  operative_config.gin beside a checkpoint of its (initialised) model. The
  weights need no training for what the tests check, and tracing a training
  step would be most of their time."""
  import gin  # pylint: disable=g-import-not-at-top
  from bert.tasks import build_task  # pylint: disable=g-import-not-at-top
  gin.clear_config()
  try:
    gin.parse_config(bindings)
    task = build_task()
    model = task.build_model()
    task.initialize(model)
    tf.train.CheckpointManager(tf.train.Checkpoint(model=model), folder,
                               max_to_keep=1).save(checkpoint_number=1)
    with open(os.path.join(folder, "operative_config.gin"), "w") as f:
      f.write(gin.operative_config_str())
  finally:
    gin.clear_config()
  return folder


@pytest.fixture(scope="session")
def family_root(tmp_path_factory):
  """A folder where tests/family.py makes the family vocabularies and tiny
  Hugging Face folders, once per session."""
  return str(tmp_path_factory.mktemp("family"))
