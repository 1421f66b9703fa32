"""`shared_tokenizer`: one tokenizer per vocabulary file and casing for the
tasks of a process, never one of another file's contents."""

from bert.data.tokenization import shared_tokenizer

SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def _write(path, words):
  path.write_text("\n".join(SPECIAL + words) + "\n", encoding="utf-8")
  return str(path)


def test_one_tokenizer_per_file_contents_and_casing(tmp_path):
  path = _write(tmp_path / "vocab.txt", ["the", "dog", "runs"])
  first = shared_tokenizer(path, True)
  assert shared_tokenizer(path, True) is first
  assert [list(i) for i in first.tokenize(["The dog"])] == [[5, 6]]
  # Another casing, and the same contents at another path (messages name
  # their file): tokenizers of their own.
  assert shared_tokenizer(path, False) is not first
  copy = _write(tmp_path / "copy.txt", ["the", "dog", "runs"])
  assert shared_tokenizer(copy, True) is not first
  # The file rewritten in place: the new contents' ids, not the old ones.
  _write(tmp_path / "vocab.txt", ["dog", "the", "runs"])
  rewritten = shared_tokenizer(path, True)
  assert rewritten is not first
  assert [list(i) for i in rewritten.tokenize(["The dog"])] == [[6, 5]]


def test_only_the_last_few_are_kept(tmp_path):
  paths = [_write(tmp_path / f"v{i}.txt", ["the", f"word{i}"])
           for i in range(6)]
  first = shared_tokenizer(paths[0], True)
  for path in paths[1:]:
    shared_tokenizer(path, True)
  assert shared_tokenizer(paths[0], True) is not first      # evicted
  last = shared_tokenizer(paths[-1], True)
  assert shared_tokenizer(paths[-1], True) is last          # control: kept
