"""SQuAD 1.1 dev as (question, paragraph) pairs for retrieval fine-tuning,
split by article: half the articles to train on, the other half to test
(the issue's acceptance 3).

  python -m bench.embedding_squad_data --output_dir=DATA [--seed=42]

Writes DATA/squad_train.jsonl and DATA/squad_test.jsonl, one JSON object a
line, {"question": ..., "paragraph": ...} for every question of the side's
articles in file order (the input format of `bert-train --task=embedding`,
`bert.data.text_columns`; configs/embedding_squad.gin reads them), and
prints the counts. The split is `bert.data.squad_examples.split_articles`,
the article split of the SQuAD task (`SquadData.train_fraction`), with the
same seed default (`FinetuningInputs.seed`, 42). An article's questions are
never on both sides; evaluation searches each test question among the test
half's distinct paragraphs.
"""

import argparse
import json
import os

from bert import io as _io
from bert.data.squad_examples import split_articles
from bert.data.squad_json import article_titles, load_squad
from bert.testing import shared_data


def pairs(path, titles):
  """(question, paragraph) of every question of the articles `titles`."""
  wanted = set(titles)
  return [(e.question, e.context) for a in load_squad(path)
          if a.title in wanted for e in a.examples]


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--output_dir", required=True)
  parser.add_argument("--squad", default=None,
                      help="SQuAD json (default: the shared dev-v1.1.json)")
  parser.add_argument("--train_fraction", type=float, default=0.5)
  parser.add_argument("--seed", type=int, default=42)
  args = parser.parse_args()
  path = args.squad or shared_data("squad", "dev-v1.1.json")
  train, test = split_articles(article_titles(path), args.train_fraction,
                               args.seed)
  os.makedirs(args.output_dir, exist_ok=True)
  for name, titles in (("squad_train.jsonl", train),
                       ("squad_test.jsonl", test)):
    rows = pairs(path, titles)
    with _io.atomic_file(os.path.join(args.output_dir, name)) as f:
      for question, paragraph in rows:
        f.write(json.dumps(dict(question=question, paragraph=paragraph),
                           ensure_ascii=False) + "\n")
    print(f"{name}: {len(titles)} articles, {len(rows)} questions, "
          f"{len({p for _, p in rows})} distinct paragraphs")


if __name__ == "__main__":
  main()
