"""SQuAD: reading, windows, post-processing rules, official EM/F1, task run."""

import json

import numpy as np
import pytest

from bert.data.squad_config import SquadConfig
from bert.data.squad_examples import (
    SquadExample, article_titles, encode_examples, read_squad, split_articles)
from bert.data.squad_eval import f1_score, postprocess, squad_metrics
from bert.data.classification_data import DataError
from bert.tasks import QuestionAnsweringTask
from bert.tasks.configs import EncoderSource, FinetuningInputs, SquadData
from bert.training import OptimizerConfig, RuntimeConfig, run_experiment
from conftest import shared_data, small_config, vocab


def ex(qid, answers, impossible=False, context="", question="q"):
  return SquadExample(qid, question, context, [(a, 0) for a in answers],
                      impossible)


def test_em_f1_by_hand_v1():
  examples = [ex("1", ["The Eiffel Tower", "Eiffel Tower"]),
              ex("2", ["Denver Broncos"]), ex("3", ["1990", "in 1990"]),
              ex("4", ["a cat"])]
  predictions = {"1": "eiffel tower!", "2": "the Broncos", "3": "1991",
                 "4": "cat and dog"}
  m = squad_metrics(examples, predictions)
  assert m["exact_match"] == pytest.approx(25.0)
  # F1: 1, 2/3 (P=1, R=1/2), 0, 1/2 (P=1/3, R=1)
  assert m["f1"] == pytest.approx(100 * (1 + 2 / 3 + 0 + 0.5) / 4)


def test_em_f1_by_hand_v2_with_threshold():
  examples = [ex("a", ["Paris"]), ex("b", [], impossible=True),
              ex("c", [], impossible=True)]
  predictions = {"a": "Paris", "b": "", "c": "London"}
  null_odds = {"a": -3.0, "b": 2.0, "c": 1.0}
  m = squad_metrics(examples, predictions, null_odds)
  assert m["exact_match"] == pytest.approx(200 / 3)
  assert m["f1"] == pytest.approx(200 / 3)
  # Threshold 0 (no-answer above it): a kept, c -> "" right, b right: 100%.
  assert m["best_exact_match"] == pytest.approx(100.0)
  assert m["best_exact_match_threshold"] == pytest.approx(-3.0)
  # v1.1's script scores an empty gold as 0 even for an empty prediction.
  assert f1_score("", "the", version_2=False) == 0.0
  assert f1_score("", "the", version_2=True) == 1.0


def test_real_dev_file_and_article_split():
  path = shared_data("squad", "dev-v1.1.json")
  examples = read_squad(path)
  assert len(examples) == 10570
  titles = article_titles(path)
  train, held_out = split_articles(titles, 0.8, seed=3)
  assert len(titles) == 48 and len(train) == 38 and len(held_out) == 10
  assert not set(train) & set(held_out)
  a = read_squad(path, train)
  b = read_squad(path, held_out)
  assert len(a) + len(b) == 10570
  assert not {e.context for e in a} & {e.context for e in b}


def test_answer_start_mismatch_is_named(tmp_path):
  data = {"data": [{"title": "T", "paragraphs": [{"context": "Paris is big.",
                    "qas": [{"id": "q7", "question": "What?",
                             "answers": [{"text": "Paris", "answer_start": 3}]}]}]}]}
  path = tmp_path / "bad.json"
  path.write_text(json.dumps(data))
  with pytest.raises(DataError, match=r"bad.json: question q7: answer 'Paris' "
                     r"is not at answer_start 3"):
    read_squad(str(path))


def logits_for(arrays, meta, spans_scores):
  """Start/end logits: -10 everywhere, given scores at given positions."""
  n, seq = arrays["input_word_ids"].shape
  start, end = np.full((n, seq), -10.0), np.full((n, seq), -10.0)
  for f, s, e, score in spans_scores:
    start[f, s] = score
    end[f, e] = score
  return start, end


def test_answers_cut_from_original_text_never_from_question_or_sep(tokenizer):
  context = "The  Quick-Brown   FOX jumped over Émile's fence."
  e = SquadExample("x", "Who jumped?", context, [("Quick-Brown   FOX", 5)])
  arrays, meta = encode_examples(
      [e], tokenizer, SquadConfig(seq_length=64, doc_stride=16,
                                  max_query_length=16), training=True)
  assert len(meta) == 1
  m = meta[0]
  s, t = int(arrays["start_positions"][0]), int(arrays["end_positions"][0])
  assert context[m["char_spans"][s][0]:m["char_spans"][t][1]] == "Quick-Brown   FOX"
  # The highest scores sit on [CLS], a question piece and the [SEP]s: ignored.
  sep = int(arrays["input_mask"][0].sum()) - 1
  start, end = logits_for(arrays, meta, [(0, 1, 2, 50.0), (0, sep, sep, 60.0),
                                         (0, s, t, 5.0)])
  start[0, 0] = end[0, 0] = 70.0
  predictions, nbest, _ = postprocess([e], meta, start, end)
  assert predictions["x"] == "Quick-Brown   FOX"
  assert all(b["text"] in context for b in nbest["x"])
  assert abs(sum(b["probability"] for b in nbest["x"]) - 1) < 1e-6
  # Every scorable position is a context piece after the question.
  assert min(m["char_spans"]) == len(tokenizer.tokenize(["Who jumped?"])[0]) + 2


