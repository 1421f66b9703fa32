"""Every Python block of the README runs as written, in order, in one
namespace (a later block may use what an earlier one made), in a temporary
folder, on small real data: the names the README leaves to the reader
(`sentences_a`, `ids`, `vocab_file`, ...) are bound to MRPC rows and the
MiniLM checkpoint's files first."""

import os
import re

import numpy as np
import tensorflow as tf

from bert.data import classification_data as cd
from conftest import REPO_ROOT, random_inputs, shared_data, vocab


def python_blocks():
  with open(os.path.join(REPO_ROOT, "README.md"), encoding="utf-8") as f:
    text = f.read()
  return re.findall(r"^```python\n(.*?)^```", text, flags=re.S | re.M)


def reader_names():
  """What the README's blocks take from the reader's own code."""
  examples = cd.read_glue("mrpc", shared_data("glue", "MRPC", "train.tsv"))[:16]
  inputs = random_inputs(2, 16, vocab_size=30522)
  vocab_file = vocab()
  return dict(
      sentences_a=[e.text_a for e in examples],
      sentences_b=[e.text_b for e in examples],
      labels=["paraphrase" if e.label == "1" else "different" for e in examples],
      ids=inputs["input_word_ids"], mask=inputs["input_mask"],
      types=inputs["input_type_ids"], vocab_file=vocab_file,
      texts=tf.constant(["Hello, world!", "A second text."]),
      ids_a=tf.ragged.constant([[7592, 1010]]), ids_b=tf.ragged.constant([[2088]]))


def test_readme_python_blocks_run_as_written(tmp_path, monkeypatch):
  blocks = python_blocks()
  assert len(blocks) >= 4, "the README lost its Python examples"
  assert any("from_pretrained" in b and ".fit(" in b and ".predict(" in b
             for b in blocks[:1]), "the README must open with the Python path"
  assert len(blocks[0].strip().splitlines()) <= 5
  monkeypatch.chdir(tmp_path)
  namespace = reader_names()
  for i, block in enumerate(blocks):
    try:
      exec(compile(block, f"README.md python block {i + 1}", "exec"), namespace)  # pylint: disable=exec-used
    except Exception as e:
      raise AssertionError(f"README python block {i + 1} failed: "
                           f"{type(e).__name__}: {e}\n{block}") from e
  # The opening block's model predicts task-level outputs.
  predictions = namespace["model"].predict(
      (namespace["sentences_a"][:2], namespace["sentences_b"][:2]))
  assert set(predictions["labels"]) <= {"different", "paraphrase"}
  assert np.allclose(predictions["probabilities"].sum(-1), 1.0, atol=1e-6)
