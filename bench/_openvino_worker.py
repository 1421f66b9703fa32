"""Benchmark worker for OpenVINO (CPU plugin) running Hugging Face
`transformers` BertModel, converted from PyTorch the way OpenVINO's own
guides convert it (`openvino.convert_model(model, example_input=...)`).

  python -m bench._openvino_worker

Precision: OpenVINO's default (`precision` unset: its CPU plugin computes in
bf16 where the CPU has AVX512_BF16 or AMX, else fp32), or "fp32" (the
INFERENCE_PRECISION_HINT f32). Inference only. The precision OpenVINO
reports goes to the worker's log.
"""

import sys

import openvino as ov
import torch
import transformers

from bench import _protocol as P
from bench._torch_worker import _config


def build(spec):
  if spec["mode"] != "infer":
    raise ValueError("the OpenVINO worker runs inference only")
  ids, mask, types, _ = P.synthetic_batch(spec["batch"], spec["seq"])
  example = dict(input_ids=torch.tensor(ids), attention_mask=torch.tensor(mask),
                 token_type_ids=torch.tensor(types))
  model = transformers.BertModel(_config(spec)).eval()
  with torch.no_grad():
    converted = ov.convert_model(model, example_input=example)
  config = {"INFERENCE_NUM_THREADS": P.THREADS, "PERFORMANCE_HINT": "LATENCY"}
  if spec.get("precision") == "fp32":
    config["INFERENCE_PRECISION_HINT"] = "f32"
  compiled = ov.Core().compile_model(converted, "CPU", config)
  print(f"{spec['model']}: OpenVINO {ov.__version__} computes in "
        f"{compiled.get_property('INFERENCE_PRECISION_HINT').to_string()}",
        file=sys.stderr, flush=True)
  request = compiled.create_infer_request()
  feed = {k: v.numpy() for k, v in example.items()}

  def forward():
    result = request.infer(feed)
    return float(sum(v.sum() for v in result.values()))

  return forward


if __name__ == "__main__":
  P.serve(build)
