"""Every console command, given bad input, fails the same way: exit status 2,
one line on stderr (`error: ...`) that names the file, line, flag or field,
no traceback, and no output left behind.

The fixtures are one small, valid set (a random BERT in Hugging Face format
with its vocab, GLUE MRPC-style TSVs, a CoNLL file, a corpus); each case
breaks one thing. A positive control runs a command on the valid set, so a
case cannot pass because the fixtures themselves are broken.
"""

import collections
import os
import shutil

import pytest

from bert import BertConfig, BertEncoder, checkpoints
from conftest import run_command

WORDS = ("the a man dog cat is was good bad movie film it not very this that "
         "and runs ran play played , . ! ?").split()
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORDS + ["##s", "##ed"]

Case = collections.namedtuple("Case", "id argv expect")


def _write(path, text, mode="w"):
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with open(path, mode) as f:
    f.write(text)
  return path


@pytest.fixture(scope="module")
def files(tmp_path_factory):
  root = str(tmp_path_factory.mktemp("cli_inputs"))
  f = {"root": root}
  f["vocab"] = _write(f"{root}/vocab.txt", "\n".join(VOCAB) + "\n")
  config = BertConfig(vocab_size=len(VOCAB), hidden_size=32, num_hidden_layers=2,
                      num_attention_heads=2, intermediate_size=64,
                      max_position_embeddings=128)
  f["ckpt"] = checkpoints.save(BertEncoder(config), f"{root}/ckpt", format="hf",
                               vocab_file=f["vocab"], lower_case=True)

  def variant(name, edit):
    path = f"{root}/{name}"
    shutil.copytree(f["ckpt"], path, symlinks=True)
    edit(path)
    return path
  f["ckpt_bad_json"] = variant("ckpt_bad_json", lambda p: _write(
      f"{p}/config.json", '{"hidden_size": 32,'))
  f["ckpt_truncated"] = variant("ckpt_truncated", lambda p: os.truncate(
      f"{p}/model.safetensors", 100))
  f["ckpt_heads"] = variant("ckpt_heads", lambda p: _write(
      f"{p}/config.json", open(f"{p}/config.json").read().replace(
          '"num_attention_heads": 2', '"num_attention_heads": 3')))
  # A blank line where a token was: the line count (vocab_size) still fits.
  blank = list(VOCAB)
  blank[VOCAB.index("dog")] = ""
  f["ckpt_blank_vocab"] = variant("ckpt_blank_vocab", lambda p: _write(
      f"{p}/vocab.txt", "\n".join(blank) + "\n"))

  def dangle(p):
    os.remove(f"{p}/vocab.txt")
    os.symlink(f"{p}/gone.txt", f"{p}/vocab.txt")
  f["ckpt_dangling_vocab"] = variant("ckpt_dangling_vocab", dangle)
  f["vocab_no_mask"] = _write(f"{root}/vocab_no_mask.txt",
                              "\n".join(v for v in VOCAB if v != "[MASK]"))
  f["not_a_checkpoint"] = _write(f"{root}/notes/readme.txt", "my notes\n")

  header = "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
  rows = "".join(f"{i % 2}\t{i}\t{i + 100}\tthe dog runs\tthe cat ran\n"
                 for i in range(8))
  for split in ("train", "dev", "test"):
    _write(f"{root}/mrpc/{split}.tsv", header + rows)
  _write(f"{root}/mrpc_bad/train.tsv", header + rows + "1\tonly three\n")
  _write(f"{root}/mrpc_bad/dev.tsv", header + rows)
  f["mrpc"], f["mrpc_bad"], f["mrpc_empty"] = (
      f"{root}/mrpc", f"{root}/mrpc_bad", f"{root}/mrpc_empty")
  os.makedirs(f["mrpc_empty"])
  _write(f"{root}/ner/wnut17train.conll", "the O\ndog B-x\n\ncat\n")
  f["ner"] = f"{root}/ner"

  f["gin_syntax"] = _write(f"{root}/syntax.gin",
                           "RuntimeConfig.train_steps = 10\n"
                           "RuntimeConfig.steps_per_loop = (\n")
  f["gin_unknown"] = _write(f"{root}/unknown.gin", "\nRuntimeConfig.bogus = 3\n")
  f["corpus"] = _write(f"{root}/corpus.txt", "the dog runs .\nthe cat ran .\n\n"
                       "a man played .\nit was good .\n")
  f["corpus_bad_utf8"] = _write(f"{root}/corpus_bad.txt",
                                b"the dog runs .\nthe \xff cat .\n", "wb")
  f["sentences"] = _write(f"{root}/sentences.txt", "the dog runs\n")
  f["sentences_bad_utf8"] = _write(f"{root}/sentences_bad.txt",
                                   b"the dog\n\xfe\xff\n", "wb")
  os.makedirs(f"{root}/empty_run")
  f["empty_run"] = f"{root}/empty_run"
  return f


