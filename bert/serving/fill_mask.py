"""Fill-mask serving: `text` holding the mask token -> per mask, the top-k
tokens (`token`, `token_str`) and their probabilities (`score`)."""

from typing import Sequence

import tensorflow as tf

from bert.features import ENCODER_INPUTS
from bert.layers.tokenizer_and_packer import tokenizer_and_packer
from bert.layers.vocabulary import Vocabulary
from bert.serving.stages import ServingModule, cut_to_bucket


class FillMaskServing(ServingModule):
  """Raw strings -> [batch, masks, top_k] `token` (id), `token_str` (as
  `Vocabulary.decode` gives one token), `score` (probability), and
  `mask_count` [batch]: the masks found in each row (0 for a text without
  one or whose masks fall past the sequence); past a row's masks, token -1,
  token_str "" and score 0."""

  string_inputs = ("text",)
  network_inputs = tuple(ENCODER_INPUTS) + ("masked_lm_positions",)

  def __init__(self, model, vocab, lower_case: bool, seq_length: int,
               top_k: int, clean_up_spaces: bool, buckets: Sequence[int]):
    vocabulary = Vocabulary.of(vocab)
    options = (dict(special_tokens=(vocabulary.mask_token,))
               if vocabulary.kind == "wordpiece" else {})
    self.tokenizer, self.packer = tokenizer_and_packer(
        vocabulary, lower_case, seq_length, **options)
    self.mask_id = self.tokenizer.get_special_tokens_dict()["mask_id"]
    self.top_k = int(top_k)
    self.token_strs = tf.constant([
        vocabulary.decode([i], clean_up_spaces=clean_up_spaces)
        for i in range(len(vocabulary))])
    super().__init__(model, buckets, name="fill_mask_serving")

  def _preprocess(self, strings):
    inputs = cut_to_bucket(self.packer([self.tokenizer(strings["text"])]),
                           self.buckets)                          # [b, L]
    is_mask = tf.equal(inputs["input_word_ids"], self.mask_id)
    count = tf.reduce_sum(tf.cast(is_mask, tf.int32), 1)          # [b]
    where = tf.ragged.boolean_mask(
        tf.broadcast_to(tf.range(tf.shape(is_mask)[1]), tf.shape(is_mask)),
        is_mask)
    # At least one column: a batch without a mask still runs the head.
    inputs["masked_lm_positions"] = tf.concat(
        [where, tf.zeros([tf.shape(count)[0], 1], tf.int32)],
        1).to_tensor(0)[:, :tf.maximum(tf.reduce_max(
            tf.concat([count, [0]], 0)), 1)]                       # [b, P]
    inputs["mask_count"] = count
    return inputs

  def _postprocess(self, strings, features, outputs):
    probs = tf.nn.softmax(tf.cast(outputs["masked_lm_logits"], tf.float32))
    score, token = tf.math.top_k(probs, k=self.top_k)             # [b, P, k]
    real = (tf.range(tf.shape(score)[1])[tf.newaxis, :]
            < features["mask_count"][:, tf.newaxis])[:, :, tf.newaxis]
    return dict(token=tf.where(real, token, -1),
                token_str=tf.where(real, tf.gather(self.token_strs, token), ""),
                score=tf.where(real, score, 0.0),
                mask_count=features["mask_count"])
