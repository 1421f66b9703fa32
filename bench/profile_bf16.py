"""Where bf16 inference time goes: our encoder in TensorFlow (the TF
profiler's self time per op type, `mixed_bfloat16` through oneDNN) beside
OpenVINO on the same weights (its per-node counters; its default precision)
and on the Hugging Face model `bench.run` compares with,
batch 8, seq 128, 2 threads. `served`: our network as a bf16 serving export
runs it (`bert.serving.frozen`: bf16 weights frozen into the graph).

  python -m bench.profile_bf16 [bert_base|bert_small|minilm_l6] [served]
"""
import os, sys, time
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"; os.environ["TF_ENABLE_ONEDNN_OPTS"] = "1"
import tensorflow as tf
tf.config.threading.set_intra_op_parallelism_threads(2)
import bert
from bert.precision import policy_scope
from bench import _protocol as P
model = sys.argv[1] if len(sys.argv) > 1 else "bert_base"
s = P.SHAPES[model]
cfg = bert.BertConfig(vocab_size=P.VOCAB, hidden_size=s["hidden"], num_hidden_layers=s["layers"],
                      num_attention_heads=s["heads"], intermediate_size=s["intermediate"],
                      max_position_embeddings=512, type_vocab_size=2)
with policy_scope("bf16"):
  enc = bert.BertEncoder(cfg)
ids, mask, types, _ = P.synthetic_batch(8, 128)
x = dict(input_word_ids=tf.constant(ids, tf.int32), input_mask=tf.constant(mask, tf.int32),
         input_type_ids=tf.constant(types, tf.int32))
# Non-zero biases, as a trained model has (bench._tf_worker._trained_like).
import numpy as np
enc(x)
rng = np.random.default_rng(0)
enc.set_weights([w + rng.normal(0, 0.02, w.shape).astype(w.dtype) if w.ndim == 1 else w
                 for w in enc.get_weights()])
served = "served" in sys.argv[2:]
if served:
  from bert.serving import frozen
  copy = frozen.bf16_weights_copy(enc)
  network = frozen.freeze(lambda t: dict(copy(t, training=False)),
                          {k: tf.TensorSpec([None, None], tf.int32) for k in x})
# Unknown batch and length, as a served model (and `predict`) runs.
@tf.function(input_signature=[{k: tf.TensorSpec([None, None], tf.int32) for k in x}])
def f(x):
  o = network(x) if served else enc(x, training=False)
  return tf.reduce_sum(tf.cast(o["sequence_output"], tf.float32)) + tf.reduce_sum(tf.cast(o["pooled_output"], tf.float32))
for _ in range(3): f(x).numpy()
t = time.perf_counter(); n = 10
for _ in range(n): f(x).numpy()
wall = (time.perf_counter() - t) / n
from bench._tf_profile import op_self_times
by_type = op_self_times(lambda: f(x).numpy(), 5, "/tmp/prof_bf16")
total = sum(by_type.values())
print(f"{model} bf16{' served' if served else ''} b8 s128: {wall*1000:.1f} ms per forward ({8/wall:.1f} seq/s); profiled self time {total/5/1000:.1f} ms per forward")
for k, v in sorted(by_type.items(), key=lambda kv: -kv[1])[:15]:
  print(f"  {k:28s} {100*v/total:5.1f}%  {v/5/1000:7.2f} ms")

def profile_openvino(label, converted, feed_of):
  """Wall time and OpenVINO's per-node counters (node type and kernel) of
  `converted` at its default precision; `feed_of(compiled)` gives its inputs."""
  compiled = core.compile_model(converted, "CPU", {"INFERENCE_NUM_THREADS": 2,
                                                   "PERFORMANCE_HINT": "LATENCY",
                                                   "PERF_COUNT": "YES"})
  req = compiled.create_infer_request()
  feed = feed_of(compiled)
  for _ in range(3): req.infer(feed)
  t = time.perf_counter()
  for _ in range(n): req.infer(feed)
  wall = (time.perf_counter() - t) / n
  by = {}
  for info in req.get_profiling_info():
    key = f"{info.node_type} ({info.exec_type})"
    by[key] = by.get(key, 0.0) + info.real_time.total_seconds() * 1e6
  tot = sum(by.values())
  precision = compiled.get_property("INFERENCE_PRECISION_HINT").to_string()
  print(f"OpenVINO ({precision}) on {label}: {wall*1000:.1f} ms per forward ({8/wall:.1f} seq/s); node time {tot/1000:.1f} ms")
  for k, v in sorted(by.items(), key=lambda kv: -kv[1])[:12]:
    print(f"  {k:44s} {100*v/tot:5.1f}%  {v/1000:7.2f} ms")


# OpenVINO on the same encoder (its fp32 graph; OpenVINO computes in bf16 by default here).
import openvino as ov
core = ov.Core()
with policy_scope("fp32"):
  enc32 = bert.BertEncoder(cfg)
enc32(x); enc32.set_weights(enc.get_weights())
@tf.function(input_signature=[{k: tf.TensorSpec([None, None], tf.int32, name=k) for k in x}])
def g(inp):
  o = enc32(inp, training=False)
  return {"pooled_output": o["pooled_output"], "sequence_output": o["sequence_output"]}
profile_openvino("our graph", ov.convert_model(g.get_concrete_function()),
                 lambda c: {p.get_any_name(): x[next(k for k in x if k in p.get_any_name())].numpy()
                            for p in c.inputs})

# OpenVINO on the Hugging Face model, converted from PyTorch: the peer `bench.run`
# compares with (bench/_openvino_worker.py). Its graph has a ScaledDotProductAttention
# op, which the CPU plugin runs as one Subgraph.
import torch, transformers
from bench._torch_worker import _config
example = {"input_ids": torch.tensor(ids), "attention_mask": torch.tensor(mask),
           "token_type_ids": torch.tensor(types)}
hf = transformers.BertModel(_config({"model": model})).eval()
with torch.no_grad():
  converted = ov.convert_model(hf, example_input=example)
profile_openvino("the Hugging Face model", converted,
                 lambda c: {k: v.numpy() for k, v in example.items()})
