"""`make_preprocessing_model`: raw strings -> encoder inputs, as a savable
model with TF Hub's preprocessing interface (what TF Hub calls a
"preprocessing model", `bert_*_preprocess`). Not a preprocessor
(`bert.models.BertPreprocessor`, a model's `preprocessor`), which also
batches, holds the targets and decodes outputs."""

import tensorflow as tf
import tf_keras

from bert.layers.tokenizer_and_packer import tokenizer_and_packer


def make_preprocessing_model(vocab_file: str, lower_case: bool = True,
                             seq_length: int = 128, num_text_inputs: int = 1,
                             name: str = "bert_preprocessing"
                             ) -> tf_keras.Model:
  """A tf_keras model from 1 or more string inputs [batch] to the dict
  `input_word_ids`, `input_mask`, `input_type_ids` (int32 [batch, seq_length]).

  Like TF Hub's BERT preprocessing models it also carries two sub-objects, which
  `tf.saved_model.save` exports with it:
    `model.tokenize(strings [batch])` -> int32 ragged [batch, (tokens)]
    `model.bert_pack_inputs([segments...], seq_length)` for 1 or 2 segments.
  Loading the SavedModel needs only TensorFlow and `import tensorflow_text`
  (for its ops), not this library.
  """
  tokenizer, packer = tokenizer_and_packer(
      vocab_file, lower_case, seq_length, tokenizer_name="tokenizer",
      packer_name="bert_pack_inputs")
  texts = [tf_keras.Input(shape=(), dtype=tf.string, name=f"text_{i}" if
                          num_text_inputs > 1 else "text")
           for i in range(num_text_inputs)]
  outputs = packer([tokenizer(t) for t in texts])
  model = tf_keras.Model(texts if num_text_inputs > 1 else texts[0], outputs,
                         name=name)
  model.tokenize = tf.function(
      tokenizer.tokenize, input_signature=[tf.TensorSpec([None], tf.string)])

  def pack(segments, seq_length=seq_length):
    return packer(segments, seq_length=seq_length)

  model.bert_pack_inputs = tf.function(pack)
  segment = tf.RaggedTensorSpec([None, None], tf.int32)
  for n in (1, 2):
    model.bert_pack_inputs.get_concrete_function(
        [segment] * n, tf.TensorSpec([], tf.int32))
  return model
