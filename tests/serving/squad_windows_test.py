"""In-graph SQuAD windows and answer search equal the Python path exactly:
`encode_examples`' rows and meta, `predict_by_length`'s padding and
`postprocess`' answers, on real SQuAD dev questions and edge cases."""

import collections

import numpy as np
import pytest
import tensorflow as tf

from bert.data import length_buckets as lb
from bert.data import squad_eval
from bert.data.squad_config import SquadConfig
from bert.data.squad_examples import (
    SquadExample, _char_offsets, encode_examples, read_squad)
from bert.features import ENCODER_INPUTS
from bert.serving.squad_windows import (
    answer_byte_offsets, best_spans, window_inputs)
from bert.validation import ConfigError
from conftest import shared_data

# Small rows, so most SQuAD contexts need several windows.
SEQ, STRIDE, QUERY = 96, 32, 16


def settings(seq=SEQ, stride=STRIDE, query=QUERY, **answers):
  return SquadConfig(seq_length=seq, doc_stride=stride,
                     max_query_length=query, **answers)


@pytest.fixture(scope="module")
def dev():
  return read_squad(shared_data("squad", "dev-v1.1.json"))


@pytest.fixture(scope="module")
def squad(dev):
  return dev[::40]                                # 265 questions, 48 articles


@pytest.fixture(scope="module")
def edge_cases(tokenizer):
  """Empty context, one exactly full window, one piece more, a question
  longer than QUERY, a shared context, multi-byte text."""
  words = [t for t in tokenizer.vocab[2000:2600] if t.isalpha()]  # 1 piece each
  q = "which one?"
  room = SEQ - len(tokenizer.tokenize([q])[0]) - 3
  texts = [("", q), (" ".join(words[:room]), q),
           (" ".join(words[:room + 1]), q),
           (" ".join(words[:300]), " ".join(words[300:340]) + "?"),
           (" ".join(words[:300]), "why?"),
           ("Café Zürich — 東京 naïve façade, 1990s. " * 12, "where?")]
  return [SquadExample(str(i), question, context, [])
          for i, (context, question) in enumerate(texts)]


def graph_windows(tokenizer, examples, seq=SEQ, stride=STRIDE, query=QUERY):
  special = tokenizer.get_special_tokens_dict()
  tokenize = lambda texts: tokenizer.layer.tokenize(tf.constant(texts, tf.string))
  return window_inputs(tokenize([e.question for e in examples]),
                       tokenize([e.context for e in examples]),
                       settings(seq, stride, query),
                       special["start_of_sequence_id"],
                       special["end_of_segment_id"])


def check_windows(tokenizer, examples, seq=SEQ, stride=STRIDE, query=QUERY):
  """Asserts the windows equal encode_examples'; returns (arrays, meta,
  windows)."""
  arrays, meta = encode_examples(examples, tokenizer,
                                 settings(seq, stride, query))
  windows = graph_windows(tokenizer, examples, seq, stride, query)
  got = {k: v.numpy() for k, v in windows.items()}
  for k in ENCODER_INPUTS:
    np.testing.assert_array_equal(got[k], arrays[k], err_msg=k)
  assert got["window_question"].tolist() == [m["example"] for m in meta]
  contexts = list(dict.fromkeys(e.context for e in examples))
  char_spans = {
      text: _char_offsets(text, b_start, b_end) for text, (_, b_start, b_end)
      in zip(contexts, tokenizer.tokenize_with_offsets(contexts))}
  for i, m in enumerate(meta):
    types = arrays["input_type_ids"][i]
    offset, start, length = (int(got[k][i]) for k in (
        "window_offset", "window_start", "window_length"))
    assert (offset, length) == (int(np.argmax(types)), int(types.sum()) - 1)
    c_start, c_end = char_spans[examples[m["example"]].context]
    assert m["char_spans"] == {offset + j: (int(c_start[start + j]),
                                            int(c_end[start + j]))
                               for j in range(length)}
    assert length or start == 0
    max_context = np.zeros(seq, bool)
    max_context[list(m["max_context"])] = list(m["max_context"].values())
    np.testing.assert_array_equal(got["max_context"][i], max_context)
  return arrays, meta, windows


def test_windows_equal_encode_examples_on_squad(tokenizer, squad):
  _, meta, _ = check_windows(tokenizer, squad)
  per_question = collections.Counter(m["example"] for m in meta)
  assert sum(n >= 3 for n in per_question.values()) >= 100
  assert max(per_question.values()) >= 10
  # Overlapping windows: some pieces are scored in a later window only.
  assert any(not all(m["max_context"].values()) for m in meta)


