"""Small fine-tuned-looking models and inputs shared by the serving tests."""

import numpy as np
import tensorflow as tf
import tf_keras

from bert import BertEncoder, export
from bert.data import classification_data as cd
from bert.layers.bert_tokenizer import read_vocab
from bert.models import BertClassifier, BertTextEmbedder
from bert.models.embedder_preprocessor import TextEmbedderPreprocessor
from bert.serving import gate
from conftest import shared_data, small_config, vocab


def sst2_texts(n):
  return [e.text_a for e in cd.read_glue(
      "sst-2", shared_data("glue", "SST-2", "dev.tsv"), "eval")[:n]]


def classifier(seed=0, scale=1.0):
  """A small classifier whose head is scaled up, so its labels are confident
  (near-ties would flip under any rounding and blur the gate tests)."""
  tf_keras.utils.set_random_seed(seed)
  model = BertClassifier(BertEncoder(small_config(
      vocab_size=30522, max_position_embeddings=64)), 2)
  kernel = [w for w in model.head.weights if "kernel" in w.name][-1]
  kernel.assign(kernel * scale)
  return model


def self_labelled_gate(model, texts, max_drop):
  """A gate whose gold labels are the fp32 model's own, so fp32 scores 100."""
  reference = export.ClassifierServing(model, vocab(), True, 64, ["neg", "pos"],
                                       False, (64,))
  labels = [l.decode() for l in reference.serve({"text": tf.constant(texts)})
            ["label"].numpy()]
  return gate.classification_gate(texts, labels, "sst2-dev-sample", None,
                                  max_drop)


def padded_inputs(lengths, seq_length=64, seed=0):
  rng = np.random.default_rng(seed)
  ids = rng.integers(1000, 20000, (len(lengths), seq_length)).astype(np.int32)
  mask = (np.arange(seq_length)[None, :] < np.asarray(lengths)[:, None]).astype(np.int32)
  return dict(input_word_ids=ids * mask, input_mask=mask,
              input_type_ids=np.zeros_like(ids))


def tiny_embedder(pooling=("mean",), dense=(), normalize=True, seed=0):
  """A 2-layer embedder with MiniLM's vocabulary: builds and exports in
  seconds."""
  tf_keras.utils.set_random_seed(seed)
  model = BertTextEmbedder(BertEncoder(small_config(
      vocab_size=30522, max_position_embeddings=64)), pooling=pooling,
      dense=dense, normalize=normalize)
  model.attach_preprocessor(TextEmbedderPreprocessor(
      read_vocab(vocab()), True, seq_length=64, length_buckets=(16, 32, 64)))
  return model
