"""Helper process for multi_worker_test: trains 10 steps of a small BERT with
the strategy named in argv and the same *global* batches whatever the number
of workers (each input pipeline takes its slice of every global batch).

  python _same_batch_run.py MODEL_DIR RECORDS STRATEGY
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bert.data.pretraining_dataset import pretraining_dataset  # noqa: E402
from bert.tasks import PretrainingTask  # noqa: E402
from bert.tasks.configs import EncoderSource, PretrainingInputs  # noqa: E402
from bert.training import OptimizerConfig, RuntimeConfig, run_experiment  # noqa: E402
from conftest import PRETRAIN_PRED, PRETRAIN_SEQ, tiny_pretraining_config  # noqa: E402

GLOBAL_BATCH = 8


class SameGlobalBatchTask(PretrainingTask):

  def build_inputs(self, input_context, training, start_step=0):
    ds = pretraining_dataset(self.inputs.train_files, PRETRAIN_SEQ, PRETRAIN_PRED,
                             GLOBAL_BATCH, is_training=False)
    ds = ds.unbatch().batch(GLOBAL_BATCH, drop_remainder=True).repeat()
    n = input_context.num_input_pipelines if input_context else 1
    i = input_context.input_pipeline_id if input_context else 0
    per = GLOBAL_BATCH // n
    return ds.map(lambda b: {k: v[i * per:(i + 1) * per] for k, v in b.items()})


def main(model_dir, records, strategy):
  task = SameGlobalBatchTask(
      encoder=EncoderSource(bert_config=tiny_pretraining_config(dropout=0.0)),
      inputs=PretrainingInputs(train_files=records, seq_length=PRETRAIN_SEQ,
                               max_predictions_per_seq=PRETRAIN_PRED,
                               global_batch_size=GLOBAL_BATCH))
  run_experiment(task, model_dir, "train",
                 RuntimeConfig(train_steps=10, steps_per_loop=1,
                               checkpoint_interval=10, strategy=strategy, seed=1),
                 OptimizerConfig(learning_rate=1e-3, warmup_steps=2))


if __name__ == "__main__":
  main(*sys.argv[1:4])