@pytest.mark.parametrize("seq,stride,query", [(SEQ, STRIDE, QUERY),
                                              (SEQ, 200, QUERY), (24, 3, 4)])
def test_windows_equal_encode_examples_on_edge_cases(tokenizer, edge_cases,
                                                     seq, stride, query):
  _, meta, windows = check_windows(tokenizer, edge_cases, seq, stride, query)
  per_question = collections.Counter(m["example"] for m in meta)
  assert per_question[0] == 1 and not meta[0]["char_spans"]   # empty context
  if seq == SEQ:
    assert per_question[1] == 1 and per_question[2] == 2
  # The long question is cut to `query` pieces: its windows' context
  # starts right after.
  long_question = windows["window_question"].numpy() == 3
  assert windows["window_offset"].numpy()[long_question].tolist() == [
      query + 2] * per_question[3]


def test_no_questions(tokenizer):
  windows = graph_windows(tokenizer, [])
  assert all(v.shape[0] == 0 for v in windows.values())
  assert windows["input_word_ids"].shape == [0, SEQ]
  empty = tf.zeros([0, 32])
  spans = best_spans(empty, empty, windows, 0, settings())
  assert all(v.shape == [0] for v in spans.values())


def test_impossible_settings_fail_before_any_graph(tokenizer):
  settings(seq=64, query=60)                  # control: one context piece
  with pytest.raises(ConfigError, match="max_query_length=61 leaves no room"):
    graph_windows(tokenizer, [], seq=64, query=61)
  with pytest.raises(ConfigError,
                     match=r"SquadConfig.doc_stride must be an integer >= 1"):
    graph_windows(tokenizer, [], stride=0)
  with pytest.raises(ConfigError,
                     match=r"SquadConfig.n_best_size must be an integer >= 1"):
    settings(n_best_size=0)


# ------------------------------------------------------------------ answers
def python_logits(arrays, start, end, buckets):
  """What `postprocess` sees on the Python predict path: the rows run by
  `predict_by_length` in one batch, cut to its bucket and padded back with
  its pad value. Returns (start, end, the cut length)."""
  n = len(arrays["input_word_ids"])
  cut = []

  def fn(batch):
    length = batch["input_mask"].shape[1]
    cut.append(length)
    return {k: tf.gather(v, batch["row"])[:, :length]
            for k, v in (("start_logits", start), ("end_logits", end))}

  features = dict({k: arrays[k] for k in ENCODER_INPUTS}, row=np.arange(n))
  out = lb.predict_by_length(fn, features, n, buckets,
                             ("start_logits", "end_logits"))
  assert len(cut) == 1
  return out["start_logits"], out["end_logits"], cut[0]


def answer_texts(tokenizer, examples, spans):
  """Answers cut from the contexts' bytes at the tokenizer's byte offsets."""
  offsets = tokenizer.tokenize_with_offsets([e.context for e in examples])
  out = {}
  for i, e in enumerate(examples):
    _, b_start, b_end = offsets[i]
    s, t = int(spans["piece_start"][i]), int(spans["piece_end"][i])
    out[e.qas_id] = (e.context.encode("utf-8")[b_start[s]:b_end[t]].decode("utf-8")
                     if spans["found"][i] else "")
  return out


def graph_answers(tokenizer, examples, windows, start, end, **kwargs):
  spans = best_spans(tf.constant(start), tf.constant(end), windows,
                     len(examples), settings(**kwargs))
  spans = {k: v.numpy() for k, v in spans.items()}
  return answer_texts(tokenizer, examples, spans), spans


def check_answers(tokenizer, examples, meta, windows, start, end, cut,
                  **kwargs):
  """best_spans on the [w, cut] logits equals postprocess on `start`/`end`
  (the padded logits); returns the answers."""
  predictions, _, null_odds = squad_eval.postprocess(
      examples, meta, start, end, settings(
          version_2=True, null_score_diff_threshold=1e9, **kwargs))
  answers, spans = graph_answers(tokenizer, examples, windows, start[:, :cut],
                                 end[:, :cut], **kwargs)
  assert answers == predictions
  # The best span's score and the null score: null_odds is their difference.
  for i, e in enumerate(examples):
    score = float(spans["score"][i]) if spans["found"][i] else -1e9
    assert float(spans["null_score"][i]) - score == null_odds[e.qas_id]
  return answers


def random_logits(arrays, seed, ties=False):
  rng = np.random.RandomState(seed)
  shape = arrays["input_word_ids"].shape
  if ties:     # a handful of values: ties at the n-best cut and in scores
    return tuple(rng.randint(-2, 3, size=shape).astype(np.float32)
                 for _ in range(2))
  return tuple(rng.standard_normal(shape).astype(np.float32) for _ in range(2))


