"""Former name of `bert.tasks.encoded_inputs` (it holds `EncodedInputs`;
`FinetuningInputs` is in `bert.tasks.configs`). Kept only while
bert/tasks/distillation.py, rewritten on another branch, still imports it:
delete this file when that import reads `bert.tasks.encoded_inputs`."""

from bert.tasks.encoded_inputs import EncodedInputs  # noqa: F401
