"""bert-create-finetuning-data: a fine-tuning task's splits -> TFRecords.

  bert-create-finetuning-data --task=glue_sst2 --init_checkpoint=CKPT \\
      --data_dir=glue/SST-2 --output_dir=data/sst2 --num_shards=8 \\
      --num_processes=2
  bert-train --task=glue_sst2 --init_checkpoint=CKPT --model_dir=/tmp/sst2 \\
      --gin_param='FinetuningInputs.records="data/sst2"'

Sentence embeddings (--task=embedding: columns of texts, one feature set a
column, `text_<i>/input_word_ids` ...) are written the same way.

The task is named and configured as for bert-train (--task, --gin_file,
--gin_param, --init_checkpoint for the vocab and casing, --data_dir), and its
rows are encoded exactly as bert-train encodes them in memory, so training
from the records gives the same batches. Output: per split, --num_shards
TFRecord files (rows dealt round-robin; give a multiple of the number of
workers or input lanes that will read them) and manifest.json (task, vocab,
casing, seq_length, row counts, feature spec). --num_processes encodes chunks
of examples in parallel and writes the same files. The folder appears complete or
not at all; an existing one is refused unless it is empty or, with
--overwrite, records written here.
"""

from absl import flags

from bert.scripts import _cli
from bert.scripts import _gin_config

FLAGS = flags.FLAGS
_gin_config.define_task_flags()
flags.DEFINE_string("output_dir", None, "Folder for the records and manifest.")
flags.DEFINE_list("splits", ["train", "eval"], "Splits to write (train, eval, "
                  "predict).")
flags.DEFINE_integer("num_shards", 1, "TFRecord files per split.",
                     lower_bound=1)
flags.DEFINE_integer("num_processes", 1, "Processes that encode chunks of "
                     "examples in parallel (the files are the same).",
                     lower_bound=1)
flags.DEFINE_bool("overwrite", False, "Replace --output_dir if it holds "
                  "records written here.")
flags.mark_flags_as_required(["output_dir"])


def main(argv):
  del argv
  from bert.tasks.finetuning import FinetuningTask  # pylint: disable=g-import-not-at-top
  from bert.tasks.records_writer import create_finetuning_records  # pylint: disable=g-import-not-at-top
  from bert.validation import ConfigError  # pylint: disable=g-import-not-at-top
  import functools  # pylint: disable=g-import-not-at-top
  files, bindings = _gin_config.sources()
  _gin_config.parse_sources(files, bindings)
  task = _gin_config.build_task()
  if not isinstance(task, FinetuningTask):
    raise ConfigError(f"{type(task).__name__}: not a fine-tuning task (the "
                      "pre-training data tool is bert-create-pretraining-data)")
  entries = create_finetuning_records(task, FLAGS.output_dir, FLAGS.splits,
                                      num_shards=FLAGS.num_shards,
                                      overwrite=FLAGS.overwrite,
                                      num_processes=FLAGS.num_processes,
                                      task_factory=functools.partial(
                                          _gin_config.task_from_sources,
                                          files, bindings))
  print(f"Wrote {FLAGS.output_dir}: " + ", ".join(
      f"{s} {e['rows']:,} rows" for s, e in entries.items()))


def run():
  _cli.run(main, __name__)


if __name__ == "__main__":
  run()