def test_doc_stride_picks_the_best_span_across_windows(tokenizer):
  # 60 distinct whole-word vocab entries: one piece each.
  words = [t for t in tokenizer.vocab[2000:2200] if t.isalpha()][:60]
  assert len(set(words)) == 60
  context = " ".join(words)
  where = lambda i: len(" ".join(words[:i])) + (1 if i else 0)
  e = SquadExample("y", "which?", context, [(words[50], where(50))])
  arrays, meta = encode_examples(
      [e], tokenizer, SquadConfig(seq_length=32, doc_stride=8,
                                  max_query_length=8), training=True)
  assert len(meta) > 3
  # Windows overlap; each piece is scored only in its max-context window.
  owners = {}
  for f, m in enumerate(meta):
    for pos, (c0, _) in m["char_spans"].items():
      if m["max_context"][pos]:
        assert c0 not in owners
        owners[c0] = (f, pos)
  assert len(owners) == len({c for m in meta for c, _ in m["char_spans"].values()})
  # Two candidates in different windows: the higher-scored one wins.
  w10 = owners[where(10)]
  w50 = owners[where(50)]
  assert w10[0] != w50[0]
  start, end = logits_for(arrays, meta, [(w10[0], w10[1], w10[1], 3.0),
                                         (w50[0], w50[1], w50[1], 4.0)])
  assert postprocess([e], meta, start, end)[0]["y"] == words[50]
  start, end = logits_for(arrays, meta, [(w10[0], w10[1], w10[1], 5.0),
                                         (w50[0], w50[1], w50[1], 4.0)])
  assert postprocess([e], meta, start, end)[0]["y"] == words[10]
  # A training window that holds the whole answer labels it; others [CLS].
  labelled = [f for f in range(len(meta)) if arrays["start_positions"][f] > 0]
  assert labelled and all(
      meta[f]["char_spans"][int(arrays["start_positions"][f])][0] == where(50)
      for f in labelled)


def test_task_trains_evaluates_and_writes_predictions(tmp_path):
  path = shared_data("squad", "dev-v1.1.json")
  task = QuestionAnsweringTask(
      data=SquadData(train_file=path, eval_file=path, train_fraction=0.96,
                     doc_stride=64, max_query_length=32),
      encoder=EncoderSource(
          bert_config=small_config(vocab_size=30522, max_position_embeddings=128),
          vocab_file=vocab(), lower_case=True),
      inputs=FinetuningInputs(seq_length=128, global_batch_size=8,
                              eval_batch_size=64, seed=1))
  held_out = task.examples("eval")
  assert 0 < len(held_out) < 10570 * 0.1
  _, results = run_experiment(task, str(tmp_path), "train_and_eval",
                           RuntimeConfig(train_steps=4, steps_per_loop=4,
                                         strategy="one_device"),
                           OptimizerConfig(learning_rate=1e-3), log_fn=None)
  assert 0 <= results["exact_match"] <= results["f1"] <= 100
  run_experiment(task, str(tmp_path), "predict",
                 RuntimeConfig(strategy="one_device"), log_fn=None)
  predictions = json.loads((tmp_path / "predictions.json").read_text())
  nbest = json.loads((tmp_path / "nbest_predictions.json").read_text())
  assert set(predictions) == {e.qas_id for e in held_out} == set(nbest)
  contexts = {e.qas_id: e.context for e in held_out}
  assert all(p in contexts[q] for q, p in predictions.items())
  assert squad_metrics(held_out, predictions)["f1"] == pytest.approx(results["f1"])
  # The model run_experiment returns answers raw (question, context) pairs
  # through the same windows and post-processing: the same answers.
  model, _ = run_experiment(task, str(tmp_path), "predict",
                            RuntimeConfig(strategy="one_device"), log_fn=None)
  got = model.predict(([e.question for e in held_out],
                       [e.context for e in held_out]))
  assert got["answers"] == [predictions[e.qas_id] for e in held_out]
  for e, answer, start, end in zip(held_out, got["answers"], got["start"],
                                   got["end"]):
    assert e.context[start:end] == answer
