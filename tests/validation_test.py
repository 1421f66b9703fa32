"""Every numeric (and typed) field of every config class is checked where the
class is defined: a wrong value is a ConfigError naming `Class.field` and the
value, at construction, never a failure deep inside a run."""

import dataclasses

import pytest

from bert import BertConfig
from bert.data.dynamic_masking import DynamicMasker
from bert.data.pretraining_data import PretrainingDataConfig
from bert.tasks import (ClassificationTask, EmbeddingTask, MultipleChoiceTask,
                        PretrainingTask, QuestionAnsweringTask,
                        TokenClassificationTask)
from bert.tasks import configs as task_configs
from bert.tasks.configs import (AnswerConfig, ClassificationData,
                                DistillationConfig, EmbedderConfig,
                                EmbeddingData,
                                EncoderSource, FinetuningInputs, HeadConfig,
                                MultipleChoiceData, PretrainingInputs,
                                ScheduleConfig, SquadData, TaggingData)
from bert.training import OptimizerConfig, RuntimeConfig
from bert.validation import (ConfigError, check_float, check_int,
                             gin_error_line)
from conftest import small_config, vocab

VOCAB = vocab()
ENCODER = EncoderSource(bert_config=small_config(vocab_size=30522),
                        vocab_file=VOCAB, lower_case=True)
FINETUNING = dict(encoder=ENCODER, inputs=FinetuningInputs(seq_length=32))
MRPC = dict(FINETUNING, data=ClassificationData(glue_task="mrpc"))
SQUAD = dict(encoder=dataclasses.replace(ENCODER, bert_config=small_config(
    vocab_size=30522, max_position_embeddings=128)),
             inputs=FinetuningInputs(seq_length=128))
EMBEDDING = dict(FINETUNING, data=EmbeddingData(train_file="t.jsonl"),
                 embedder=EmbedderConfig(pooling="mean"))
PRETRAINING = dict(encoder=EncoderSource(bert_config=small_config()),
                   inputs=PretrainingInputs(seq_length=32))

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
    (PretrainingDataConfig, {}, "seq_length", 4),
    (PretrainingDataConfig, {}, "max_predictions_per_seq", 0),
    (PretrainingDataConfig, {}, "masked_lm_prob", 0.0),
    (PretrainingDataConfig, {}, "short_seq_prob", 1.5),
    (PretrainingDataConfig, {}, "dupe_factor", 0),
    (PretrainingDataConfig, {}, "random_seed", "x"),
    (PretrainingDataConfig, {}, "shuffle_buffer", 0),
    (EncoderSource, {}, "init_checkpoint", 3),
    (EncoderSource, {}, "bert_config", 3),
    (EncoderSource, {}, "vocab_file", ["vocab.txt"]),
    (EncoderSource, {}, "lower_case", "yes"),
    (FinetuningInputs, {}, "seq_length", 0),
    (FinetuningInputs, {}, "seq_length", 2),      # no room between [CLS], [SEP]
    (FinetuningInputs, {}, "global_batch_size", 0),
    (FinetuningInputs, {}, "eval_batch_size", -8),
    (FinetuningInputs, {}, "seed", 1.5),
    (FinetuningInputs, {}, "max_per_row", 0),
    (FinetuningInputs, {}, "group_by_length", "no"),
    (FinetuningInputs, {}, "pack", 1),
    (FinetuningInputs, {}, "length_buckets", 16),
    (FinetuningInputs, {}, "shuffle_buffer", 0),
    (FinetuningInputs, {}, "lanes", 0),
    (FinetuningInputs, {}, "lanes", 3),          # does not divide the batch (32)
    (FinetuningInputs, {}, "records", 7),
    (ScheduleConfig, {}, "num_train_epochs", 0),
    (HeadConfig, {}, "dropout_rate", 1.0),
    (ClassificationData, dict(glue_task="mrpc"), "max_train_examples", -1),
    (ClassificationData, dict(glue_task="mrpc"), "train_file", None),
    (ClassificationData, dict(glue_task="mrpc"), "regression", "yes"),
    (ClassificationData, dict(labels=["a"]), "labels", ["a", "a"]),
    (TaggingData, {}, "labels", ["O", ""]),
    (TaggingData, {}, "data_dir", 7),
    (SquadData, {}, "doc_stride", 0),
    (SquadData, {}, "max_query_length", 0),
    (SquadData, {}, "train_fraction", 1.0),
    (SquadData, {}, "version_2", "yes"),
    (AnswerConfig, {}, "n_best_size", 0),
    (AnswerConfig, {}, "max_answer_length", -1),
    (AnswerConfig, {}, "null_score_diff_threshold", "0"),
    (MultipleChoiceData, {}, "num_choices", 1),
    (EmbeddingData, {}, "text_columns", ["anchor"]),
    (EmbeddingData, {}, "text_columns", "anchor"),
    (EmbeddingData, {}, "score_column", 3),
    (EmbeddingData, {}, "max_train_examples", -1),
    (EmbedderConfig, {}, "pooling", "median"),
    (EmbedderConfig, {}, "normalize", "yes"),
    (EmbedderConfig, {}, "loss", "contrastive"),
    (EmbedderConfig, {}, "scale", 0.0),
    (EmbedderConfig, {}, "margin", -1.0),
    (DistillationConfig, {}, "temperature", 0.0),
    (DistillationConfig, {}, "alpha", 1.5),
    (DistillationConfig, {}, "hidden_weight", -1.0),
    (DistillationConfig, {}, "attention_weight", "1"),
    (DistillationConfig, {}, "mask_rate", 1.0),
    (DistillationConfig, {}, "layer_map", "0,2"),
    (DistillationConfig, {}, "teacher_outputs", "sometimes"),
    (PretrainingInputs, {}, "seq_length", 0),
    (PretrainingInputs, {}, "max_predictions_per_seq", -1),
    (PretrainingInputs, {}, "max_predictions_per_seq", 200),   # > seq_length
    (PretrainingInputs, {}, "global_batch_size", 0),
    (PretrainingInputs, {}, "eval_batch_size", 0),
    (PretrainingInputs, {}, "shuffle_buffer", 0),
    (PretrainingInputs, {}, "masked_lm_prob", 1.5),
    (PretrainingInputs, {}, "seed", -3),
    (PretrainingInputs, {}, "train_files", None),
    (PretrainingInputs, {}, "dynamic_masking", "yes"),
    # A task takes one config object per concern, of its type.
    (ClassificationTask, MRPC, "inputs", HeadConfig()),
    (ClassificationTask, MRPC, "data", TaggingData()),
    (PretrainingTask, PRETRAINING, "inputs", FinetuningInputs()),
    (PretrainingTask, PRETRAINING, "encoder", "bert_tiny"),
    (QuestionAnsweringTask, SQUAD, "answers", SquadData()),
    (TokenClassificationTask, FINETUNING, "head", 0.1),
    (MultipleChoiceTask, FINETUNING, "schedule", 3),
    (EmbeddingTask, EMBEDDING, "embedder", HeadConfig()),
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