MRPC = ["bert-train", "--task=glue_mrpc", "--init_checkpoint={ckpt}",
        "--data_dir={mrpc}", "--model_dir={out}"]


def mrpc(*extra):
  return MRPC + [f"--gin_param={p}" for p in extra]


CASES = [
    # bert-train: flags
    Case("train_unknown_flag", ["bert-train", "--bogus=1", "--model_dir={out}"],
         ["'bogus'"]),
    Case("train_missing_model_dir", ["bert-train", "--task=glue_mrpc"],
         ["--model_dir"]),
    Case("train_unknown_task", ["bert-train", "--task=glue_nope",
                                "--model_dir={out}"], ["--task=glue_nope"]),
    Case("train_stray_argument", MRPC + ["extra"], ["'extra'"]),
    Case("train_bad_mode", MRPC + ["--mode=fly"], ["--mode"]),
    # gin files and bindings
    Case("train_missing_gin_file", ["bert-train", "--gin_file={root}/nope.gin",
                                    "--model_dir={out}"], ["nope.gin"]),
    Case("train_gin_syntax", MRPC + ["--gin_file={gin_syntax}"], ["syntax.gin"]),
    Case("train_gin_unknown_parameter", MRPC + ["--gin_file={gin_unknown}"],
         ["bogus", "unknown.gin:2"]),
    Case("train_gin_param_unknown_class", mrpc("Nope.x = 1"), ["Nope"]),
    # config fields, one per config class
    Case("train_steps_zero", mrpc("RuntimeConfig.train_steps = 0"),
         ["RuntimeConfig.train_steps", "got 0"]),
    Case("train_steps_per_loop_text", mrpc("RuntimeConfig.steps_per_loop = 'ten'"),
         ["RuntimeConfig.steps_per_loop", "'ten'"]),
    Case("train_strategy_unknown", mrpc("RuntimeConfig.strategy = 'gpu'"),
         ["RuntimeConfig.strategy", "'gpu'"]),
    Case("train_batch_zero", mrpc("FinetuningInputs.global_batch_size = 0"),
         ["FinetuningInputs.global_batch_size", "got 0"]),
    Case("train_batch_negative", mrpc("FinetuningInputs.global_batch_size = -8"),
         ["FinetuningInputs.global_batch_size", "got -8"]),
    Case("train_learning_rate_negative",
         mrpc("OptimizerConfig.learning_rate = -1.0"),
         ["OptimizerConfig.learning_rate"]),
    Case("train_seq_length_too_long", mrpc("FinetuningInputs.seq_length = 512"),
         ["FinetuningInputs.seq_length=512", "max_position_embeddings=128"]),
    Case("train_pretraining_no_files",
         ["bert-train", "--task=pretrain_tiny", "--model_dir={out}",
          "--gin_param=PretrainingInputs.train_files = '{root}/none/*.tfrecord'"],
         ["none/*.tfrecord"]),
    # checkpoints
    Case("train_checkpoint_missing", MRPC[:2] + [
        "--init_checkpoint={root}/gone", "--data_dir={mrpc}",
        "--model_dir={out}"], ["gone"]),
    Case("train_checkpoint_bad_json", MRPC[:2] + [
        "--init_checkpoint={ckpt_bad_json}", "--data_dir={mrpc}",
        "--model_dir={out}"], ["config.json"]),
    Case("train_checkpoint_truncated", MRPC[:2] + [
        "--init_checkpoint={ckpt_truncated}", "--data_dir={mrpc}",
        "--model_dir={out}"], ["model.safetensors"]),
    Case("train_vocab_blank_line", MRPC[:2] + [
        "--init_checkpoint={ckpt_blank_vocab}", "--data_dir={mrpc}",
        "--model_dir={out}"], ["vocab.txt:9", "blank line"]),
    # data
    Case("train_data_missing", MRPC[:3] + ["--data_dir={mrpc_empty}",
                                           "--model_dir={out}"], ["train.tsv"]),
    Case("train_data_bad_row", MRPC[:3] + ["--data_dir={mrpc_bad}",
                                           "--model_dir={out}"],
         ["train.tsv:10", "column"]),
    Case("train_ner_bad_line", ["bert-train", "--task=ner_wnut17",
                                "--init_checkpoint={ckpt}", "--data_dir={ner}",
                                "--model_dir={out}"],
         ["wnut17train.conll:4"]),
    Case("train_eval_without_checkpoint", MRPC + ["--mode=eval"],
         ["no checkpoint"]),
    # bert-convert
    Case("convert_missing_input", ["bert-convert", "--input={root}/gone",
                                   "--output={out}"], ["gone"]),
    Case("convert_unknown_format", ["bert-convert", "--input={ckpt}",
                                    "--output={out}", "--to=onnx"], ["--to"]),
    Case("convert_heads_not_dividing", ["bert-convert", "--input={ckpt_heads}",
                                        "--output={out}"],
         ["config.json", "num_attention_heads=3"]),
    Case("convert_truncated_weights", ["bert-convert", "--input={ckpt_truncated}",
                                       "--output={out}"], ["model.safetensors"]),
    Case("convert_dangling_vocab", ["bert-convert",
                                    "--input={ckpt_dangling_vocab}",
                                    "--output={out}"], ["vocab.txt", "symlink"]),
    Case("convert_onto_other_folder", ["bert-convert", "--input={ckpt}",
                                       "--output={root}/notes"],
         ["notes", "refusing"]),
    # bert-create-pretraining-data
    Case("data_zero_shards", ["bert-create-pretraining-data",
                              "--input_file={corpus}", "--output_dir={out}",
                              "--vocab_file={vocab}", "--num_shards=0"],
         ["--num_shards"]),
    Case("data_no_input", ["bert-create-pretraining-data",
                           "--input_file={root}/none*.txt", "--output_dir={out}",
                           "--vocab_file={vocab}"], ["none*.txt"]),
    Case("data_bad_utf8", ["bert-create-pretraining-data",
                           "--input_file={corpus_bad_utf8}", "--output_dir={out}",
                           "--vocab_file={vocab}"], ["corpus_bad.txt:2"]),
    Case("data_vocab_no_mask", ["bert-create-pretraining-data",
                                "--input_file={corpus}", "--output_dir={out}",
                                "--vocab_file={vocab_no_mask}"],
         ["vocab_no_mask.txt", "[MASK]"]),
    Case("data_seq_too_short", ["bert-create-pretraining-data",
                                "--input_file={corpus}", "--output_dir={out}",
                                "--vocab_file={vocab}", "--max_seq_length=3"],
         ["max_seq_length", "got 3"]),
    # bert-create-finetuning-data
    Case("finetuning_data_bad_row", [
        "bert-create-finetuning-data", "--task=glue_mrpc",
        "--init_checkpoint={ckpt}", "--data_dir={mrpc_bad}",
        "--output_dir={out}"], ["train.tsv:10", "column"]),
    # bert-export
    Case("export_classifier_needs_run", ["bert-export", "--kind=classifier",
                                         "--output={out}"], ["--checkpoint"]),
    Case("export_precision_of_an_encoder", [
        "bert-export", "--kind=encoder", "--checkpoint={ckpt_truncated}",
        "--output={out}", "--precision=int8"], ["--precision=int8", "classifier"]),
    Case("export_not_a_run", ["bert-export", "--kind=classifier",
                              "--checkpoint={empty_run}", "--output={out}"],
         ["operative_config.gin"]),
    Case("export_truncated_encoder", ["bert-export", "--kind=encoder",
                                      "--checkpoint={ckpt_truncated}",
                                      "--output={out}"], ["model.safetensors"]),
    Case("export_preprocessor_blank_vocab", [
        "bert-export", "--kind=preprocessing", "--checkpoint={ckpt_blank_vocab}",
        "--output={out}"], ["vocab.txt:9"]),
    # bert-extract-features
    Case("features_layers_not_numbers", [
        "bert-extract-features", "--input_file={sentences}",
        "--output_file={out}", "--init_checkpoint={ckpt}", "--layers=last"],
         ["--layers=last"]),
    Case("features_layer_missing", [
        "bert-extract-features", "--input_file={sentences}",
        "--output_file={out}", "--init_checkpoint={ckpt}", "--layers=5"],
         ["layer 5", "2-layer"]),
    Case("features_bad_utf8", [
        "bert-extract-features", "--input_file={sentences_bad_utf8}",
        "--output_file={out}", "--init_checkpoint={ckpt}"],
         ["sentences_bad.txt:2"]),
    # bert-quickstart
    Case("quickstart_unknown_preset", ["bert-quickstart", "--preset=bert_nope",
                                       "--vocab_file={vocab}"], ["bert_nope"]),
]


