"""bert-extract-features writes the original's JSON lines with values equal to
Hugging Face's hidden states of the same real weights."""

import json
import subprocess
import sys

import numpy as np
import torch
import transformers

from conftest import REPO_ROOT, minilm_dir, vocab


def test_extract_features_matches_transformers(tmp_path):
  lines = ["Hello, world!", "The cat sat. ||| It was on the mat.", ""]
  src = tmp_path / "in.txt"
  src.write_text("\n".join(lines) + "\n")
  out = tmp_path / "out.jsonl"
  run = subprocess.run(
      [sys.executable, "-m", "bert.scripts.extract_features",
       f"--input_file={src}", f"--output_file={out}",
       f"--init_checkpoint={minilm_dir()}", "--layers=-1,-2,0",
       "--max_seq_length=32", "--batch_size=2"],
      cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
  assert run.returncode == 0, run.stderr[-2000:]
  records = [json.loads(l) for l in out.read_text().splitlines()]
  assert [r["linex_index"] for r in records] == [0, 1, 2]
  assert [f["token"] for f in records[0]["features"]] == [
      "[CLS]", "hello", ",", "world", "!", "[SEP]"]
  assert [f["token"] for f in records[2]["features"]] == ["[CLS]", "[SEP]"]

  tok = transformers.BertTokenizerFast(vocab())
  model = transformers.BertModel.from_pretrained(minilm_dir()).eval()
  for record, line in zip(records[:2], lines[:2]):
    a, _, b = line.partition(" ||| ")
    enc = tok(a, b or None, return_tensors="pt")
    with torch.no_grad():
      hidden = model(**enc, output_hidden_states=True).hidden_states
    assert [f["token"] for f in record["features"]] == tok.convert_ids_to_tokens(
        enc["input_ids"][0])
    for layer_pos, layer in enumerate((-1, -2, 0)):
      ours = np.array([f["layers"][layer_pos]["values"] for f in record["features"]])
      # hidden_states[0] is the embedding output; layer k is hidden_states[k+1].
      theirs = hidden[layer if layer < 0 else layer + 1][0].numpy()
      assert record["features"][0]["layers"][layer_pos]["index"] == layer
      assert np.abs(ours - theirs).max() < 1e-4
