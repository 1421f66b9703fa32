"""The serialisation shared by models that wrap one encoder and a head."""

import tf_keras


class EncoderHeadModel(tf_keras.Model):
  """A functional model of an encoder and a task head.

  Subclasses build their graph in `__init__(encoder, **head_config)` and list
  the head's keyword arguments in `_head_config`; `get_config` serialises the
  encoder with them, and `from_config` rebuilds the encoder first, so heads
  tied to its weights (the masked-LM head) are tied again.
  """

  _head_config = ()

  def get_config(self):
    config = dict(encoder=tf_keras.layers.serialize(self.encoder), name=self.name)
    config.update({k: getattr(self, k) for k in self._head_config})
    return config

  @classmethod
  def from_config(cls, config, custom_objects=None):
    config = dict(config)
    encoder = tf_keras.layers.deserialize(config.pop("encoder"),
                                          custom_objects=custom_objects)
    return cls(encoder, **config)
