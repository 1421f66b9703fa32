"""Fill-mask (`BertMaskedLM`) against transformers' fill-mask pipeline on the
same weights: random MiniLM-sized and BERT-Tiny BERTs with MiniLM's
vocabulary, and tiny RoBERTa and ALBERT with their WikiText-2 tokenizers.
The same top-k tokens, token strings and sequences, scores within 1e-5;
several masks per text; bad inputs are one line naming the text. And the
sentence-pair heads (BERT's next sentence, ALBERT's sentence order) as
classifiers of raw pairs."""

import numpy as np
import pytest
import tensorflow as tf
import torch
import transformers

from bert.data.errors import DataError
from bert.models import BertClassifier, BertMaskedLM
from conftest import one_line
from family import family_folder, hf_model, hf_tokenizer

TEXTS = {
    "[MASK]": ["The [MASK] sat on the mat.", "Paris is the [MASK] of France.",
               "It was a [MASK] day, and we [MASK] outside."],
    "<mask>": ["The<mask> sat on the mat.", "Paris is the <mask> of France.",
               "It was a <mask> day, and we <mask> outside."],
}
SHAPES = {
    "minilm_sized": dict(hidden_size=384, num_hidden_layers=6,
                         num_attention_heads=12, intermediate_size=1536,
                         max_position_embeddings=512),
    "bert_tiny": dict(hidden_size=128, num_hidden_layers=2,
                      num_attention_heads=2, intermediate_size=512,
                      max_position_embeddings=512),
}


def pipeline_answers(folder, texts, top_k):
  fill = transformers.pipeline(
      "fill-mask", model=transformers.AutoModelForMaskedLM.from_pretrained(
          folder), tokenizer=transformers.AutoTokenizer.from_pretrained(folder),
      device="cpu", top_k=top_k)
  out = []
  for text in texts:
    got = fill(text)
    out.append([got] if isinstance(got[0], dict) else got)   # per mask
  return out


def assert_same(ours, theirs):
  assert len(ours) == len(theirs)
  for text_ours, text_theirs in zip(ours, theirs):
    assert len(text_ours) == len(text_theirs)
    for mine, want in zip(text_ours, text_theirs):
      assert [m["token"] for m in mine] == [w["token"] for w in want]
      assert [m["token_str"] for m in mine] == [w["token_str"] for w in want]
      assert [m["sequence"] for m in mine] == [w["sequence"] for w in want]
      np.testing.assert_allclose([m["score"] for m in mine],
                                 [w["score"] for w in want], atol=1e-5)


@pytest.mark.parametrize("shape", [
    pytest.param("minilm_sized", marks=pytest.mark.slow), "bert_tiny"])
def test_bert_fill_mask_equals_the_pipeline(shape, family_root, tmp_path):
  tokenizer = hf_tokenizer("bert", family_root)
  model = hf_model("bert", dict(SHAPES[shape], vocab_size=len(tokenizer)))
  folder = str(tmp_path / shape)
  model.save_pretrained(folder)
  tokenizer.save_pretrained(folder)
  ours = BertMaskedLM.from_pretrained(folder, seq_length=32)
  texts = TEXTS["[MASK]"]
  assert_same(ours.predict(texts), pipeline_answers(folder, texts, 5))
  if shape == "bert_tiny":
    assert_served_same(ours, texts, tmp_path)


@pytest.mark.parametrize("family", ["roberta", "albert"])
def test_family_fill_mask_equals_the_pipeline(family, family_root, tmp_path):
  folder = family_folder(family, family_root)
  ours = BertMaskedLM.from_pretrained(folder, seq_length=32,
                                      preprocessor_args=dict(top_k=3))
  texts = TEXTS["<mask>" if family == "roberta" else "[MASK]"]
  theirs = pipeline_answers(folder, texts, 3)   # the reference, run once
  assert_same(ours.predict(texts), theirs)
  # The same answers after a save and load.
  ours.save(str(tmp_path / "saved"))
  import tf_keras  # pylint: disable=g-import-not-at-top
  loaded = tf_keras.models.load_model(str(tmp_path / "saved"))
  assert_same(loaded.predict(texts), theirs)
  assert_served_same(ours, texts, tmp_path)


