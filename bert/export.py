"""SavedModel export: TF Hub encoders and preprocessors, raw-string serving.

Every export loads with `tf.saved_model.load` in a process that imports only
tensorflow and (for models that tokenize) tensorflow_text, whose ops the
tokenizer uses; this library is not needed to serve.

- `export_encoder`: the TF Hub BERT encoder interface (dict inputs
  `input_word_ids`/`input_mask`/`input_type_ids`, dict outputs
  `sequence_output`/`pooled_output`/`encoder_outputs`; `trainable_variables`,
  `regularization_losses`; `hub.KerasLayer(path, trainable=True)` fine-tunes
  it), with an `.mlm` sub-object (adds `masked_lm_positions` -> `mlm_logits`)
  when masked-LM head weights are given.
- `export_preprocessor`: raw strings -> encoder inputs, with `.tokenize` and
  `.bert_pack_inputs` (seq_length changeable at call time).
- `export_classifier`: one `serving_default` signature, strings `text`
  (and `text_b` for pairs) -> `probabilities`, `label`; `score` for
  regression.
"""

from typing import Optional, Sequence

import tensorflow as tf
import tf_keras

from bert.layers.bert_pack_inputs import BertPackInputs
from bert.layers.bert_tokenizer import BertTokenizer
from bert.networks.bert_preprocessor import make_preprocessor

ENCODER_INPUTS = ("input_word_ids", "input_mask", "input_type_ids")


def export_encoder(encoder, path: str, masked_lm=None) -> None:
  """Writes `encoder` (a BertEncoder) as a TF Hub reusable SavedModel.

  Args:
    masked_lm: optional MaskedLMHead tied to this encoder's embeddings; it
      becomes the `.mlm` sub-object.
  """
  inputs = {k: tf_keras.Input(shape=(None,), dtype=tf.int32, name=k)
            for k in ENCODER_INPUTS}
  outputs = encoder(inputs)
  hub_encoder = tf_keras.Model(inputs, dict(
      sequence_output=outputs["sequence_output"],
      pooled_output=outputs["pooled_output"],
      encoder_outputs=outputs["encoder_outputs"]), name="bert_encoder")
  if masked_lm is not None:
    mlm_inputs = dict(inputs, masked_lm_positions=tf_keras.Input(
        shape=(None,), dtype=tf.int32, name="masked_lm_positions"))
    mlm_outputs = encoder({k: mlm_inputs[k] for k in ENCODER_INPUTS})
    hub_encoder.mlm = tf_keras.Model(mlm_inputs, dict(
        sequence_output=mlm_outputs["sequence_output"],
        pooled_output=mlm_outputs["pooled_output"],
        encoder_outputs=mlm_outputs["encoder_outputs"],
        mlm_logits=masked_lm(mlm_outputs["sequence_output"],
                             mlm_inputs["masked_lm_positions"])), name="mlm")
  hub_encoder.save(path, include_optimizer=False, save_format="tf")


def export_preprocessor(vocab_file: str, path: str, lower_case: bool = True,
                        seq_length: int = 128, num_text_inputs: int = 1) -> None:
  """Writes a TF Hub-style BERT preprocessor SavedModel."""
  model = make_preprocessor(vocab_file, lower_case=lower_case,
                            seq_length=seq_length, num_text_inputs=num_text_inputs)
  tf.saved_model.save(model, path)


class _ClassifierServing(tf.Module):
  """Raw strings -> class probabilities and label names."""

  def __init__(self, model, vocab_file, lower_case, seq_length, labels, pairs):
    super().__init__(name="classifier_serving")
    self.model = model
    self.tokenizer = BertTokenizer(vocab_file, lower_case=lower_case)
    self.packer = BertPackInputs(seq_length,
                                 self.tokenizer.get_special_tokens_dict())
    self.labels = tf.constant(list(labels or []), tf.string)
    self.regression = not labels
    text = tf.TensorSpec([None], tf.string, name="text")
    if pairs:
      self.serve = tf.function(
          lambda text, text_b: self._serve([text, text_b]),
          input_signature=[text, tf.TensorSpec([None], tf.string, name="text_b")])
    else:
      self.serve = tf.function(lambda text: self._serve([text]),
                               input_signature=[text])

  def _serve(self, texts):
    inputs = self.packer([self.tokenizer(t) for t in texts])
    logits = self.model(inputs, training=False)["logits"]
    if self.regression:
      return dict(score=logits[:, 0])
    probabilities = tf.nn.softmax(logits, -1)
    return dict(probabilities=probabilities,
                label=tf.gather(self.labels, tf.argmax(probabilities, -1)))


def export_classifier(model, path: str, vocab_file: str, lower_case: bool,
                      seq_length: int, labels: Optional[Sequence[str]],
                      pairs: bool) -> None:
  """Writes a serving SavedModel of a fine-tuned BertClassifier.

  Args:
    labels: class names in logit order; None for regression.
    pairs: whether the model takes a second text (`text_b`).
  """
  module = _ClassifierServing(model, vocab_file, lower_case, seq_length,
                              labels, pairs)
  tf.saved_model.save(module, path, signatures={"serving_default": module.serve})


def load_trained_task(model_dir: str):
  """(task, model) of a `bert-train` run: the task rebuilt from the run's
  operative_config.gin, the model with the newest checkpoint's weights."""
  import os  # pylint: disable=g-import-not-at-top
  import gin  # pylint: disable=g-import-not-at-top
  from bert import tasks  # pylint: disable=g-import-not-at-top,unused-import
  from bert.training import run  # pylint: disable=g-import-not-at-top
  config = os.path.join(model_dir, "operative_config.gin")
  if not os.path.exists(config):
    raise FileNotFoundError(f"{config}: not a bert-train model_dir (no "
                            "operative_config.gin)")
  latest = tf.train.latest_checkpoint(model_dir)
  if latest is None:
    raise FileNotFoundError(f"{model_dir}: no checkpoint")
  gin.clear_config()
  gin.parse_config_file(config, skip_unknown=True)
  task = run.build_task()
  gin.clear_config()
  model = task.build_model()
  tf.train.Checkpoint(model=model).restore(latest).expect_partial()
  return task, model


def export_trained_classifier(model_dir: str, path: str) -> None:
  """`export_classifier` of a fine-tuned ClassificationTask run."""
  from bert.tasks import ClassificationTask  # pylint: disable=g-import-not-at-top
  task, model = load_trained_task(model_dir)
  if not isinstance(task, ClassificationTask):
    raise ValueError(f"{model_dir} trained a {type(task).__name__}, not a "
                     "ClassificationTask")
  pairs = (task.layout.text_b is not None if task.layout is not None
           else task.columns[1] is not None)
  export_classifier(model, path, task.tokenizer.layer.vocab_file,
                    task.tokenizer.lower_case, task.seq_length, task.labels, pairs)