class _StableArgsort:
  """NumPy for `postprocess` with a stable argsort: its rule without the
  arbitrary order of NumPy's SIMD sorts among equal logits."""

  def __getattr__(self, name):
    return getattr(np, name)

  @staticmethod
  def argsort(a):
    return np.argsort(a, kind="stable")


@pytest.mark.parametrize("data", ["squad", "edge_cases"])
def test_answers_equal_postprocess(tokenizer, data, request):
  examples = request.getfixturevalue(data)
  arrays, meta, windows = check_windows(tokenizer, examples)
  start, end, cut = python_logits(arrays, *random_logits(arrays, 0),
                                  lb.default_length_buckets(SEQ))
  assert cut == SEQ
  answers = check_answers(tokenizer, examples, meta, windows, start, end, cut)
  empty = sum(a == "" for a in answers.values())
  assert empty == (1 if data == "edge_cases" else 0)     # the empty context
  check_answers(tokenizer, examples, meta, windows, start, end, cut,
                n_best_size=3, max_answer_length=2)
  # Negative control: without the max-context rule some answers change.
  in_context = tf.cast(windows["input_type_ids"], tf.bool) & tf.cast(
      tf.roll(windows["input_type_ids"], -1, 1), tf.bool)
  loose, _ = graph_answers(tokenizer, examples,
                           dict(windows, max_context=in_context), start, end)
  if data == "squad":
    assert sum(loose[k] != answers[k] for k in answers) >= 5


def test_version_2_answers_equal_postprocess(tokenizer, squad):
  """With version_2, "" wherever the null score beats the best span by more
  than the threshold: `answered` is `postprocess`' rule."""
  arrays, meta, windows = check_windows(tokenizer, squad)
  start, end = random_logits(arrays, 4)
  _, _, null_odds = squad_eval.postprocess(squad, meta, start, end,
                                           settings(version_2=True))
  # Half the questions on each side of the threshold, one exactly on it.
  threshold = float(np.median(list(null_odds.values())))
  v2 = settings(version_2=True, null_score_diff_threshold=threshold)
  predictions, _, _ = squad_eval.postprocess(squad, meta, start, end, v2)
  spans = best_spans(tf.constant(start), tf.constant(end), windows,
                     len(squad), v2)
  spans = {k: v.numpy() for k, v in spans.items()}
  answers = answer_texts(tokenizer, squad, dict(spans, found=spans["answered"]))
  assert answers == predictions
  assert 0 < sum(a == "" for a in answers.values()) < len(answers)
  # Negative control: the v1.1 rule answers every question.
  v1 = best_spans(tf.constant(start), tf.constant(end), windows, len(squad),
                  settings())
  assert v1["answered"].numpy().all()


def test_answers_with_ties_equal_postprocess_with_a_stable_sort(
    tokenizer, squad, edge_cases, monkeypatch):
  monkeypatch.setattr(squad_eval, "np", _StableArgsort())
  examples = squad[:80] + edge_cases
  arrays, meta, windows = check_windows(tokenizer, examples)
  start, end, cut = python_logits(arrays, *random_logits(arrays, 1, ties=True),
                                  (SEQ,))
  check_answers(tokenizer, examples, meta, windows, start, end, cut)


def test_answers_of_logits_cut_to_a_bucket_equal_postprocess(tokenizer, dev):
  # Contexts of one window each, all rows within the 128 bucket of 192.
  seq, stride, query = 192, 64, 32
  pool = dev[::25]
  arrays, meta = encode_examples(pool, tokenizer, settings(seq, stride, query))
  rows = collections.defaultdict(list)
  for m, n in zip(meta, arrays["input_mask"].sum(1)):
    rows[m["example"]].append(n)
  examples = [pool[i] for i, n in rows.items() if len(n) == 1 and n[0] <= 128]
  assert len(examples) >= 30
  arrays, meta, windows = check_windows(tokenizer, examples, seq, stride, query)
  full_start, full_end = random_logits(arrays, 2)
  start, end, cut = python_logits(arrays, full_start, full_end,
                                  lb.default_length_buckets(seq))
  assert cut == 128 and (start[:, cut:] == -1e4).all()
  answers = check_answers(tokenizer, examples, meta, windows, start, end, cut)
  # An n-best longer than the cut: Python's top-n takes pad positions
  # (never an answer) too.
  check_answers(tokenizer, examples, meta, windows, start, end, cut,
                n_best_size=150)
  # The answers do not depend on the bucket: the model's logits past each
  # row's tokens (here: the uncut random ones) are set to the pad value.
  uncut, _ = graph_answers(tokenizer, examples, windows, full_start, full_end)
  assert uncut == answers
  # Negative control: without the row lengths Python's top-n sees those
  # positions, and answers change.
  blind = [{k: v for k, v in m.items() if k != "row_length"} for m in meta]
  unmasked, _, _ = squad_eval.postprocess(examples, blind, full_start, full_end)
  assert sum(unmasked[e.qas_id] != answers[e.qas_id] for e in examples) >= 1
  # Logits just below the pad value: a few real positions above it, so the
  # pad value decides which spans compete (another value changes answers).
  near = [np.where(t == -1e4, np.float32(-1e4 - 0.5), t) for t in (
      np.float32(-1e4 - 1) + np.float32(0.5) * random_logits(arrays, 3)[i]
      for i in range(2))]
  start, end, _ = python_logits(arrays, *near, lb.default_length_buckets(seq))
  answers = check_answers(tokenizer, examples, meta, windows, start, end, cut)
  assert 0 < sum(a == "" for a in answers.values()) < len(answers)