# Run with `-m slow` only (they repeat a path a default case covers), so the
# default suite keeps its time budget: each case starts TensorFlow anew.
SLOW = {"train_bad_mode", "train_gin_param_unknown_class", "train_strategy_unknown",
        "train_batch_negative", "train_seq_length_too_long",
        "train_checkpoint_missing", "train_steps_per_loop_text",
        "convert_truncated_weights", "export_classifier_needs_run",
        "export_precision_of_an_encoder",
        "data_seq_too_short", "features_layers_not_numbers",
        "train_missing_model_dir", "train_checkpoint_bad_json",
        "train_ner_bad_line", "convert_unknown_format",
        "train_learning_rate_negative", "train_batch_zero",
        "train_stray_argument"}
PARAMS = [pytest.param(c, id=c.id, marks=[pytest.mark.slow] if c.id in SLOW
                       else []) for c in CASES]


def listing(root):
  return sorted((d, tuple(sorted(fs))) for d, _, fs in os.walk(root))


def test_at_least_25_cases_over_every_command():
  commands = {c.argv[0] for c in CASES if c.id not in SLOW}
  assert len(CASES) - len(SLOW) >= 25 and SLOW <= {c.id for c in CASES}
  assert commands == {"bert-train", "bert-convert", "bert-create-pretraining-data",
                      "bert-create-finetuning-data", "bert-export",
                      "bert-extract-features", "bert-quickstart"}


