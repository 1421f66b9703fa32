"""NER: CoNLL reading, piece alignment, seqeval metrics, training, predict."""


import pytest

from bert.data import ner_data
from bert.data.classification_data import DataError
from bert.data.tokenization import Tokenizer
from bert.tasks.configs import (EncoderSource, FinetuningInputs, ScheduleConfig,
                                TaggingData)
from bert.tasks.token_classification import TokenClassificationTask, entity_metrics
from bert.training import OptimizerConfig, RuntimeConfig, run_experiment
from conftest import shared_data, small_config, vocab
from _tasks import write_entities_conll


def test_wnut17_files_read_with_the_published_counts():
  counts = {"wnut17train.conll": (3394, 62730, 1975),
            "emerging.dev.conll": (1009, 15733, 836),
            "emerging.test.annotated": (1287, 23394, 1079)}
  for name, (sentences, tokens, entities) in counts.items():
    got = ner_data.read_conll(shared_data("ner", "wnut17", name))
    assert len(got) == sentences
    assert sum(len(s.words) for s in got) == tokens
    assert sum(t.startswith("B-") for s in got for t in s.tags) == entities
  labels = ner_data.label_list(ner_data.read_conll(
      shared_data("ner", "wnut17", "wnut17train.conll")))
  assert len(labels) == 13 and labels[0] == "O"
  assert labels[1:3] == ["B-corporation", "I-corporation"]


def test_conll_layouts_and_errors(tmp_path):
  path = tmp_path / "c.conll"
  path.write_text("-DOCSTART- -X- -X- O\n\nEU NNP B-NP B-ORG\nrejects VBZ B-VP O\n"
                  " \t\nPeter NNP B-NP B-PER\n")
  sentences = ner_data.read_conll(str(path))
  assert [s.words for s in sentences] == [["EU", "rejects"], ["Peter"]]
  assert [s.tags for s in sentences] == [["B-ORG", "O"], ["B-PER"]]
  assert sentences[1].line == 6
  bad = tmp_path / "bad.conll"
  bad.write_text("EU\tB-ORG\nrejects\tO\tEXTRA\n")
  with pytest.raises(DataError, match=r"bad.conll:2: 3 column\(s\), expected 2"):
    ner_data.read_conll(str(bad))
  with pytest.raises(DataError, match=r"one.conll:1: tag 'B-XYZ' is not one of"):
    one = tmp_path / "one.conll"
    one.write_text("word\tB-XYZ\n")
    ner_data.check_tags(ner_data.read_conll(str(one)), ["O", "B-PER"], str(one))


def test_alignment_labels_first_pieces_and_splits_long_sentences():
  tok = Tokenizer(vocab())
  s = ner_data.Sentence(["Hugging", "Face", "rocks", "\u200b"], ["B-corp", "I-corp",
                                                                   "O", "O"], 1)
  labels = ["O", "B-corp", "I-corp"]
  f = ner_data.encode_sentences([s], tok, 16, labels)
  pieces = tok.convert_ids_to_tokens(f["input_word_ids"][0][:f["input_mask"][0].sum()])
  assert pieces == ["[CLS]", "hugging", "face", "rocks", "[UNK]", "[SEP]"]
  assert list(f["label_ids"][0][:6]) == [-1, 1, 2, 0, 0, -1]
  word = "xylophonists"
  n = len(tok.tokenize([word])[0])
  assert n >= 2
  long = ner_data.Sentence([word] * 9, ["O"] * 9, 1)
  f = ner_data.encode_sentences([s, long], tok, 8, labels)   # 6 pieces per row
  per_row = 6 // n
  rows = -(-9 // per_row)
  assert list(f["sentence_id"]) == [0] + [1] * rows
  assert list(f["first_word"][1:]) == list(range(0, 9, per_row))
  assert (f["input_mask"].sum(1) <= 8).all()
  predicted = f["label_ids"].clip(0)
  words = ner_data.word_predictions([s, long], f, predicted, labels)
  assert words == [["B-corp", "I-corp", "O", "O"], ["O"] * 9]


def test_entity_metrics_follow_conll_semantics():
  gold = [["B-PER", "I-PER", "O", "B-LOC"], ["B-ORG", "O"]]
  # A partial PER (missing its I-) is wrong; LOC right; ORG mistyped.
  pred = [["B-PER", "O", "O", "B-LOC"], ["B-PER", "O"]]
  m = entity_metrics(gold, pred)
  assert m["precision"] == pytest.approx(1 / 3)
  assert m["recall"] == pytest.approx(1 / 3)
  assert m["f1"] == pytest.approx(1 / 3)
  assert entity_metrics(gold, gold)["f1"] == 1.0


@pytest.mark.heavy
def test_token_classification_learns_and_predicts(tmp_path):
  task = TokenClassificationTask(
      data=TaggingData(train_file=write_entities_conll(tmp_path / "train.conll", 200, 0),
                       eval_file=write_entities_conll(tmp_path / "dev.conll", 60, 1),
                       predict_file=write_entities_conll(tmp_path / "test.conll", 20, 2)),
      encoder=EncoderSource(
          bert_config=small_config(vocab_size=30522, max_position_embeddings=32),
          vocab_file=vocab(), lower_case=True),
      inputs=FinetuningInputs(seq_length=32, global_batch_size=16),
      schedule=ScheduleConfig(num_train_epochs=5))
  assert task.labels == ["O", "B-location", "B-person", "I-person"]
  _, results = run_experiment(task, str(tmp_path / "model"), "train_and_eval",
                           RuntimeConfig(steps_per_loop=20, strategy="one_device"),
                           OptimizerConfig(learning_rate=3e-3, warmup_fraction=0.1),
                           log_fn=None)
  assert results["f1"] > 0.9, results
  run_experiment(task, str(tmp_path / "model"), "predict",
                 RuntimeConfig(strategy="one_device"), log_fn=None)
  out = (tmp_path / "model" / "predictions.conll").read_text().split("\n\n")
  gold = (tmp_path / "test.conll").read_text().split("\n\n")
  assert len([b for b in out if b.strip()]) == 20
  first = [l.split("\t") for l in out[0].splitlines()]
  assert [r[:2] for r in first] == [l.split("\t") for l in gold[0].splitlines()]
