"""Every numeric (and typed) field of every config class is checked where the
class is defined: a wrong value is a ConfigError naming `Class.field` and the
value, at construction, never a failure deep inside a run."""

import os

import pytest

from bert import BertConfig
from bert.data.dynamic_masking import DynamicMasker
from bert.data.pretraining_data import PretrainingDataConfig
from bert.tasks import (ClassificationTask, MultipleChoiceTask, PretrainingTask,
                        QuestionAnsweringTask, TokenClassificationTask)
from bert.training import OptimizerConfig, RuntimeConfig
from bert.validation import (ConfigError, check_float, check_int,
                             gin_error_line)
from conftest import minilm_dir, small_config

VOCAB = os.path.join(minilm_dir(), "vocab.txt")
FINETUNING = dict(bert_config=small_config(vocab_size=30522),
                  vocab_file=VOCAB, do_lower_case=True, seq_length=32)
SQUAD = dict(FINETUNING, bert_config=small_config(
    vocab_size=30522, max_position_embeddings=128), seq_length=128)

# (class, valid keyword arguments, bad field, bad value)
CASES = [
    (BertConfig, {}, "hidden_size", 0),
    (BertConfig, {}, "num_hidden_layers", 2.5),
    (BertConfig, {}, "hidden_dropout_prob", 1.0),
    (BertConfig, {}, "initializer_range", float("nan")),
    (BertConfig, {}, "layer_norm_epsilon", -1e-12),
    (BertConfig, {}, "hidden_act", "swish2"),
    (BertConfig, {}, "type_vocab_size", True),
    (RuntimeConfig, {}, "train_steps", 0),
    (RuntimeConfig, {}, "steps_per_loop", "100"),
    (RuntimeConfig, {}, "checkpoint_interval", -1),
    (RuntimeConfig, {}, "max_checkpoints", 0),
    (RuntimeConfig, {}, "summary_interval", 0),
    (RuntimeConfig, {}, "eval_steps", 0),
    (RuntimeConfig, {}, "eval_interval", -5),
    (RuntimeConfig, {}, "grad_accumulation_steps", 0),
    (RuntimeConfig, {}, "max_skipped_steps", 0),
    (RuntimeConfig, {}, "seed", -1),
    (RuntimeConfig, {}, "jit_compile", "yes"),
    (RuntimeConfig, {}, "mixed_precision", "float16"),
    (OptimizerConfig, {}, "learning_rate", 0.0),
    (OptimizerConfig, {}, "num_train_steps", 0),
    (OptimizerConfig, dict(num_train_steps=10), "warmup_steps", 11),
    (OptimizerConfig, {}, "warmup_fraction", 1.5),
    (OptimizerConfig, {}, "end_learning_rate", -1.0),
    (OptimizerConfig, {}, "power", 0.0),
    (OptimizerConfig, {}, "weight_decay", -0.01),
    (OptimizerConfig, {}, "beta_1", 1.0),
    (OptimizerConfig, {}, "beta_2", -0.1),
    (OptimizerConfig, {}, "epsilon", 0.0),
    (OptimizerConfig, {}, "clip_norm", -1.0),
    (OptimizerConfig, {}, "optimizer", "sgd"),
    (PretrainingDataConfig, {}, "max_seq_length", 4),
    (PretrainingDataConfig, {}, "max_predictions_per_seq", 0),
    (PretrainingDataConfig, {}, "masked_lm_prob", 0.0),
    (PretrainingDataConfig, {}, "short_seq_prob", 1.5),
    (PretrainingDataConfig, {}, "dupe_factor", 0),
    (PretrainingDataConfig, {}, "random_seed", "x"),
    (PretrainingDataConfig, {}, "shuffle_buffer", 0),
    (PretrainingTask, {}, "seq_length", 0),
    (PretrainingTask, {}, "max_predictions_per_seq", -1),
    (PretrainingTask, {}, "global_batch_size", 0),
    (PretrainingTask, {}, "eval_batch_size", 0),
    (PretrainingTask, {}, "shuffle_buffer", 0),
    (PretrainingTask, {}, "masked_lm_prob", 1.5),
    (PretrainingTask, {}, "seed", -3),
    (ClassificationTask, dict(FINETUNING, glue_task="mrpc"), "global_batch_size", 0),
    (ClassificationTask, dict(FINETUNING, glue_task="mrpc"), "eval_batch_size", -8),
    (ClassificationTask, dict(FINETUNING, glue_task="mrpc"), "num_train_epochs", 0),
    (ClassificationTask, dict(FINETUNING, glue_task="mrpc"), "dropout_rate", 1.0),
    (ClassificationTask, dict(FINETUNING, glue_task="mrpc"), "max_train_examples", -1),
    (ClassificationTask, dict(FINETUNING, glue_task="mrpc"), "seed", 1.5),
    (ClassificationTask, dict(FINETUNING, glue_task="mrpc"), "max_per_row", 0),
    (ClassificationTask, dict(FINETUNING, glue_task="mrpc"), "length_buckets",
     [16, 8, 32]),
    (ClassificationTask, dict(FINETUNING, labels=["a"]), "labels", ["a", "a"]),
    (QuestionAnsweringTask, SQUAD, "doc_stride", 0),
    (QuestionAnsweringTask, SQUAD, "max_query_length", 0),
    (QuestionAnsweringTask, SQUAD, "n_best_size", 0),
    (QuestionAnsweringTask, SQUAD, "max_answer_length", -1),
    (QuestionAnsweringTask, SQUAD, "train_fraction", 1.0),
    (QuestionAnsweringTask, SQUAD, "null_score_diff_threshold", "0"),
    (QuestionAnsweringTask, SQUAD, "max_query_length", 126),  # >= seq - 3
    (TokenClassificationTask, FINETUNING, "labels", ["O", ""]),
    (TokenClassificationTask, FINETUNING, "global_batch_size", 0),
    (MultipleChoiceTask, FINETUNING, "num_choices", 1),
    (MultipleChoiceTask, FINETUNING, "seq_length", 2),
    (DynamicMasker, dict(vocab_file=VOCAB), "masked_lm_prob", 1.0),
    (DynamicMasker, dict(vocab_file=VOCAB), "max_predictions_per_seq", 0),
]


