"""SQuAD windows and answer search in NumPy (`bert.serving.host_squad`) equal
the graph's (`bert.serving.squad_windows`) exactly: every key, ints and bools
equal, float32 scores bit for bit, on random ids and logits (many exact ties),
every template and on real SQuAD dev text; and the host module loads no
TensorFlow."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf

from bert.data import squad_eval
from bert.data.squad_config import SquadConfig
from bert.data.squad_examples import read_squad
from bert.serving import host_squad, squad_windows
from conftest import REPO_ROOT, shared_data

CLS, SEP, PAD = 101, 102, 0
TEMPLATES = [dict(separators_between_segments=1, segment_type_ids=True),
             dict(separators_between_segments=2, segment_type_ids=False)]
# (seq_length, doc_stride, max_query_length): small and large strides, a
# query limit most questions exceed, one that leaves a single context piece.
CONFIGS = [(64, 8, 16), (128, 200, 32), (384, 128, 64), (384, 32, 100),
           (24, 3, 4), (16, 5, 11)]


def settings(seq, stride, query, **answers):
  return SquadConfig(seq_length=seq, doc_stride=stride, max_query_length=query,
                     **answers)


def ragged(rows, dtype=tf.int64):
  lengths = [len(r) for r in rows]
  flat = np.concatenate([np.asarray(r, np.int64) for r in rows] + [
      np.zeros(0, np.int64)])
  return tf.RaggedTensor.from_row_lengths(tf.constant(flat, dtype),
                                          tf.constant(lengths, tf.int64))


def random_texts(seed, n=12):
  """n (question, context) id lists: lengths 0 to ~700 pieces, questions
  over max_query_length, empty contexts and questions."""
  rng = np.random.RandomState(seed)
  ids = lambda k: rng.randint(1000, 30000, size=k).astype(np.int32)
  q_lens = [0, 120] + list(rng.randint(1, 80, n - 2))
  c_lens = [0, 700] + [int(x) for x in rng.choice(
      [0, 1, 5, 40, 200, 380, 650], n - 2)]
  c_lens = [c + int(rng.randint(0, 50)) if c else 0 for c in c_lens]
  return [ids(k) for k in q_lens], [ids(k) for k in c_lens]


def graph_windows(questions, contexts, squad, template):
  out = squad_windows.window_inputs(ragged(questions), ragged(contexts), squad,
                                    CLS, SEP, PAD, **template)
  return {k: v.numpy() for k, v in out.items()}


def host_windows(questions, contexts, squad, template):
  return host_squad.window_inputs(questions, contexts, squad, CLS, SEP, PAD,
                                  **template)


def assert_same(host, graph):
  """Every key, dtype and shape equal; floats bit for bit."""
  assert sorted(host) == sorted(graph)
  for k in graph:
    h, g = np.asarray(host[k]), np.asarray(graph[k])
    assert (h.dtype, h.shape) == (g.dtype, g.shape), k
    if g.dtype.kind == "f":
      np.testing.assert_array_equal(h.view(np.uint32), g.view(np.uint32),
                                    err_msg=k)
    else:
      np.testing.assert_array_equal(h, g, err_msg=k)


def graph_spans(start, end, windows, q, squad):
  out = squad_windows.best_spans(tf.constant(start), tf.constant(end),
                                 {k: tf.constant(v) for k, v in windows.items()},
                                 q, squad)
  return {k: v.numpy() for k, v in out.items()}


# ------------------------------------------------------------------ windows
def test_the_pad_logit_is_the_graphs():
  assert host_squad.LOGIT_PAD_VALUE == squad_windows.LOGIT_PAD_VALUE
  assert host_squad.LOGIT_PAD_VALUE == squad_eval.PAD_LOGIT


@pytest.mark.parametrize("template", TEMPLATES, ids=["bert", "roberta"])
@pytest.mark.parametrize("seq,stride,query", CONFIGS)
def test_windows_equal_the_graphs(seq, stride, query, template):
  questions, contexts = random_texts(seq + stride)
  squad = settings(seq, stride, query)
  graph = graph_windows(questions, contexts, squad, template)
  host = host_windows(questions, contexts, squad, template)
  assert_same(host, graph)
  assert len(graph["window_question"]) > len(questions)   # several windows
  if stride < seq - 4 - query:
    # Overlapping windows: some pieces are scored in a later window only.
    in_context = (host["input_type_ids"] if template["segment_type_ids"]
                  else host["input_mask"]).astype(bool)
    assert (in_context & ~host["max_context"]).any()


def test_windows_of_no_questions():
  squad = settings(64, 8, 16)
  host = host_windows([], [], squad, TEMPLATES[0])
  assert_same(host, graph_windows([], [], squad, TEMPLATES[0]))
  assert host["input_word_ids"].shape == (0, 64)


def test_a_question_leaving_no_room_fails_like_the_graph():
  # RoBERTa's 2 separators and a query of seq_length - 4 pieces: no room.
  squad = settings(16, 4, 12)
  questions, contexts = [np.arange(20) + 1000], [np.arange(10) + 2000]
  with pytest.raises(tf.errors.InvalidArgumentError, match="division by zero"):
    graph_windows(questions, contexts, squad, TEMPLATES[1])
  with pytest.raises(ValueError, match="leaves no room"):
    host_windows(questions, contexts, squad, TEMPLATES[1])
  # Control: one piece less of query, one piece of room.
  squad = settings(16, 4, 11)
  assert_same(host_windows(questions, contexts, squad, TEMPLATES[1]),
              graph_windows(questions, contexts, squad, TEMPLATES[1]))


def test_a_changed_input_changes_the_windows():
  # Negative control: the comparison sees one id or one setting changed.
  questions, contexts = random_texts(5)
  squad = settings(64, 8, 16)
  graph = graph_windows(questions, contexts, squad, TEMPLATES[0])
  changed = [c.copy() for c in contexts]
  changed[1][300] += 1
  with pytest.raises(AssertionError, match="input_word_ids"):
    assert_same(host_windows(questions, changed, squad, TEMPLATES[0]), graph)
  with pytest.raises(AssertionError):
    assert_same(host_windows(questions, contexts, settings(64, 9, 16),
                             TEMPLATES[0]), graph)


# ------------------------------------------------------------------ answers
def top_k_rows(seed):
  rng = np.random.RandomState(seed)
  rows = np.round(rng.standard_normal((40, 64)) * 2) / 2     # many equal values
  rows[0] = 0.0
  rows[1, ::2] = -0.0                                       # -0.0 == 0.0
  rows[2, 10:] = squad_windows.LOGIT_PAD_VALUE
  return rows.astype(np.float32)


@pytest.mark.parametrize("k", [1, 5, 20, 64])
def test_top_k_breaks_ties_as_tf(k):
  rows = top_k_rows(k)
  values, pos = host_squad._top_k(rows, k)
  graph = tf.math.top_k(rows, k)
  assert_same(dict(values=values, pos=pos),
              dict(values=graph.values.numpy(), pos=graph.indices.numpy()))
  assert (pos[0] == np.arange(k)).all()     # all equal: the lowest positions


def logits(windows, seed, kind):
  """Random float32 [w, seq] logits; `coarse`: on a grid of 0.5 (exact ties
  at the n-best cut and among span scores); `near_pad`: around the pad
  value, so pad positions compete with real ones."""
  rng = np.random.RandomState(seed)
  shape = windows["input_word_ids"].shape
  out = []
  for _ in range(2):
    x = rng.standard_normal(shape) * 3
    if kind == "coarse":
      x = np.round(x * 2) / 2
    elif kind == "near_pad":
      x = squad_windows.LOGIT_PAD_VALUE + np.round(x) / 2
    out.append(x.astype(np.float32))
  return out


def span_cases():
  cases = []
  for seq, stride, query in [(64, 8, 16), (128, 48, 32), (384, 128, 64)]:
    for kind in ("normal", "coarse", "near_pad"):
      cases.append((seq, stride, query, kind))
  return cases


@pytest.mark.parametrize("seq,stride,query,kind", span_cases())
def test_best_spans_equal_the_graphs(seq, stride, query, kind):
  questions, contexts = random_texts(seq + 1, n=10)
  windows = host_windows(questions, contexts, settings(seq, stride, query),
                         TEMPLATES[0])
  start, end = logits(windows, seq, kind)
  q = len(questions)
  rows = int((windows["window_offset"] + windows["window_length"]).max()) + 1
  answered = split = 0
  for cut in sorted({seq, rows, (rows + seq) // 2}):
    for answers in (dict(), dict(n_best_size=3, max_answer_length=2),
                    dict(n_best_size=1), dict(n_best_size=150)):
      squad = settings(seq, stride, query, **answers)
      host = host_squad.best_spans(start[:, :cut], end[:, :cut], windows, q,
                                   squad)
      assert_same(host, graph_spans(start[:, :cut], end[:, :cut], windows, q,
                                    squad))
      answered += int(host["answered"].sum())
      # SQuAD 2.0: thresholds below and above every question's odds, 0, and
      # the median of the found questions' (one exactly on it).
      odds = (host["null_score"].astype(np.float64)
              - host["score"].astype(np.float64))[host["found"]]
      median = [float(np.median(odds))] if len(odds) >= 3 else []
      for threshold in [-1e9, 0.0, 1e9] + median:
        v2 = squad.replace(version_2=True, null_score_diff_threshold=threshold)
        host = host_squad.best_spans(start[:, :cut], end[:, :cut], windows, q,
                                     v2)
        assert_same(host, graph_spans(start[:, :cut], end[:, :cut], windows, q,
                                      v2))
        if threshold in median:
          assert 0 < host["answered"].sum() < host["found"].sum()
          split += 1
  assert answered > 0 and split > 0


def test_best_spans_of_no_questions():
  squad = settings(64, 8, 16)
  windows = host_windows([], [], squad, TEMPLATES[0])
  empty = np.zeros((0, 32), np.float32)
  host = host_squad.best_spans(empty, empty, windows, 0, squad)
  assert_same(host, graph_spans(empty, empty, windows, 0, squad))
  assert all(v.shape == (0,) for v in host.values())


def test_logits_cut_too_short_fail_like_the_graph():
  questions, contexts = random_texts(2, n=3)
  squad = settings(64, 8, 16)
  windows = host_windows(questions, contexts, squad, TEMPLATES[0])
  start, end = logits(windows, 0, "normal")
  rows = int((windows["window_offset"] + windows["window_length"]).max()) + 1
  with pytest.raises(tf.errors.InvalidArgumentError, match="cut shorter"):
    graph_spans(start[:, :rows - 1], end[:, :rows - 1], windows, 3, squad)
  with pytest.raises(ValueError, match="cut shorter"):
    host_squad.best_spans(start[:, :rows - 1], end[:, :rows - 1], windows, 3,
                          squad)


def test_a_changed_logit_moves_the_best_span():
  # Negative control: a start and an end logit raised at one position of a
  # one-window question, the best span moves there; the comparison with the
  # old answer fails.
  questions, contexts = random_texts(7, n=6)
  questions[0], contexts[0] = np.arange(5) + 1000, np.arange(30) + 2000
  squad = settings(64, 8, 16)
  windows = host_windows(questions, contexts, squad, TEMPLATES[0])
  assert windows["window_question"].tolist().count(0) == 1
  start, end = logits(windows, 1, "normal")
  before = host_squad.best_spans(start, end, windows, 6, squad)
  assert_same(before, graph_spans(start, end, windows, 6, squad))
  piece = 17 if int(before["piece_start"][0]) != 17 else 18
  pos = windows["window_offset"][0] + piece
  changed_start, changed_end = start.copy(), end.copy()
  changed_start[0, pos] = changed_end[0, pos] = 50.0
  after = host_squad.best_spans(changed_start, changed_end, windows, 6, squad)
  assert (int(after["piece_start"][0]), int(after["piece_end"][0])) == (
      piece, piece)
  with pytest.raises(AssertionError, match="piece_start"):
    assert_same(after, graph_spans(start, end, windows, 6, squad))
  assert_same(after, graph_spans(changed_start, changed_end, windows, 6, squad))


def byte_offsets(contexts, seed):
  rng = np.random.RandomState(seed)
  starts, ends = [], []
  for c in contexts:
    s = np.cumsum(rng.randint(1, 8, len(c))).astype(np.int64)
    starts.append(s)
    ends.append(s + rng.randint(1, 4, len(c)))
  return starts, ends


def test_answer_byte_offsets_equal_the_graphs():
  questions, contexts = random_texts(9, n=12)
  squad = settings(64, 8, 16)
  windows = host_windows(questions, contexts, squad, TEMPLATES[0])
  start, end = logits(windows, 3, "normal")
  spans = host_squad.best_spans(start, end, windows, len(questions), squad)
  odds = (spans["null_score"].astype(np.float64)
          - spans["score"].astype(np.float64))[spans["found"]]
  squad = squad.replace(version_2=True,
                        null_score_diff_threshold=float(np.median(odds)))
  spans = host_squad.best_spans(start, end, windows, len(questions), squad)
  assert 0 < spans["answered"].sum() < len(questions)
  starts, ends = byte_offsets(contexts, 0)
  host = host_squad.answer_byte_offsets(spans, starts, ends)
  graph = squad_windows.answer_byte_offsets(
      {k: tf.constant(v) for k, v in spans.items()}, ragged(starts),
      ragged(ends))
  assert_same(dict(enumerate(host)), {i: t.numpy() for i, t in enumerate(graph)})
  assert (host[1][~spans["answered"]] == 0).all()
  assert (host[1][spans["answered"]] > host[0][spans["answered"]]).all()


# ------------------------------------------------------------ real SQuAD text
@pytest.fixture(scope="module")
def dev():
  return read_squad(shared_data("squad", "dev-v1.1.json"))[::400]


def test_real_text_answers_equal_the_graphs(tokenizer, dev):
  questions = tokenizer.tokenize([e.question for e in dev])
  tokenized = tokenizer.tokenize_with_offsets([e.context for e in dev])
  contexts = [ids for ids, _, _ in tokenized]
  assert max(len(c) for c in contexts) > 300
  special = tokenizer.get_special_tokens_dict()
  squad = settings(128, 48, 32)
  graph = squad_windows.window_inputs(
      tokenizer.layer.tokenize(tf.constant([e.question for e in dev])),
      tokenizer.layer.tokenize(tf.constant([e.context for e in dev])), squad,
      special["start_of_sequence_id"], special["end_of_segment_id"])
  windows = host_squad.window_inputs(
      questions, contexts, squad, special["start_of_sequence_id"],
      special["end_of_segment_id"])
  assert_same(windows, {k: v.numpy() for k, v in graph.items()})
  assert len(windows["window_question"]) >= 2 * len(dev)
  start, end = logits(windows, 4, "coarse")
  spans = host_squad.best_spans(start, end, windows, len(dev), squad)
  assert_same(spans, graph_spans(start, end, windows, len(dev), squad))
  b_start, b_end = host_squad.answer_byte_offsets(
      spans, [s for _, s, _ in tokenized], [e for _, _, e in tokenized])
  texts = tf.constant([e.context for e in dev])
  g_start, g_end = squad_windows.answer_byte_offsets(
      {k: tf.constant(v) for k, v in spans.items()},
      ragged([s for _, s, _ in tokenized]), ragged([e for _, _, e in tokenized]))
  assert_same(dict(s=b_start, e=b_end), dict(s=g_start.numpy(), e=g_end.numpy()))
  answers = [e.context.encode("utf-8")[s:t].decode("utf-8")
             for e, s, t in zip(dev, b_start, b_end)]
  graph_answers = tf.strings.substr(texts, g_start, g_end - g_start,
                                    unit="BYTE").numpy()
  assert answers == [a.decode("utf-8") for a in graph_answers]
  assert all(answers)


# ------------------------------------------------------------ no TensorFlow
def test_the_host_path_loads_no_tensorflow():
  code = textwrap.dedent("""
      import sys, types
      import numpy as np
      from bert.serving import host_squad
      squad = types.SimpleNamespace(
          seq_length=64, doc_stride=8, max_query_length=16, n_best_size=20,
          max_answer_length=30, version_2=True, null_score_diff_threshold=0.0)
      w = host_squad.window_inputs([np.arange(5)], [np.arange(100)], squad,
                                   101, 102)
      logits = np.random.RandomState(0).standard_normal(
          w["input_word_ids"].shape).astype(np.float32)
      spans = host_squad.best_spans(logits, logits, w, 1, squad)
      host_squad.answer_byte_offsets(spans, [np.arange(100)],
                                     [np.arange(100) + 1])
      assert host_squad.__file__.startswith(sys.argv[1]), host_squad.__file__
      print(int(spans["found"].sum()),
            sorted(m for m in sys.modules if "tensorflow" in m))
      """)
  env = dict(os.environ, PYTHONPATH=REPO_ROOT + os.pathsep
             + os.environ.get("PYTHONPATH", ""))
  done = subprocess.run([sys.executable, "-c", code, REPO_ROOT], cwd=REPO_ROOT,
                        env=env, capture_output=True, text=True, timeout=120)
  assert done.returncode == 0, done.stderr[-3000:]
  assert done.stdout.split() == ["1", "[]"], done.stdout
