"""Names of the features that pass between data, models and exports: the one
place they are spelled. Everything else imports them from here.

The encoder inputs follow the TF Hub BERT interface; the pre-training record
features follow google-research `create_pretraining_data.py`.
"""

# TF Hub BERT encoder inputs, int32 [batch, seq].
ENCODER_INPUTS = ("input_word_ids", "input_mask", "input_type_ids")
# Extra encoder inputs of packed rows (several examples per row): position
# ids restarting per example [batch, seq], an explicit attention mask
# [batch, seq, seq] and each example's [CLS] position [batch, k].
PACKED_ENCODER_INPUTS = ("input_positions", "attention_mask", "cls_positions")
# What a packed batch feeds the model besides ENCODER_INPUTS (the model
# derives the attention mask from them).
PACKED_ROW_INPUTS = ("input_positions", "cls_positions")
# Pre-training TFRecord features, google-research names.
RECORD_FEATURES = ("input_ids", "input_mask", "segment_ids",
                   "masked_lm_positions", "masked_lm_ids", "masked_lm_weights",
                   "next_sentence_labels")