@pytest.mark.parametrize(
    "cls,kwargs,field,value", CASES,
    ids=[f"{c[0].__name__}.{c[2]}={c[3]!r}" for c in CASES])
def test_bad_field_is_named_with_class_and_value(cls, kwargs, field, value):
  cls(**kwargs)                          # control: valid without the change
  with pytest.raises(ConfigError) as info:
    cls(**dict(kwargs, **{field: value}))
  # (gin adds "In call to configurable ..." lines below the message)
  message = str(info.value).splitlines()[0]
  assert f"{cls.__name__}.{field}" in message, message
  assert repr(value) in message or str(value) in message, message


def test_every_config_class_is_covered():
  covered = {c[0] for c in CASES}
  assert covered == {BertConfig, RuntimeConfig, OptimizerConfig,
                     PretrainingDataConfig, PretrainingTask, ClassificationTask,
                     QuestionAnsweringTask, TokenClassificationTask,
                     MultipleChoiceTask, DynamicMasker}


def test_checks_accept_the_edges_and_refuse_past_them():
  assert check_int("C", "n", 1, minimum=1) == 1
  assert check_int("C", "n", None, minimum=1, optional=True) is None
  assert check_float("C", "p", 0.0, 0, 1, max_open=True) == 0.0
  for value in (0, True, 1.0, "1"):
    with pytest.raises(ConfigError, match=r"^C\.n must be an integer >= 1"):
      check_int("C", "n", value, minimum=1)
  with pytest.raises(ConfigError, match=r"^C\.p must be a number in \[0, 1\)"):
    check_float("C", "p", 1.0, 0, 1, max_open=True)


def test_gin_errors_become_one_line_with_their_place():
  error = ValueError("No configurable matching 'Nope'.\n"
                     '  In file "/x/run.gin", line 3\n    Nope.x = 1')
  assert gin_error_line(error) == "No configurable matching 'Nope'. (/x/run.gin:3)"
  error = ValueError("Configurable 'A' doesn't have a parameter named 'b'.\n"
                     "  In bindings string line 2\n    A.b = 1\n    ^")
  assert gin_error_line(error) == ("Configurable 'A' doesn't have a parameter "
                                   "named 'b'. (binding 'A.b = 1')")
  error = ConfigError("A.b must be >= 1\n  In call to configurable 'A' (<x>)")
  assert gin_error_line(error) == "A.b must be >= 1"
