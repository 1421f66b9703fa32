"""One name per concept (issue 43): a renamed keyword is refused with an
error naming the new one, and a renamed gin field still reads from saved
configs."""

import pytest

from bert import export


@pytest.mark.parametrize("fn", [export.export_classifier,
                                export.export_span_labeler,
                                export.export_tagger])
def test_export_vocab_file_keyword_names_vocab(fn):
  with pytest.raises(TypeError, match=rf"{fn.__name__}\(vocab_file=...\): "
                     "the argument is now named vocab"):
    fn(None, "unused", vocab_file=["[PAD]"], lower_case=True)
  # Negative control: the new name reaches the function (which then fails on
  # its missing arguments, not on the name).
  with pytest.raises(TypeError) as e:
    fn(None, "unused", vocab=["[PAD]"], lower_case=True)
  assert "now named" not in str(e.value)
