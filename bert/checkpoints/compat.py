"""Whether a vocab or a checkpoint fits a model: the one place both are checked.

Every path that pairs a vocab file with a config (the loader, fine-tuning,
pre-training) and every path that copies a checkpoint into a model built
from another config goes through these, so the checks and their messages
are the same everywhere.
"""

from bert.checkpoints.errors import CheckpointMismatchError
from bert.config import BertConfig
from bert.layers.vocabulary import KIND_OF_FAMILY, Vocabulary

# The config fields that decide the encoder's variables and their shapes,
# and what the weights mean (the family's names, positions, sharing).
SHAPE_FIELDS = ("vocab_size", "hidden_size", "num_hidden_layers",
                "intermediate_size", "max_position_embeddings",
                "type_vocab_size", "embedding_size", "norm_first", "family",
                "position_offset", "use_pooler", "num_hidden_groups")


def check_vocab_size(vocab_file: str, config: BertConfig) -> Vocabulary:
  """The vocabulary of `vocab_file` (well formed, see `Vocabulary.from_file`),
  or a CheckpointMismatchError when its kind is not the family's (a RoBERTa
  vocab.json for a WordPiece model) or its size is not `config.vocab_size`:
  ids past the embedding table, or rows no token reaches, mean the vocab
  belongs to another model."""
  tokens = Vocabulary.from_file(vocab_file)
  expected = KIND_OF_FAMILY[config.family]
  if tokens.kind != expected:
    raise CheckpointMismatchError(
        f"vocab {vocab_file} is a {tokens.kind} vocabulary but the model "
        f"(family={config.family}) tokenizes with {expected}; this vocab does "
        "not belong to this model")
  if len(tokens) != config.vocab_size:
    raise CheckpointMismatchError(
        f"vocab {vocab_file} has {len(tokens)} tokens but the model's "
        f"vocab_size={config.vocab_size}; this vocab does not belong to "
        "this model")
  return tokens


def check_same_shapes(found: BertConfig, expected: BertConfig,
                      source: str) -> None:
  """A CheckpointMismatchError naming every `SHAPE_FIELDS` entry where the
  checkpoint at `source` (config `found`) differs from the model's."""
  mismatched = [f for f in SHAPE_FIELDS
                if getattr(found, f) != getattr(expected, f)]
  if mismatched:
    raise CheckpointMismatchError(
        f"checkpoint {source}: config differs from the model's in "
        + ", ".join(f"{f} ({getattr(found, f)} vs {getattr(expected, f)})"
                    for f in mismatched))
