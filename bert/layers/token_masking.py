"""`TokenMasking`: dynamic masking of input word pieces (distillation's
augmented transfer data)."""

import tensorflow as tf
import tf_keras


@tf_keras.utils.register_keras_serializable(package="bert")
class TokenMasking(tf_keras.__internal__.layers.BaseRandomLayer):
  """Replaces a fraction of each row's real word pieces with [MASK] while
  training, drawn anew at every call (at inference: the identity).

  [CLS], [SEP] and padding are never masked. The draws come from the
  layer's own generator, made from the global seed like dropout's, so a run
  is repeatable and a resumed run continues them.

  Args:
    rate: the chance of each real piece being masked.
    mask_id: the [MASK] id; keep_ids: ids never masked ([CLS], [SEP]).
  call(inputs, training): `inputs` the encoder's dict; returns it with
  `input_word_ids` masked.
  """

  def __init__(self, rate: float, mask_id: int, keep_ids=(), **kwargs):
    super().__init__(force_generator=True, **kwargs)
    self.rate = float(rate)
    self.mask_id = int(mask_id)
    self.keep_ids = tuple(int(i) for i in keep_ids)

  def call(self, inputs, training=None):
    if not training or self.rate <= 0:
      return inputs
    ids = tf.cast(inputs["input_word_ids"], tf.int32)          # [batch, seq]
    maskable = tf.cast(inputs["input_mask"], tf.int32) > 0
    for keep in self.keep_ids:
      maskable &= tf.not_equal(ids, keep)
    draw = self._random_generator.random_uniform(tf.shape(ids))
    masked = tf.where(maskable & (draw < self.rate), self.mask_id, ids)
    return dict(inputs, input_word_ids=tf.cast(
        masked, inputs["input_word_ids"].dtype))

  def get_config(self):
    return dict(super().get_config(), rate=self.rate, mask_id=self.mask_id,
                keep_ids=list(self.keep_ids))