@pytest.mark.parametrize("case", PARAMS)
def test_bad_input_is_one_line_exit_2(case, files, tmp_path):
  out = str(tmp_path / "out")
  argv = [a.format(out=out, **files) for a in case.argv]
  before = listing(files["root"])
  # The commands must quiet TensorFlow's log alone.
  proc = run_command(argv, str(tmp_path), TF_CPP_MIN_LOG_LEVEL=None)
  report = f"exit {proc.returncode}\nstderr:\n{proc.stderr[-4000:]}"
  assert proc.returncode == 2, report
  lines = [line for line in proc.stderr.splitlines() if line.strip()]
  assert len(lines) == 1 and lines[0].startswith("error: "), report
  assert "Traceback" not in proc.stderr
  for fragment in case.expect:
    assert fragment in lines[0], (fragment, lines[0])
  # Nothing written: no output, no stray files, the inputs untouched.
  assert not os.path.lexists(out), os.listdir(out) if os.path.isdir(out) else out
  assert os.listdir(tmp_path) == []
  assert listing(files["root"]) == before


def test_valid_inputs_pass_and_verbose_shows_the_traceback(files, tmp_path):
  """Positive control: the same fixtures convert; and the --verbose switch
  prints the traceback above the same one-line error."""
  out = str(tmp_path / "converted")
  ok = run_command(["bert-convert", f"--input={files['ckpt']}",
                    f"--output={out}", "--to=tf2"], str(tmp_path),
                   TF_CPP_MIN_LOG_LEVEL=None)
  assert ok.returncode == 0, ok.stderr[-3000:]
  assert checkpoints.load(out).config.vocab_size == len(VOCAB)
  verbose = run_command(["bert-convert", f"--input={files['ckpt_truncated']}",
                         f"--output={tmp_path}/x", "--verbose"], str(tmp_path),
                         TF_CPP_MIN_LOG_LEVEL=None)
  assert verbose.returncode == 2
  assert "Traceback" in verbose.stderr
  assert verbose.stderr.strip().splitlines()[-1].startswith("error: ")
