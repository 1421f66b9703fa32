"""ElectraPretrainingTask: replaced-token detection trained by the loop on
small real records (dynamic masks), its stats, its gin config, and the
trained discriminator written as an ELECTRA Hugging Face folder."""

import os
import sys

import gin
import numpy as np
import pytest
import tensorflow as tf

from bert import checkpoints
from bert.models import ElectraPretrainer
from bert.tasks import ElectraPretrainingTask, build_task
from bert.tasks.configs import EncoderSource, PretrainingInputs
from bert.training import OptimizerConfig, RuntimeConfig, run_experiment
from bert.validation import ConfigError
from conftest import (PRETRAIN_PRED, PRETRAIN_SEQ, REPO_ROOT,
                      family_config_vocab, one_line, tiny_pretraining_config,
                      vocab)

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "training"))
from _runs import summaries  # pylint: disable=g-import-not-at-top,wrong-import-position

# This checkout's configs (the installed `bert.configs` may be another's).
CONFIGS = os.path.join(REPO_ROOT, "configs")


def electra_task(records, dynamic_masking=True, **kwargs):
  config = tiny_pretraining_config(dropout=0.0)
  config = type(config)(**dict(config.to_dict(), family="electra",
                               use_pooler=False))
  return ElectraPretrainingTask(
      encoder=EncoderSource(bert_config=config, vocab_file=vocab()),
      inputs=PretrainingInputs(train_files=records, eval_files=records,
                               seq_length=PRETRAIN_SEQ,
                               max_predictions_per_seq=PRETRAIN_PRED,
                               global_batch_size=8, seed=3,
                               dynamic_masking=dynamic_masking),
      **kwargs)


@pytest.mark.heavy
def test_a_few_steps_lower_the_loss_and_evaluate(pretraining_records,
                                                 tmp_path):
  task = electra_task(pretraining_records)
  runtime = RuntimeConfig(train_steps=20, steps_per_loop=10, eval_interval=20,
                          eval_steps=2, strategy="one_device", seed=1)
  model, results = run_experiment(
      task, str(tmp_path / "run"), "train_and_eval", runtime,
      OptimizerConfig(learning_rate=2e-3, warmup_steps=2),
      log_fn=lambda *_: None)
  assert isinstance(model, ElectraPretrainer)
  loss = summaries(str(tmp_path / "run" / "train"), "loss")
  assert sorted(loss) == [10, 20], loss
  assert loss[20] < loss[10] - 1.0, loss
  assert set(task.stat_names) | {"loss"} <= results.keys()
  # The reported loss is the ELECTRA loss: masked LM + 50 x discriminator.
  assert abs(results["loss"] - results["masked_lm_loss"]
             - 50 * results["discriminator_loss"]) < 1e-3
  assert 0 < results["replaced_fraction"] < 0.25
  # The trained discriminator is an ELECTRA discriminator folder.
  path = checkpoints.save(model.discriminator_checkpoint(task.vocab_file),
                          str(tmp_path / "disc"), format="hf")
  back = checkpoints.load(path, with_heads=True)
  assert back.discriminator is not None and back.config.family == "electra"


def test_the_stats_are_sums_over_real_tokens(pretraining_records):
  task = electra_task(pretraining_records)
  model = task.build_model()
  batch = next(iter(task.build_inputs(None, training=True)))
  outputs = model(task.model_inputs(batch), training=False)
  stats = task.compute_stats(batch, outputs)
  dens = task.loss_denominators(batch)
  assert set(stats) == set(task.stat_names)
  real = float(tf.reduce_sum(tf.cast(batch["input_mask"] > 0, tf.float32)))
  assert float(dens["weighted_discriminator_loss"]) == real
  assert float(stats["discriminator_loss"][1]) == real
  assert float(dens["masked_lm_loss"]) == float(
      tf.reduce_sum(batch["masked_lm_weights"]))
  np.testing.assert_allclose(float(stats["weighted_discriminator_loss"][0]),
                             50 * float(stats["discriminator_loss"][0]),
                             rtol=1e-6)


def test_it_needs_dynamic_masking(pretraining_records):
  with pytest.raises(ConfigError) as e:
    electra_task(pretraining_records, dynamic_masking=False)
  # (gin adds a line naming the call)
  one_line(str(e.value).splitlines()[0], "ElectraPretrainingTask",
           "dynamic_masking")
  with pytest.raises(ConfigError) as e:
    electra_task(pretraining_records, generator_fraction=1.5)
  one_line(str(e.value).splitlines()[0], "generator_fraction")


def test_the_wikitext2_config_builds_the_task(pretraining_records, clean_gin,
                                              tmp_path):
  del clean_gin
  gin.add_config_file_search_path(CONFIGS)
  vocab_file = family_config_vocab("wordpiece", str(tmp_path))
  gin.parse_config_files_and_bindings(
      [os.path.join(CONFIGS, "pretrain_electra_tiny_wikitext2.gin")],
      [f'EncoderSource.vocab_file = "{vocab_file}"',
       f'PretrainingInputs.train_files = "{pretraining_records}"'],
      skip_unknown=False)
  task = build_task()
  assert isinstance(task, ElectraPretrainingTask)
  config = task.config
  assert (config.family, config.hidden_size, config.num_hidden_layers,
          config.num_attention_heads, config.intermediate_size,
          config.vocab_size) == ("electra", 128, 2, 2, 512, 6000)
  assert (task.generator_fraction, task.discriminator_weight) == (0.25, 50.0)
  assert task.masker is not None and task.seq_length == 128
