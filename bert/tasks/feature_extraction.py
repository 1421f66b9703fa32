"""Feature extraction: per-token hidden states of chosen layers, as JSON lines.

The output format of google-research `extract_features.py`: one JSON object
per input line, {"linex_index": i, "features": [{"token": "[CLS]", "layers":
[{"index": -1, "values": [...]}, ...]}, ...]}, values rounded to 6 decimals.
Input lines hold one sentence, or two separated by " ||| ".
"""

import json
from typing import Iterator, List, Optional, Sequence, Tuple

import tensorflow as tf

from bert.io import atomic_file, text_lines
from bert.data.tokenization import Tokenizer
from bert.validation import ConfigError


def read_lines(path: str) -> List[Tuple[str, Optional[str]]]:
  """(text_a, text_b or None) per line; blank lines are kept as empty texts.
  Invalid UTF-8 is a DataError naming the file and line."""
  out = []
  for _, line in text_lines(path):
    line = line.rstrip("\r\n")
    if " ||| " in line:
      a, b = line.split(" ||| ", 1)
      out.append((a, b))
    else:
      out.append((line, None))
  return out


def extract_features(encoder, tokenizer: Tokenizer,
                     lines: Sequence[Tuple[str, Optional[str]]],
                     layers: Sequence[int] = (-1, -2, -3, -4),
                     seq_length: int = 128, batch_size: int = 32
                     ) -> Iterator[dict]:
  """Yields (line index, feature dict) per line (see the module doc); within
  a batch, lines with two texts come after those with one."""
  num_layers = encoder.config.num_hidden_layers
  for layer in layers:
    if not -num_layers <= layer < num_layers:
      raise ConfigError(f"layer {layer} does not exist in a {num_layers}-layer "
                        "encoder")
  run = tf.function(lambda x: encoder(x, training=False)["encoder_outputs"])
  for start in range(0, len(lines), batch_size):
    chunk = lines[start:start + batch_size]
    # Lines with and without a second text are encoded in separate calls.
    for pairs in (False, True):
      index = [i for i, (_, b) in enumerate(chunk) if (b is not None) == pairs]
      if not index:
        continue
      inputs = tokenizer.encode([chunk[i][0] for i in index],
                                [chunk[i][1] for i in index] if pairs else None,
                                seq_length)
      outputs = [o.numpy() for o in run({k: tf.constant(v) for k, v in inputs.items()})]
      for row, i in enumerate(index):
        n = int(inputs["input_mask"][row].sum())
        tokens = tokenizer.convert_ids_to_tokens(inputs["input_word_ids"][row][:n])
        features = []
        for t, token in enumerate(tokens):
          features.append(dict(token=token, layers=[
              dict(index=layer, values=[round(float(v), 6) for v in
                                        outputs[layer][row, t]])
              for layer in layers]))
        yield (start + i, dict(linex_index=start + i, features=features))


def write_features(path: str, features: Iterator[Tuple[int, dict]]) -> int:
  """Writes the features in line order; returns the number of lines. The
  file appears only once complete (`atomic_file`): a failure leaves the
  previous one, and the output is checked before the first line is
  encoded (the features are a generator)."""
  pending, next_index, count = {}, 0, 0
  with atomic_file(path) as f:
    for index, feature in features:
      pending[index] = feature
      while next_index in pending:
        f.write(json.dumps(pending.pop(next_index)) + "\n")
        next_index += 1
        count += 1
  return count
