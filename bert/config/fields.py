"""The fields of `BertConfig` as the class and its file formats share them:
the activations and families it accepts, google-research's field names
(`bert_config.json`'s, which the Hugging Face names are translated to), the
fields a config file must state, and the extensions of google-research's
fields, written only where they differ from BERT's.
"""

# Activation names this library understands (see bert/layers/activations.py).
ACTIVATIONS = ("gelu", "gelu_exact", "relu", "silu", "tanh", "linear")

FAMILIES = ("bert", "roberta", "albert", "distilbert", "electra")

# google-research's bert_config.json fields.
GOOGLE_FIELDS = (
    "vocab_size",
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "intermediate_size",
    "hidden_act",
    "hidden_dropout_prob",
    "attention_probs_dropout_prob",
    "max_position_embeddings",
    "type_vocab_size",
    "initializer_range",
)

# Our extensions of the google-research fields, written to bert_config.json
# only when they differ from BERT's (so plain BERT configs stay byte-for-byte
# google-research's).
EXTENSIONS = dict(embedding_size=None, norm_first=False,
                  layer_norm_epsilon=1e-12, family="bert", position_offset=0,
                  use_pooler=True, num_hidden_groups=None, pad_token_id=0)

# Fields that fix the weight shapes: a config file must state them.
STRUCTURAL_FIELDS = ("vocab_size", "hidden_size", "num_hidden_layers",
                     "num_attention_heads", "intermediate_size",
                     "max_position_embeddings")