# ---------------------------------------------------------------- SavedModel
class _Answerer(tf.Module):
  """Strings -> answers over every window, with a stand-in model whose
  logits depend on the row's ids and positions."""

  def __init__(self, tokenizer, seq, stride, query, start_table, end_table):
    super().__init__()
    self.tokenizer = tokenizer.layer
    self.special = tokenizer.get_special_tokens_dict()
    self.squad = settings(seq, stride, query)
    self.tables = [tf.constant(t) for t in start_table + end_table]
    self.cut = lb.bucket_cutter(ENCODER_INPUTS, lb.default_length_buckets(seq))

  def logits(self, ids):
    length = tf.shape(ids)[1]
    start_ids, start_pos, end_ids, end_pos = self.tables
    return (tf.gather(start_ids, ids) + start_pos[:length],
            tf.gather(end_ids, ids) + end_pos[:length])

  @tf.function(input_signature=[tf.TensorSpec([None], tf.string)] * 2)
  def answer(self, question, context):
    c, c_start, c_end = self.tokenizer.tokenize(context, with_offsets=True)
    windows = window_inputs(self.tokenizer.tokenize(question), c, self.squad,
                            self.special["start_of_sequence_id"],
                            self.special["end_of_segment_id"])
    inputs = self.cut({k: windows[k] for k in ENCODER_INPUTS})
    start, end = self.logits(inputs["input_word_ids"])
    spans = best_spans(start, end, windows, tf.size(question), self.squad)
    byte_start, byte_end = answer_byte_offsets(spans, c_start, c_end)
    return dict(answer=tf.strings.substr(context, byte_start,
                                         byte_end - byte_start, unit="BYTE"),
                **spans)


def test_saved_model_answers_over_every_window(tokenizer, squad, edge_cases,
                                               tmp_path):
  seq, stride, query = 64, 24, 12
  rng = np.random.RandomState(3)
  vocab = len(tokenizer.vocab)
  start_table = [rng.standard_normal(vocab).astype(np.float32),
                 rng.standard_normal(seq).astype(np.float32)]
  end_table = [rng.standard_normal(vocab).astype(np.float32),
               rng.standard_normal(seq).astype(np.float32)]
  module = _Answerer(tokenizer, seq, stride, query, start_table, end_table)
  tf.saved_model.save(module, str(tmp_path))
  loaded = tf.saved_model.load(str(tmp_path))
  examples = squad[:12] + edge_cases
  out = loaded.answer(tf.constant([e.question for e in examples]),
                      tf.constant([e.context for e in examples]))
  # The Python path: encode_examples, the same model, predict_by_length,
  # postprocess.
  arrays, meta = encode_examples(examples, tokenizer,
                                 settings(seq, stride, query))
  assert max(collections.Counter(m["example"] for m in meta).values()) >= 5

  def model(batch):
    start, end = module.logits(batch["input_word_ids"])
    return dict(start_logits=start, end_logits=end)

  logits = lb.predict_by_length(model, {k: arrays[k] for k in ENCODER_INPUTS},
                                len(meta), lb.default_length_buckets(seq),
                                ("start_logits", "end_logits"))
  predictions, _, _ = squad_eval.postprocess(
      examples, meta, logits["start_logits"], logits["end_logits"])
  assert [a.decode("utf-8") for a in out["answer"].numpy()] == [
      predictions[e.qas_id] for e in examples]
  for n in (1, 0):                        # any batch size, none included
    some = loaded.answer(
        tf.constant([e.question for e in examples[:n]], tf.string),
        tf.constant([e.context for e in examples[:n]], tf.string))
    assert some["answer"].shape == [n]
