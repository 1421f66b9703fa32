"""`bench.serving` worker for our serving exports (in this library's venv):

  python -m bench._ours_serving_worker     (the protocol of bench.serving)

spec["model"] is a serving export (`bert-export --kind=classifier|
span_labeler [--precision=...]`), loaded with `bert.export.load_serving`
(whatever its precision and runtime). SST-2 sends `text`, MRPC `text` +
`text_b`, SQuAD `question` + `context`; the predictions are the `label`
names or the `answer` texts, decoded from UTF-8.
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import bert  # noqa: E402,F401  pylint: disable=unused-import  # before TF: its oneDNN default
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from bench.serving import THREADS, serve  # noqa: E402

INPUTS = {"sst2": (("text", "text"),),
          "mrpc": (("text", "text"), ("text_b", "text_b")),
          "squad": (("question", "question"), ("context", "context"))}


def build(spec):
  from bert import export  # pylint: disable=g-import-not-at-top
  serving = export.load_serving(spec["model"], num_threads=THREADS)
  how = "bert.export.load_serving"
  task = spec["task"]
  output = "answer" if task == "squad" else "label"

  def predict(examples):
    inputs = {name: np.array([e[key] for e in examples], object)
              for name, key in INPUTS[task]}
    return [v.decode("utf-8") if isinstance(v, bytes) else str(v)
            for v in np.asarray(serving(**inputs)[output]).tolist()]

  info = dict(loader=how, versions={"tensorflow": tf.__version__},
              manifest={k: v for k, v in getattr(serving, "manifest", {}).items()
                        if k in ("precision", "runtime", "kind", "network")},
              TF_ENABLE_ONEDNN_OPTS=os.environ.get("TF_ENABLE_ONEDNN_OPTS", "(unset)"))
  return predict, info


if __name__ == "__main__":
  tf.config.threading.set_intra_op_parallelism_threads(THREADS)
  tf.config.threading.set_inter_op_parallelism_threads(THREADS)
  serve(build)
