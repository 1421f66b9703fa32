"""Unlabeled transfer text for the distillation runs of the README
(`DistillationTask.transfer_files`), from the GLUE training files:

  python -m bench.transfer_text rest --glue_task sst-2 \
      --train_file ../shared/data/glue/SST-2/train.tsv --skip 10000 --out sst2_transfer.txt
  python -m bench.transfer_text pairs --train_file ../shared/data/glue/MRPC/train.tsv \
      --out mrpc_transfer.txt [--drop 0.15] [--seed 1]

`rest`: the training texts after the first --skip rows (the rows a teacher
with `ClassificationData.max_train_examples=SKIP` never saw), labels dropped:
in-domain unlabeled text, as Turc et al. (2019) distill on. `pairs`: four
variants of every training pair, for pair tasks with no unlabeled pool: the
pair swapped (b, a), and with about --drop of the words dropped from a, from
b, and from both (swapped), seeded; each keeps at least its original words
when all would go. The teacher labels every line; the rows' own labels are
never written.
"""

import argparse
import os
import random

from bert.data import classification_data as cd


def rest_of_train(glue_task, train_file, skip):
  """The texts (tab-joined pairs) of the rows after the first `skip`."""
  examples = cd.read_glue(glue_task, train_file)
  if skip >= len(examples):
    raise SystemExit(f"{train_file}: --skip {skip} leaves none of its "
                     f"{len(examples)} rows")
  return [e.text_a if e.text_b is None else f"{e.text_a}\t{e.text_b}"
          for e in examples[skip:]]


def augmented_pairs(pairs, drop, seed):
  """Four unlabeled variants of each (a, b): (b, a), (drop(a), b),
  (a, drop(b)), (drop(b), drop(a)), where drop removes each
  whitespace-separated word with probability `drop`."""
  rng = random.Random(seed)

  def dropped(text):
    words = text.split()
    kept = [w for w in words if rng.random() >= drop]
    return " ".join(kept or words)

  out = []
  for a, b in pairs:
    out += [(b, a), (dropped(a), b), (a, dropped(b)), (dropped(b), dropped(a))]
  return out


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__,
                                   formatter_class=argparse.RawTextHelpFormatter)
  sub = parser.add_subparsers(dest="command", required=True)
  rest = sub.add_parser("rest")
  rest.add_argument("--glue_task", required=True)
  rest.add_argument("--train_file", required=True)
  rest.add_argument("--skip", type=int, required=True)
  rest.add_argument("--out", required=True)
  pairs = sub.add_parser("pairs")
  pairs.add_argument("--train_file", required=True)
  pairs.add_argument("--glue_task", default="mrpc")
  pairs.add_argument("--drop", type=float, default=0.15)
  pairs.add_argument("--seed", type=int, default=1)
  pairs.add_argument("--out", required=True)
  args = parser.parse_args(argv)
  if args.command == "rest":
    lines = rest_of_train(args.glue_task, args.train_file, args.skip)
  else:
    if not 0.0 <= args.drop < 1.0:
      raise SystemExit(f"--drop must be in [0, 1), got {args.drop}")
    examples = cd.read_glue(args.glue_task, args.train_file)
    if any(e.text_b is None for e in examples):
      raise SystemExit(f"{args.train_file}: pairs needs a pair task's file")
    lines = [f"{a}\t{b}" for a, b in augmented_pairs(
        [(e.text_a, e.text_b) for e in examples], args.drop, args.seed)]
  with open(args.out + ".tmp", "w", encoding="utf-8") as f:   # whole or absent
    f.writelines(line + "\n" for line in lines)
  os.replace(args.out + ".tmp", args.out)
  print(f"{args.out}: {len(lines)} lines")


if __name__ == "__main__":
  main()
