"""Shared test helpers: quiet TF logs, small configs, random BERT inputs."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# The library's default fast path (set by `import bert`), before TensorFlow.
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402

from bert import BertConfig  # noqa: E402

# Where the real data and weights are: one definition, shared with bench/.
from bert.testing import minilm_dir, shared_data  # noqa: E402,F401

# The repository root (subprocess tests run commands from it).
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


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


def max_abs_diff(a, b):
  return float(np.max(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64))))


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
                             os.path.join(minilm_dir(), "vocab.txt"), config,
                             num_shards=4, log=lambda *_: None)
  return os.path.join(folder, "*.tfrecord")


def tiny_pretraining_config(dropout=0.1) -> BertConfig:
  """small_config with the real vocab and room for PRETRAIN_SEQ."""
  return small_config(vocab_size=30522, max_position_embeddings=PRETRAIN_SEQ,
                      hidden_dropout_prob=dropout,
                      attention_probs_dropout_prob=dropout)


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
