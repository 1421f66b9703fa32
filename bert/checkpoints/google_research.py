"""google-research ALBERT and ELECTRA TF1 checkpoints: their variable names
<-> ours (google-research BERT's, `mapping.py`), and their config files.

Both repositories build the BERT encoder with other variable scopes; the
weights are BERT's. Which repository a checkpoint's names are is told here
(`names_family`), and each family's names and config are translated by its
own module: `google_research_albert` (ALBERT's groups of shared blocks,
albert_config.json) and `google_research_electra` (the discriminator and
generator in one file, a config inferred from the weights). The TF1 TF Hub
ALBERT modules hold the same names, some under `module/`.
"""

import dataclasses
import os
from typing import Dict, Optional, Tuple

import numpy as np

from bert.checkpoints import mapping
from bert.checkpoints.errors import CheckpointError
from bert.checkpoints.google_research_albert import (ALBERT_CONFIG,
                                                     albert_config,
                                                     albert_config_dict,
                                                     albert_from_canonical,
                                                     albert_to_canonical)
from bert.checkpoints.google_research_electra import (ELECTRA_SCOPES,
                                                      electra_config,
                                                      electra_from_canonical,
                                                      electra_to_canonical)
from bert.config import BertConfig
from bert.io import present
from bert.untrusted import read_json
from bert.validation import ConfigError

__all__ = ["ALBERT_CONFIG", "albert_config", "albert_config_dict",
           "electra_config", "folder_config", "from_canonical",
           "is_google_research", "names_family", "to_canonical"]

# TF1 TF Hub modules scope their variables under the module's name.
_MODULE_PREFIX = "module/"


def names_family(names) -> Optional[str]:
  """"albert" or "electra" when the names are that repository's, else None
  (google-research BERT's own names, or ours)."""
  names = [n[len(_MODULE_PREFIX):] if n.startswith(_MODULE_PREFIX) else n
           for n in names]
  if any(n.startswith("bert/encoder/transformer/group_") for n in names):
    return "albert"
  if any(n.startswith(("electra/encoder/", "generator/encoder/"))
         for n in names):
    return "electra"
  return None


def is_google_research(names) -> bool:
  """Whether a name-based checkpoint holds google-research BERT, ALBERT or
  ELECTRA names."""
  return any(n.startswith(("bert/", _MODULE_PREFIX + "bert/") +
                          ELECTRA_SCOPES) for n in names)


def to_canonical(arrays: Dict[str, np.ndarray], source: str,
                 hidden_size: Optional[int] = None
                 ) -> Tuple[Dict[str, np.ndarray], Optional[str]]:
  """({our TF1 name: array}, the family the names say or None) of a
  google-research checkpoint's arrays. Names of no rule are kept, so the
  strict assignment names them. `hidden_size`, the width the folder's
  config file describes, picks ELECTRA's generator from a file holding both
  networks when it is the generator's width and not the discriminator's."""
  arrays = {n[len(_MODULE_PREFIX):] if n.startswith(_MODULE_PREFIX) else n: v
            for n, v in arrays.items()}
  family = names_family(arrays)
  if family == "albert":
    return albert_to_canonical(arrays, source), family
  if family == "electra":
    return electra_to_canonical(arrays, source, hidden_size), family
  return arrays, family


def from_canonical(arrays: Dict[str, np.ndarray], family: str
                   ) -> Dict[str, np.ndarray]:
  """{our TF1 name: array} in the names of `family`'s google-research
  repository (ALBERT, ELECTRA); BERT's and the other families' as they are.

  An ELECTRA encoder is written as google-research's discriminator (with
  its head when it has one), or, with a masked-LM head, as its generator;
  names of neither (a pooler) keep BERT's."""
  if family == "albert":
    return albert_from_canonical(arrays)
  if family == "electra":
    return electra_from_canonical(arrays)
  return arrays


# ------------------------------------------------------------------ config
def folder_config(folder: str, google_config: str, arrays,
                  family: Optional[str], source: str
                  ) -> Tuple[BertConfig, Optional[str]]:
  """(config, the file it was read from; None when inferred) of a
  google-research or Model Garden checkpoint folder whose names say
  `family` (`names_family`; None: BERT's names).

  `google_config` (bert_config.json) is read first, then ALBERT's
  albert_config.json; an ELECTRA checkpoint without either (as released)
  gets ELECTRA's own defaults for what the weights do not show."""
  path = os.path.join(folder, google_config)
  albert_path = os.path.join(folder, ALBERT_CONFIG)
  if present(path):
    config = BertConfig.from_json_file(path, format="google")
    raw = read_json(path, CheckpointError)
    return _with_family(config, raw, family, arrays, path), path
  if present(albert_path):
    return albert_config(albert_path), albert_path
  if family == "electra":
    return electra_config(arrays, source), None
  raise CheckpointError(f"{path}: config file not found" + (
      f" (nor {ALBERT_CONFIG})" if family == "albert" else ""))


def _with_family(config, raw, family, arrays, path):
  """A bert_config.json of a checkpoint with ALBERT or ELECTRA names: its
  family is theirs. A file without `family` is google-research style, where
  ELECTRA's "gelu" is the exact form."""
  if family is None or config.family == family:
    return config
  if "family" in raw:
    raise CheckpointError(f"{path}: family={config.family!r}, but the "
                          f"checkpoint's variable names are {family}'s")
  changes = dict(family=family)
  if family == "electra":
    changes["use_pooler"] = "bert/pooler/dense/kernel" in arrays
    if config.hidden_act == "gelu":
      changes["hidden_act"] = "gelu_exact"
  else:
    changes["num_hidden_groups"] = (config.num_hidden_groups
                                    or mapping.num_layer_blocks(arrays))
  try:
    return dataclasses.replace(config, **changes)
  except ConfigError as e:
    raise CheckpointError(f"{path}: {e}") from None

