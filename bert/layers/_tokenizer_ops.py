"""In-graph helpers the tokenizer layers share (`BertTokenizer`,
`BytePairTokenizer`, `SentencePieceTokenizer`): RE2 patterns of literal
tokens, string lookup tables, and splicing special tokens' ids in among the
tokens of the text around them.
"""

import tensorflow as tf

# Unicode White_Space, the `\s` of the reference's regex engine.
WHITESPACE = (r"\t\n\x{0B}\f\r \x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}"
              r"\x{2029}\x{202F}\x{205F}\x{3000}")


def table(keys, values, default, dtype):
  """A string -> `dtype` lookup table; `default` for keys not in it."""
  return tf.lookup.StaticHashTable(
      tf.lookup.KeyValueTensorInitializer(
          tf.constant(keys, tf.string), tf.constant(values, dtype)), default)


def re2_escape(text: str) -> str:
  """`text` as an RE2 pattern matching it literally (every character as
  \\x{...}, so no character of a token is read as syntax)."""
  return "".join(f"\\x{{{ord(c):x}}}" for c in text)


def special_pattern(tokens, lstrip_tokens) -> str:
  """RE2 alternatives matching each of `tokens` whole, longest first (so
  that one that starts another wins); those in `lstrip_tokens` take the
  whitespace on their left with them."""
  ordered = sorted(tokens, key=len, reverse=True)
  return "|".join(f"[{WHITESPACE}]*{re2_escape(t)}" if t in lstrip_tokens
                  else re2_escape(t) for t in ordered)


def interleave(ragged_tokens, special_values, is_special, n_tokens):
  """Flat values, per piece: the piece's tokens, or its one special value.

  ragged_tokens: [pieces, (tokens)], no tokens in a special piece's row;
  special_values, is_special, n_tokens: [pieces] (n_tokens is 1 for a
  special piece). Returns int64 [sum(n_tokens)].
  """
  flat = ragged_tokens.flat_values
  # Position of each output value: pieces in order.
  special_positions = tf.gather(tf.cumsum(n_tokens, exclusive=True),
                                tf.where(is_special)[:, 0])
  token_piece = ragged_tokens.value_rowids()
  within = tf.range(tf.shape(flat, out_type=tf.int64)[0]) - tf.gather(
      ragged_tokens.row_starts(), token_piece)
  token_positions = tf.gather(tf.cumsum(n_tokens, exclusive=True),
                              token_piece) + within
  total = tf.reduce_sum(n_tokens)
  out = tf.scatter_nd(token_positions[:, None], tf.cast(flat, tf.int64),
                      [total])
  return tf.tensor_scatter_nd_update(
      out, special_positions[:, None],
      tf.cast(tf.boolean_mask(special_values, is_special), tf.int64))