def assert_served_same(model, texts, tmp_path):
  """The serving export's tokens, strings and scores are `predict`'s."""
  model.export(str(tmp_path / "served"))
  served = tf.saved_model.load(str(tmp_path / "served")).signatures[
      "serving_default"](text=tf.constant(texts + ["no mask here"]))
  want = model.predict(texts)
  for i, masks in enumerate(want):
    assert served["mask_count"][i] == len(masks)
    for m, row in enumerate(masks):
      assert list(served["token"][i, m].numpy()) == [r["token"] for r in row]
      assert [s.decode() for s in served["token_str"][i, m].numpy()] == [
          r["token_str"] for r in row]
      np.testing.assert_allclose(served["score"][i, m],
                                 [r["score"] for r in row], atol=1e-5)
  assert served["mask_count"][len(texts)] == 0
  assert np.all(served["token"][len(texts)].numpy() == -1)


def test_bad_inputs_are_one_line(family_root):
  ours = BertMaskedLM.from_pretrained(family_folder("roberta", family_root),
                                      seq_length=16)
  with pytest.raises(DataError) as e:
    ours.predict(["a <mask> here", "no mask in this one"])
  one_line(e, "x[1]", "has no <mask> token")
  with pytest.raises(DataError) as e:
    ours.predict(["a [MASK] of BERT's"])       # another family's mask token
  one_line(e, "x[0]", "<mask>")
  with pytest.raises(DataError) as e:
    ours.predict(["word " * 40 + "<mask>"])
  one_line(e, "x[0]", "past seq_length=16")


@pytest.mark.parametrize("family", ["bert", "albert"])
def test_next_sentence_and_sentence_order_equal_transformers(
    family, family_root, tmp_path):
  """`BertClassifier.next_sentence`: the checkpoint's NSP (BERT) or SOP
  (ALBERT) head on (a, b) pairs gives transformers' probabilities; its
  serving export answers the same from raw strings."""
  folder = str(tmp_path / family)
  tokenizer = hf_tokenizer(family, family_root)
  model = hf_model(family, dict(hidden_size=64, num_hidden_layers=2,
                                num_attention_heads=4, intermediate_size=96,
                                max_position_embeddings=64,
                                vocab_size=len(tokenizer)))
  model.save_pretrained(folder)
  tokenizer.save_pretrained(folder)
  a = ["The cat sat on the mat.", "Paris is in France.", "It rained."]
  b = ["It was asleep.", "Bananas are yellow.", "The streets were wet."]
  ours = BertClassifier.next_sentence(folder, seq_length=32)
  got = ours.predict((a, b))
  kwargs = dict(return_token_type_ids=True) if family == "albert" else {}
  batch = tokenizer(a, b, padding=True, return_tensors="pt", **kwargs)
  with torch.no_grad():
    out = model(**batch)
  logits = (out.sop_logits if family == "albert"
            else out.seq_relationship_logits)
  np.testing.assert_allclose(got["probabilities"],
                             torch.softmax(logits, -1).numpy(), atol=1e-5)
  names = BertClassifier.SENTENCE_TASK_LABELS[
      "sop" if family == "albert" else "nsp"]
  assert list(got["labels"]) == [names[i] for i in
                                 got["probabilities"].argmax(-1)]
  ours.export(str(tmp_path / "served"))
  served = tf.saved_model.load(str(tmp_path / "served")).signatures[
      "serving_default"](text=tf.constant(a), text_b=tf.constant(b))
  np.testing.assert_allclose(served["probabilities"], got["probabilities"],
                             atol=1e-5)


def test_a_family_without_a_sentence_head_is_one_line(family_root):
  with pytest.raises(ValueError) as e:
    BertClassifier.next_sentence(family_folder("roberta", family_root))
  one_line(e, "roberta_hf", "no sentence head")


def test_a_head_tied_to_another_encoder_is_refused():
  from bert import BertEncoder  # pylint: disable=g-import-not-at-top
  from bert.models import BertPretrainer  # pylint: disable=g-import-not-at-top
  from bert.networks.pretraining_heads import build_pretraining_heads  # pylint: disable=g-import-not-at-top
  from conftest import small_config  # pylint: disable=g-import-not-at-top
  encoder, other = BertEncoder(small_config()), BertEncoder(small_config())
  head, sentence = build_pretraining_heads(other)
  for make in (lambda: BertMaskedLM(encoder, masked_lm=head),
               lambda: BertPretrainer(encoder, masked_lm=head,
                                      next_sentence=sentence)):
    with pytest.raises(ValueError, match="must be tied to this encoder"):
      make()
  own, own_sentence = build_pretraining_heads(encoder)   # the control
  BertMaskedLM(encoder, masked_lm=own)
  BertPretrainer(encoder, masked_lm=own, next_sentence=own_sentence)
