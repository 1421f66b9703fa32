"""The bundled gin configs parse and describe the runs they claim to."""

import glob
import os
import subprocess
import sys

import gin
import pytest

from bert import BertConfig
from bert import configs
from bert.tasks import PretrainingTask  # registers the tasks with gin
from bert.models.embedding_objective import default_recipe
from bert.training import OptimizerConfig, RuntimeConfig
from bert.tasks import build_task
from conftest import REPO_ROOT, family_config_vocab, minilm_dir, shared_data

# gin's global config is cleared around each test (conftest's `clean_gin`).
pytestmark = pytest.mark.usefixtures("clean_gin")
CONFIG_DIR = os.path.dirname(configs.__file__)
# The recipe the glue_*.gin include: it names no task, so it is no run.
INCLUDE_ONLY = {"finetune_classification.gin"}
# Needs a trained teacher run: parsed and run by tests/tasks/distillation_test.
NEEDS_TEACHER = {"distill.gin"}
# Sentence embeddings train with sentence-transformers' recipe (no warmup,
# no weight decay, epsilon 1e-8: `BertTextEmbedder.compile()`'s), not BERT's.
EMBEDDING = {"embedding.gin", "embedding_squad.gin"}


def parse(name, *bindings):
  gin.clear_config()
  gin.add_config_file_search_path(CONFIG_DIR)
  gin.parse_config_files_and_bindings([os.path.join(CONFIG_DIR, name)],
                                      list(bindings))
  return build_task(), RuntimeConfig(), OptimizerConfig()


@pytest.mark.parametrize("size", ["tiny", "mini", "small", "medium", "base",
                                  "large"])
def test_pretraining_config_per_preset(size):
  task, runtime, opt = parse(f"pretrain_{size}.gin")
  assert isinstance(task, PretrainingTask)
  assert task.config == BertConfig.preset(f"bert_{size}")
  assert (task.seq_length, task.max_predictions_per_seq,
          task.global_batch_size) == (128, 20, 256)
  assert runtime.train_steps == 900_000 and opt.warmup_steps == 10_000
  assert opt.optimizer == "adamw" and opt.weight_decay == 0.01
  assert opt.clip_norm == 1.0
  expected_lr = {"tiny": 5e-4, "mini": 5e-4, "small": 3e-4, "medium": 2e-4,
                 "base": 1e-4, "large": 1e-4}[size]
  assert opt.learning_rate == expected_lr


# The family configs' vocabularies (their vocab_size is the trained one's).
FAMILY_VOCABULARIES = {"pretrain_roberta_tiny_wikitext2.gin": "byte_pair",
                       "pretrain_albert_tiny_wikitext2.gin": "sentencepiece",
                       "pretrain_electra_tiny_wikitext2.gin": "wordpiece"}


@pytest.mark.heavy
def test_every_bundled_config_parses(tmp_path):
  names = sorted(os.path.basename(p) for p in glob.glob(os.path.join(CONFIG_DIR, "*.gin")))
  assert {"pretrain_tiny_wikitext2.gin", "glue_mrpc.gin", "ner_wnut17.gin"} <= set(names)
  glue = {n for n in names if n.startswith("glue_")}
  assert len(glue) == 9
  for name in names:
    if name in INCLUDE_ONLY | NEEDS_TEACHER:
      continue
    pretraining = name.startswith("pretrain")
    bindings = [] if pretraining else [f"INIT_CHECKPOINT = '{minilm_dir()}'"]
    if name in FAMILY_VOCABULARIES:
      vocab = family_config_vocab(FAMILY_VOCABULARIES[name], str(tmp_path))
      bindings.append(f"EncoderSource.vocab_file = '{vocab}'")
    task, runtime, opt = parse(name, *bindings)
    assert task.global_batch_size > 0
    if pretraining:
      assert runtime.train_steps > 0
    else:
      assert runtime.train_steps is None
      assert opt.warmup_fraction == (0.0 if name in EMBEDDING else 0.1)
      assert task.config.hidden_size == 384        # MiniLM from INIT_CHECKPOINT
  task, _, _ = parse("glue_stsb.gin", f"INIT_CHECKPOINT = '{minilm_dir()}'")
  assert task.regression and task.metric_names == ("pearson", "spearman")


UNKNOWN_PARAMETERS = [
    ("pretrain_tiny.gin", "PretrainingTask.no_such_knob = 3",
     "PretrainingTask", "no_such_knob"),
    # A misspelled field of a config dataclass is refused too, not ignored.
    ("pretrain_tiny.gin", "PretrainingInputs.no_such_knob = 3",
     "PretrainingInputs", "no_such_knob"),
    ("pretrain_tiny.gin", "PretrainingInputs.train_file = 'x'",
     "PretrainingInputs", "train_file"),
    ("pretrain_tiny.gin", "EncoderSource.bert_confg = 'bert_tiny'",
     "EncoderSource", "bert_confg"),
    ("glue_mrpc.gin", "FinetuningInputs.seq_lenght = 64",
     "FinetuningInputs", "seq_lenght"),
    # The names from before the config dataclasses are errors, not no-ops.
    ("pretrain_tiny.gin", "PretrainingTask.train_files = 'x'",
     "PretrainingTask", "train_files"),
    ("glue_mrpc.gin", "ClassificationTask.seq_length = 64",
     "ClassificationTask", "seq_length"),
]


@pytest.mark.parametrize("gin_file,binding,configurable,name",
                         UNKNOWN_PARAMETERS,
                         ids=[c[1].split(" =")[0] for c in UNKNOWN_PARAMETERS])
def test_unknown_gin_parameter_is_an_error_naming_it(gin_file, binding,
                                                     configurable, name):
  with pytest.raises(ValueError,
                     match=rf"'{configurable}'.* named '{name}'") as info:
    parse(gin_file, binding)
  assert "doesn't have a parameter" in str(info.value), info.value


def test_cli_help_lists_flags():
  out = subprocess.run([sys.executable, "-m", "bert.scripts.train", "--help"],
                       capture_output=True, text=True, cwd=REPO_ROOT,
                       timeout=120).stdout
  for flag in ("--gin_file", "--gin_param", "--mode", "--model_dir",
               "--strategy", "--mixed_precision", "--jit_compile"):
    assert flag in out


@pytest.mark.heavy
def test_fine_tuning_configs_use_the_one_recipe():
  """The recipe lives in OptimizerConfig's defaults (what Model.compile()
  uses too); the fine-tuning gin files restate none of it and differ only
  where the paper does (SWAG's 2e-5)."""
  recipe = OptimizerConfig()
  assert (recipe.optimizer, recipe.learning_rate, recipe.warmup_fraction,
          recipe.weight_decay, recipe.clip_norm) == ("adamw", 5e-5, 0.1, 0.01, 1.0)
  assert RuntimeConfig().strategy == "auto"
  names = [os.path.basename(p) for p in glob.glob(os.path.join(CONFIG_DIR, "*.gin"))
           if not os.path.basename(p).startswith("pretrain")
           and os.path.basename(p) not in INCLUDE_ONLY | NEEDS_TEACHER]
  assert len(names) >= 13
  for name in names:
    _, runtime, opt = parse(name, f"INIT_CHECKPOINT = '{minilm_dir()}'")
    expected = (OptimizerConfig(learning_rate=2e-5) if name == "swag.gin"
                else default_recipe() if name in EMBEDDING else recipe)
    assert opt == expected, name
    assert runtime.strategy == "auto", name