# Checks that relate two concerns (or a concern and the encoder) are the
# task's: (task, valid keyword arguments, the argument changed, its bad value,
# what the one-line message must contain).
TASK_CASES = [
    (PretrainingTask, PRETRAINING, "inputs", PretrainingInputs(seq_length=64),
     ["PretrainingTask", "PretrainingInputs.seq_length=64",
      "max_position_embeddings=32"]),
    (PretrainingTask, PRETRAINING, "inputs",
     PretrainingInputs(seq_length=32, dynamic_masking=True),
     ["PretrainingInputs.dynamic_masking", "EncoderSource.vocab_file"]),
    (PretrainingTask, PRETRAINING, "encoder", EncoderSource(),
     ["PretrainingTask", "EncoderSource.init_checkpoint",
      "EncoderSource.bert_config"]),
    (ClassificationTask, MRPC, "inputs", FinetuningInputs(seq_length=64),
     ["ClassificationTask", "FinetuningInputs.seq_length=64",
      "max_position_embeddings=32"]),
    (ClassificationTask, MRPC, "inputs",
     FinetuningInputs(seq_length=32, length_buckets=[16, 8, 32]),
     ["FinetuningInputs.length_buckets", "seq_length=32", "16, 8, 32"]),
    (ClassificationTask, MRPC, "inputs",
     FinetuningInputs(seq_length=32, length_buckets=[8, 16]),
     ["FinetuningInputs.length_buckets", "seq_length=32", "8, 16"]),
    (TokenClassificationTask, FINETUNING, "encoder",
     dataclasses.replace(ENCODER, vocab_file=None),
     ["TokenClassificationTask", "no vocab", "EncoderSource.vocab_file"]),
    (TokenClassificationTask, FINETUNING, "encoder",
     dataclasses.replace(ENCODER, lower_case=None),
     ["TokenClassificationTask", "EncoderSource.lower_case"]),
    (QuestionAnsweringTask, SQUAD, "data", SquadData(max_query_length=126),
     ["QuestionAnsweringTask", "SquadData.max_query_length=126",
      "seq_length=128"]),
    (MultipleChoiceTask, FINETUNING, "inputs",
     FinetuningInputs(seq_length=32, pack=True),
     ["MultipleChoiceTask", "FinetuningInputs.pack=True"]),
    (EmbeddingTask, EMBEDDING, "embedder",
     EmbedderConfig(pooling="mean", loss="cosent"),
     ["EmbeddingTask", "loss='cosent'", "score_column=None"]),
    (EmbeddingTask, EMBEDDING, "embedder", EmbedderConfig(),
     ["EmbeddingTask", "has no sentence-transformers modules.json",
      "EmbedderConfig.pooling"]),
]


@pytest.mark.parametrize(
    "cls,kwargs,name,value,expected", TASK_CASES,
    ids=[f"{c[0].__name__}-{c[4][-1]}" for c in TASK_CASES])
def test_bad_combination_is_named_by_the_task(cls, kwargs, name, value,
                                              expected):
  cls(**kwargs)                          # control: valid without the change
  with pytest.raises(ConfigError) as info:
    cls(**dict(kwargs, **{name: value}))
  message = str(info.value).splitlines()[0]
  for part in expected:
    assert part in message, message


def test_every_config_class_is_covered():
  # Every config dataclass of bert.tasks.configs (but `Encoder`, what an
  # EncoderSource loads, and `DataFiles`, the base of the *Data classes).
  task_config_classes = {
      c for c in vars(task_configs).values()
      if isinstance(c, type) and dataclasses.is_dataclass(c)
      and c.__module__.startswith(task_configs.__name__)} - {
          task_configs.Encoder, task_configs.DataFiles}
  assert task_config_classes == {
      EncoderSource, FinetuningInputs, ScheduleConfig, HeadConfig,
      ClassificationData, TaggingData, SquadData, AnswerConfig,
      MultipleChoiceData, PretrainingInputs, EmbeddingData, EmbedderConfig}
  tasks = {PretrainingTask, ClassificationTask, QuestionAnsweringTask,
           TokenClassificationTask, MultipleChoiceTask, EmbeddingTask}
  covered = {c[0] for c in CASES}
  assert covered == ({BertConfig, RuntimeConfig, OptimizerConfig,
                      DistillationConfig, PretrainingDataConfig, DynamicMasker}
                     | task_config_classes | tasks)
  assert {c[0] for c in TASK_CASES} == tasks


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
