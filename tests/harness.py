"""The checks every Keras layer and model of the library must pass.

KerasHub's `TestCase.run_layer_test` / `run_backbone_test` way: a test states
how to build a layer or model and what to feed it, and one call runs the
generic checks, each of which proves one property:

  config:      `get_config` -> `from_config` gives the same object. The
               config is JSON-serialisable and names every constructor
               argument it was given (with the same value); the registered
               name leads back to the class; the clone made from the JSON
               config has an equal config and the same weights (the same
               trainable ones too), and with the original's weights copied in
               computes exactly the original's outputs.
  saved_model: a SavedModel written and read back computes the same outputs.
               "plain": `tf.saved_model.save` of a serving function with
               dynamic batch and sequence dimensions, loaded by plain
               TensorFlow (the graph traces with unknown shapes, every
               variable is tracked). "keras": tf_keras SavedModel format
               without traces, `tf_keras.models.load_model` revives the real
               class (from its config) and restores every weight.
               "keras_traced": the default `model.save` (call functions
               traced), revived by tf_keras and also called through plain
               `tf.saved_model.load`, as a server loads it.
  training:    every trainable weight gets a finite gradient from a simple
               loss on the outputs, and one optimizer step lowers that loss.
  mixed_precision: under a mixed policy the object builds and runs, its
               outputs have the expected dtypes and stay finite and close to
               float32's, and every variable stays float32. The global policy
               is restored afterwards, whatever happens.
  golden:      (real weights) the first values of the outputs equal values
               recorded once from the reference implementation.

`run_layer_test` and `run_model_test` run them; each `check_*` function is
usable alone. A failed check raises AssertionError naming the class and the
check. tests/harness_test.py shows that each check can fail.

Tasks (`bert.tasks`) have their own checks (stats, determinism, fit,
predict, export; see "task checks" below), run by `run_task_test`.
"""

import contextlib
import json
import os
import tempfile
from typing import Any, Callable, Mapping, Optional, Sequence, Union

import numpy as np
import tensorflow as tf
import tf_keras

from conftest import max_abs_diff

CHECKS = ("config", "saved_model", "training", "mixed_precision")

# Default mixed-precision tolerances: max |mixed - float32| of an output, for
# the O(1) values of tiny random models. bf16 keeps 8 mantissa bits (~0.4%
# per rounding), fp16 11.
MIXED_ATOL = {"mixed_bfloat16": 0.1, "mixed_float16": 0.02}


# ------------------------------------------------------------------ helpers
def _name(obj) -> str:
  return type(obj).__name__


def _call(obj, input_data, call_kwargs=None):
  """`obj(input_data, training=False, **call_kwargs)` (layers without a
  `training` argument have it dropped by Keras)."""
  return obj(input_data, training=False, **(call_kwargs or {}))


def _leaves(structure):
  """Tensors of a nest, composites (ragged) expanded into their components."""
  return [tf.convert_to_tensor(t) if not isinstance(t, tf.Tensor) else t
          for t in tf.nest.flatten(structure, expand_composites=True)]


def assert_outputs_close(expected, actual, atol: float, what: str):
  """Same nest structure, shapes and dtypes, values within `atol` (0: equal)."""
  tf.nest.assert_same_structure(expected, actual, expand_composites=True)
  for i, (e, a) in enumerate(zip(_leaves(expected), _leaves(actual))):
    assert e.dtype == a.dtype, (
        f"{what}: output {i} dtype {a.dtype} != {e.dtype}")
    assert e.shape == a.shape, (
        f"{what}: output {i} shape {a.shape} != {e.shape}")
    if e.dtype == tf.string or e.dtype.is_bool or e.dtype.is_integer:
      assert np.array_equal(e.numpy(), a.numpy()), f"{what}: output {i} differs"
    else:
      diff = max_abs_diff(e, a)
      assert diff <= atol, (f"{what}: output {i} differs by {diff:.3g} "
                            f"(tolerance {atol:.3g})")


def _plain_value(v) -> bool:
  if v is None or isinstance(v, (bool, int, float, str)):
    return True
  if isinstance(v, (list, tuple)):
    return all(_plain_value(x) for x in v)
  if isinstance(v, dict):
    return all(isinstance(k, str) and _plain_value(x) for k, x in v.items())
  return False


def _as_config_value(v):
  """What a constructor argument `v` must appear as in the JSON form of
  `get_config()`, or None when there is no rule for its kind (the argument
  is then skipped)."""
  if _plain_value(v):
    value = v
  elif isinstance(v, type):
    value = tf_keras.utils.get_registered_name(v)
  elif isinstance(v, tf_keras.layers.Layer):
    value = tf_keras.layers.serialize(v)
  elif hasattr(v, "to_dict"):
    value = v.to_dict()
  else:
    return None
  return json.loads(json.dumps(value))    # tuples become lists, as in JSON


def _float_leaves(outputs):
  return [t for t in _leaves(outputs) if t.dtype.is_floating]


def _relaxed_spec(x):
  """A TensorSpec for `x` with every dimension dynamic except the feature
  (last) dimension of float inputs, which layers need to build."""
  if isinstance(x, tf.RaggedTensor):
    return tf.RaggedTensorSpec([None] * x.shape.rank, x.dtype, x.ragged_rank,
                               x.row_splits.dtype)
  x = tf.convert_to_tensor(x)
  shape = [None] * x.shape.rank
  if x.dtype.is_floating and x.shape.rank:
    shape[-1] = x.shape[-1]
  return tf.TensorSpec(shape, x.dtype)


def _is_tensor_like(x) -> bool:
  return isinstance(x, (tf.Tensor, tf.RaggedTensor, np.ndarray, tf.Variable))


@contextlib.contextmanager
def _what(cls_name: str, check: str):
  """Prefixes assertion messages with the class and check that failed."""
  try:
    yield
  except AssertionError as e:
    raise AssertionError(f"{cls_name} [{check}]: {e}") from e


# ------------------------------------------------------------------ checks
def check_config_round_trip(obj, input_data, call_kwargs=None, *,
                            init_kwargs: Optional[Mapping[str, Any]] = None,
                            config_exclude: Sequence[str] = (),
                            atol: float = 0.0):
  """get_config -> from_config gives an equal object computing equal outputs.

  Proves: the config is JSON-serialisable (SavedModel metadata needs it);
  every constructor argument in `init_kwargs` (except `config_exclude`)
  appears in the config with the value given (so e.g. a dropout rate, which
  does not change inference outputs, is not silently dropped); the class is
  found again by its registered name (as `tf_keras.layers.deserialize` finds
  it); `from_config` of the JSON form makes a clone whose config equals the
  original's; the clone has the same weights (names and shapes) and the
  same trainable ones (a frozen part stays frozen), and with the original's
  values it computes the original's outputs within `atol` (0: bit for bit).

  Returns the clone.
  """
  with _what(_name(obj), "config"):
    expected = _call(obj, input_data, call_kwargs)
    serialized = json.loads(json.dumps(tf_keras.layers.serialize(obj)))
    for key, value in (init_kwargs or {}).items():
      if key in config_exclude:
        continue
      want = _as_config_value(value)
      if want is None:
        continue
      got = serialized["config"]
      assert key in got, f"get_config() lacks constructor argument {key!r}"
      assert got[key] == want, (f"get_config()[{key!r}] = {got[key]!r}, "
                                f"constructed with {want!r}")
    # What `tf_keras.layers.deserialize` (and SavedModel revival) looks the
    # class up by; tf_keras' own classes are found without the registry.
    name = serialized.get("registered_name")
    if not type(obj).__module__.startswith("tf_keras."):
      found = tf_keras.utils.get_registered_object(name)
      assert found is type(obj), (
          f"registered name {name!r} gives {found}: class not registered?")
    # The clone is made from the JSON form of the config, as tf_keras makes
    # it from SavedModel metadata.
    clone = type(obj).from_config(serialized["config"])
    clone_config = json.loads(json.dumps(tf_keras.layers.serialize(clone)))
    assert clone_config["config"] == serialized["config"], (
        "from_config(c).get_config() != c")
    _call(clone, input_data, call_kwargs)              # builds lazy weights
    names = lambda weights: [w.name for w in weights]
    shapes = lambda m: [tuple(w.shape) for w in m.weights]
    assert shapes(clone) == shapes(obj), "the clone's weights differ in shape"
    assert names(clone.weights) == names(obj.weights), (
        "the clone's weights differ in name")
    assert names(clone.trainable_weights) == names(obj.trainable_weights), (
        f"the clone has {len(clone.trainable_weights)} trainable weights, the "
        f"original {len(obj.trainable_weights)} (a `trainable` flag lost?)")
    clone.set_weights(obj.get_weights())
    assert_outputs_close(expected, _call(clone, input_data, call_kwargs), atol,
                         "from_config clone with the same weights")
  return clone


def check_saved_model(obj, input_data, call_kwargs=None, *, mode: str = "plain",
                      atol: float = 0.0, graph_atol: float = 1e-6):
  """A SavedModel written and read back computes the same outputs.

  mode "plain": `tf.saved_model.save` of a tf.Module holding only the
    variables and a serving `tf.function` over `obj(inputs, training=False,
    **call_kwargs)` whose signature leaves every dimension dynamic but the
    last of float inputs; loaded with `tf.saved_model.load` (no Keras). Proves
    the forward pass traces with unknown batch and sequence sizes and every
    variable it reads is tracked. Graph outputs within `graph_atol` (graph
    rewrites may reorder float sums).
  mode "keras": tf_keras SavedModel format, `save_traces=False`; loaded with
    `tf_keras.models.load_model`. Proves tf_keras revives the registered
    class from its config and restores every weight into it (outputs within
    `atol`, the same number of weights).
  mode "keras_traced": the default `model.save` (every layer's call traced);
    revived as for "keras", and also called through plain
    `tf.saved_model.load` (`loaded(inputs, training=False)`), as serving does.
  """
  with _what(_name(obj), f"saved_model/{mode}"), \
       tempfile.TemporaryDirectory() as folder:
    expected = _call(obj, input_data, call_kwargs)
    path = os.path.join(folder, "saved_model")
    if mode == "plain":
      static = {k: v for k, v in (call_kwargs or {}).items()
                if not _is_tensor_like(v)}
      tensors = {k: v for k, v in (call_kwargs or {}).items()
                 if _is_tensor_like(v)}
      module = tf.Module()
      module.saved_variables = list(obj.variables)
      module.serve = tf.function(
          lambda inputs, kwargs: obj(inputs, training=False, **kwargs,
                                     **static),
          input_signature=[tf.nest.map_structure(_relaxed_spec, input_data),
                           tf.nest.map_structure(_relaxed_spec, tensors)])
      tf.saved_model.save(module, path)
      loaded = tf.saved_model.load(path)
      assert_outputs_close(expected, loaded.serve(input_data, tensors),
                           graph_atol, "plain SavedModel serving function")
      return
    if mode not in ("keras", "keras_traced"):
      raise ValueError(f"unknown SavedModel mode {mode!r}")
    assert isinstance(obj, tf_keras.Model), "mode 'keras' needs a Model"
    obj.save(path, save_format="tf", save_traces=mode == "keras_traced")
    restored = tf_keras.models.load_model(path)
    assert type(restored) is type(obj), (
        f"load_model gave {type(restored).__name__}, not the class itself")
    assert len(restored.weights) == len(obj.weights), "weights lost or added"
    assert len(restored.trainable_weights) == len(obj.trainable_weights)
    assert_outputs_close(expected, _call(restored, input_data, call_kwargs),
                         atol, "tf_keras.models.load_model")
    if mode == "keras_traced":
      plain = tf.saved_model.load(path)
      assert_outputs_close(expected, _call(plain, input_data, call_kwargs),
                           graph_atol, "plain tf.saved_model.load")


def training_loss(obj, input_data, call_kwargs=None, seed: int = 0):
  """The harness's training loss: the mean squared distance of every float
  output to a fixed random target of its shape, summed over outputs."""
  loss = tf.constant(0.0)
  outputs = _float_leaves(_call(obj, input_data, call_kwargs))
  assert outputs, "no float outputs to put a loss on"
  for i, out in enumerate(outputs):
    target = tf.random.stateless_normal(tf.shape(out), [seed, i])
    loss += tf.reduce_mean(tf.square(tf.cast(out, tf.float32) - target))
  return loss


def check_training_step(obj, input_data, call_kwargs=None, *,
                        no_gradient: Sequence[str] = (),
                        learning_rate: float = 0.01):
  """Every trainable weight learns, and one SGD step lowers a simple loss.

  The loss is `training_loss` (MSE of all float outputs to fixed random
  targets). Proves: gradients reach every trainable weight (except those
  whose names contain a pattern of `no_gradient`, e.g. a pooler a token head
  does not use) and are finite; and an SGD step along them lowers the loss,
  which a gradient of the wrong sign or scale (a broken custom gradient, a
  stop_gradient) does not. The step uses the inference-mode forward pass so
  the decrease is deterministic: dropout would make it random.
  """
  with _what(_name(obj), "training"):
    variables = obj.trainable_variables
    assert variables, "no trainable variables"
    with tf.GradientTape() as tape:
      before = training_loss(obj, input_data, call_kwargs)
    grads = tape.gradient(before, variables)
    missing = [v.name for v, g in zip(variables, grads) if g is None
               and not any(p in v.name for p in no_gradient)]
    assert not missing, f"no gradient reaches {missing}"
    pairs = [(g, v) for g, v in zip(grads, variables) if g is not None]
    for g, v in pairs:
      values = g.values if isinstance(g, tf.IndexedSlices) else g
      assert bool(tf.reduce_all(tf.math.is_finite(values))), (
          f"non-finite gradient for {v.name}")
    old = [tf.identity(v) for _, v in pairs]
    tf_keras.optimizers.SGD(learning_rate).apply_gradients(pairs)
    assert any(max_abs_diff(o, v) > 0 for o, (_, v) in zip(old, pairs)), (
        "the optimizer step changed no weight")
    after = training_loss(obj, input_data, call_kwargs)
    assert float(after) < float(before), (
        f"one SGD step did not lower the loss: {float(before):.6g} -> "
        f"{float(after):.6g}")


def _dtype_of(spec, key, default):
  if isinstance(spec, Mapping):
    return tf.as_dtype(spec.get(key, default))
  return tf.as_dtype(spec if spec is not None else default)


def _by_output(outputs):
  """(key, nest) pairs: a dict output by key, anything else as one item."""
  if isinstance(outputs, Mapping):
    return list(outputs.items())
  return [(None, outputs)]


def check_mixed_precision(obj, input_data, call_kwargs=None, *,
                          policy: str = "mixed_bfloat16",
                          expected_output_dtype=None,
                          atol: Union[None, float, Mapping[str, float]] = None):
  """Under a mixed policy: builds, runs, right dtypes, close to float32.

  A copy is made with `from_config` (config minus its "dtype") while the
  global policy is `policy`, its weights set to `obj`'s (float32), and run.
  Proves: every float output has the expected dtype (`expected_output_dtype`:
  one dtype, or a dict output key -> dtype; default the policy's compute
  dtype), e.g. logits cast to float32 for the loss; every variable stays
  float32 (master weights); outputs are finite and within `atol` (absolute;
  default `MIXED_ATOL[policy]`; a float, or a dict output key -> float) of
  the float32 outputs. The global policy is restored in a `finally`.
  """
  with _what(_name(obj), f"mixed_precision/{policy}"):
    expected = _call(obj, input_data, call_kwargs)
    config = dict(obj.get_config())
    config.pop("dtype", None)
    previous = tf_keras.mixed_precision.global_policy()
    try:
      tf_keras.mixed_precision.set_global_policy(policy)
      compute = tf_keras.mixed_precision.global_policy().compute_dtype
      mixed = type(obj).from_config(config)
      _call(mixed, input_data, call_kwargs)             # builds lazy weights
      mixed.set_weights(obj.get_weights())
      outputs = _call(mixed, input_data, call_kwargs)
    finally:
      tf_keras.mixed_precision.set_global_policy(previous)
    assert mixed.compute_dtype == compute, (
        f"compute dtype {mixed.compute_dtype}, policy says {compute}")
    wrong = [v.name for v in mixed.variables
             if v.dtype.is_floating and v.dtype != tf.float32]
    assert not wrong, f"variables not float32: {wrong}"
    tf.nest.assert_same_structure(expected, outputs, expand_composites=True)
    default_atol = MIXED_ATOL.get(policy, 0.1)
    for (key, out), (_, ref) in zip(_by_output(outputs), _by_output(expected)):
      want = _dtype_of(expected_output_dtype, key, compute)
      tol = (atol.get(key, default_atol) if isinstance(atol, Mapping)
             else default_atol if atol is None else atol)
      what = f"output {key!r}" if key is not None else "the output"
      for o, r in zip(_leaves(out), _leaves(ref)):
        if not r.dtype.is_floating:
          assert o.dtype == r.dtype, f"{what}: {o.dtype} != {r.dtype}"
          continue
        assert o.dtype == want, (
            f"{what} is {o.dtype.name}, expected {want.name}")
        o32 = tf.cast(o, tf.float32).numpy()
        assert np.all(np.isfinite(o32)), f"{what} is not finite"
        diff = max_abs_diff(o32, r)
        assert diff <= tol, (
            f"{what} is {diff:.3g} from float32 (tolerance {tol})")


GoldenSpec = Mapping[str, tuple]


def check_golden_values(outputs, golden: GoldenSpec, atol: float = 1e-4):
  """Output values equal recorded reference values within `atol`.

  `golden` maps a description to (getter, values): `getter(outputs)` picks
  the values to compare (e.g. `lambda o: o["sequence_output"][0, :3, :3]`).
  Proves the numbers, not just the shapes, are those of the reference
  implementation the values were recorded from.
  """
  for what, (getter, values) in golden.items():
    got = np.asarray(getter(outputs), np.float64)
    want = np.asarray(values, np.float64)
    assert got.shape == want.shape, (
        f"golden {what}: shape {got.shape} != {want.shape}")
    diff = max_abs_diff(got, want)
    assert diff <= atol, (f"golden {what}: differs by {diff:.3g} (tolerance "
                          f"{atol})\n got {np.round(got, 7).tolist()}\n"
                          f"want {want.tolist()}")


# ------------------------------------------------------------------ runners
def _build(cls_or_factory: Callable, init_kwargs):
  return cls_or_factory(**dict(init_kwargs or {}))


def _run(obj, input_data, *, init_kwargs, call_kwargs=None, checks=CHECKS,
         expected_output_shape=None, config_exclude=(), config_atol=0.0,
         saved_model_mode="plain", graph_atol=1e-6, no_gradient=(),
         learning_rate=0.01, mixed_precision_policy="mixed_bfloat16",
         expected_mixed_output_dtype=None, mixed_atol=None,
         expected_partial_output=None, golden_atol=1e-4):
  """Runs `checks` on `obj` in a fixed order (training last of the float32
  checks: it changes the weights). Returns `obj`'s outputs."""
  unknown = set(checks) - set(CHECKS)
  if unknown:
    raise ValueError(f"unknown checks {sorted(unknown)}; known: {CHECKS}")
  outputs = _call(obj, input_data, call_kwargs)
  if expected_output_shape is not None:
    shapes = tf.nest.map_structure(lambda t: tuple(t.shape), outputs)
    with _what(_name(obj), "output shape"):
      assert shapes == expected_output_shape, (
          f"output shapes {shapes} != {expected_output_shape}")
  if expected_partial_output is not None:
    with _what(_name(obj), "golden"):
      check_golden_values(outputs, expected_partial_output, golden_atol)
  if "config" in checks:
    check_config_round_trip(obj, input_data, call_kwargs,
                            init_kwargs=init_kwargs,
                            config_exclude=config_exclude, atol=config_atol)
  if "saved_model" in checks:
    check_saved_model(obj, input_data, call_kwargs, mode=saved_model_mode,
                      atol=config_atol, graph_atol=graph_atol)
  if "mixed_precision" in checks:
    policies = mixed_precision_policy
    if isinstance(policies, str):
      policies = [policies]
    for policy in policies:
      check_mixed_precision(obj, input_data, call_kwargs, policy=policy,
                            expected_output_dtype=expected_mixed_output_dtype,
                            atol=mixed_atol)
  if "training" in checks:
    check_training_step(obj, input_data, call_kwargs, no_gradient=no_gradient,
                        learning_rate=learning_rate)
  return outputs


def run_layer_test(cls: Callable, init_kwargs: Optional[Mapping[str, Any]],
                   input_data, **options):
  """Builds `cls(**init_kwargs)`, calls it on `input_data` and runs `checks`.

  Args:
    cls: the layer class (or a factory taking `init_kwargs`).
    init_kwargs: constructor arguments; plain values, classes, layers and
      objects with `to_dict` must reappear in `get_config()`.
    input_data: the first positional argument of `call`.
    call_kwargs: further `call` arguments; tensors (and NumPy arrays) become
      inputs of the SavedModel's serving function, anything else is fixed.
    checks: a subset of `CHECKS` (leave out what does not apply, e.g.
      "training" for a layer without weights, and say why at the call site).
    expected_output_shape: optional nest of shape tuples of the outputs.
    config_exclude: constructor arguments `get_config` leaves out on purpose.
    config_atol: tolerance of the config clone's outputs (default: equal).
    saved_model_mode: see `check_saved_model` (layers: "plain").
    graph_atol: tolerance of outputs computed by a loaded graph.
    no_gradient: name patterns of trainable weights the outputs do not use.
    learning_rate: SGD step size of the training check.
    mixed_precision_policy: one policy name or several.
    expected_mixed_output_dtype: see `check_mixed_precision`.
    mixed_atol: see `check_mixed_precision`.
  Returns:
    The layer's outputs on `input_data`, for further assertions.
  """
  return _run(_build(cls, init_kwargs), input_data, init_kwargs=init_kwargs,
              **options)


def run_model_test(cls: Callable, init_kwargs: Optional[Mapping[str, Any]],
                   input_data, *, saved_model_mode: str = "keras", **options):
  """Builds the model `cls(**init_kwargs)`, calls it and runs `checks`.

  As `run_layer_test` (same arguments), with the SavedModel check in tf_keras
  format by default (`saved_model_mode="keras"`; "keras_traced" for the
  default traced save) and, for models with real weights,
  `expected_partial_output`: golden values (see `check_golden_values`)
  compared within `golden_atol` before any other check. `cls` may be a
  factory (e.g. `lambda: bert.models.load_encoder(...)`) with
  `init_kwargs=None`.

  Returns:
    The model's outputs on `input_data`, for further assertions.
  """
  return _run(_build(cls, init_kwargs), input_data, init_kwargs=init_kwargs,
              saved_model_mode=saved_model_mode, **options)


# ------------------------------------------------------------- task checks
# The checks of a task (`bert.tasks`) as the training loop, Keras and
# serving use it, each proving one property:
#
#   stats:       `compute_stats` of a batch are sums with their own
#                denominators (`check_task_stats`).
#   determinism: a run resumed from a checkpoint lands on the weights of the
#                run it was cut from (`check_resume`).
#   fit:         Keras `fit` on the loop's batches lands on its weights
#                (`check_fit_parity`).
#   predict:     the task's predict mode writes its files, and the model's
#                Keras `predict` on the raw inputs gives the same answers
#                (`check_predictions`).
#   export:      the serving export of the model answers as Keras `predict`
#                does (`check_export`).
#
# `run_task_test` runs them on one task; tests/harness_test.py shows that
# each can fail.
TASK_CHECKS = ("stats", "determinism", "fit", "predict", "export")


def first_batch(task):
  """The first training batch of `task` (the loop's step-0 batch)."""
  return next(iter(task.build_inputs(None, training=True)))


def _rows(features, start, stop):
  n = int(features["input_word_ids"].shape[0])
  return {k: v[start:stop] if v.shape.rank and v.shape[0] == n else v
          for k, v in features.items()}


def _scalars(task, stats):
  """{name: (numerator, denominator)} as floats, each checked a finite
  float32 scalar."""
  out = {}
  for name, pair in stats.items():
    assert isinstance(pair, tuple) and len(pair) == 2, (
        f"stat {name!r} is not a (numerator, denominator) pair")
    values = []
    for part, value in zip(("numerator", "denominator"), pair):
      value = tf.convert_to_tensor(value)
      assert value.shape.rank == 0 and value.dtype == tf.float32, (
          f"stat {name!r}: the {part} is {value.dtype.name} "
          f"{value.shape}, not a float32 scalar")
      assert np.isfinite(float(value)), f"stat {name!r}: {part} {float(value)}"
      values.append(float(value))
    out[name] = tuple(values)
  return out


def check_task_stats(task, model=None, batch=None, rtol: float = 1e-4):
  """The per-batch stats are sums over the batch with their denominators.

  On one training batch, with the model in inference mode. Proves:
  `compute_stats` reports exactly `task.stat_names` (the running sums the
  loop makes), `loss_names` are among them; each numerator and denominator
  is a finite float32 scalar and each denominator positive; the loss
  denominators the loop divides by (`loss_denominators`, from the features
  alone, summed over the global batch before any forward pass) are the loss
  stats' own; ratios named accuracy lie in [0, 1]; and every numerator and
  denominator of the batch is the sum of those of its two halves (within
  `rtol`), which is what makes micro-batches and replicas add up to one
  batch. Returns the batch's stats.
  """
  name = type(task).__name__
  with _what(name, "stats"):
    batch = first_batch(task) if batch is None else batch
    if model is None:
      model = task.build_model()
      task.initialize(model)

    def stats_of(features):
      outputs = model(task.model_inputs(features), training=False)
      stats = _scalars(task, task.compute_stats(features, outputs))
      dens = {k: float(v) for k, v in task.loss_denominators(features).items()}
      return stats, dens

    stats, dens = stats_of(batch)
    assert set(stats) == set(task.stat_names), (
        f"compute_stats gives {sorted(stats)}, stat_names are "
        f"{sorted(task.stat_names)}")
    assert set(task.loss_names) <= set(stats) and task.loss_names, (
        f"loss_names {task.loss_names} not among the stats")
    assert set(dens) == set(task.loss_names), (
        f"loss_denominators gives {sorted(dens)}, loss_names are "
        f"{sorted(task.loss_names)}")
    for k, (numerator, denominator) in stats.items():
      assert denominator > 0, f"stat {k!r}: denominator {denominator}"
      if "accuracy" in k:
        assert 0 <= numerator <= denominator * (1 + 1e-6), (
            f"stat {k!r}: {numerator} of {denominator}")
    for k in task.loss_names:
      assert np.isclose(dens[k], stats[k][1], rtol=1e-6), (
          f"loss {k!r}: the loop divides by {dens[k]}, the stat's own "
          f"denominator is {stats[k][1]}")
    n = int(batch["input_word_ids"].shape[0])
    assert n >= 2, "the check needs a batch of two rows or more"
    halves = [stats_of(_rows(batch, 0, n // 2)),
              stats_of(_rows(batch, n // 2, n))]
    for k, whole in stats.items():
      for i, part in enumerate(("numerator", "denominator")):
        summed = halves[0][0][k][i] + halves[1][0][k][i]
        assert np.isclose(summed, whole[i], rtol=rtol, atol=rtol), (
            f"stat {k!r}: the {part}s of the batch's halves add up to "
            f"{summed:.6g}, the whole batch's is {whole[i]:.6g} (a mean, "
            "not a sum?)")
    for k, whole in dens.items():
      summed = halves[0][1][k] + halves[1][1][k]
      assert np.isclose(summed, whole, rtol=rtol, atol=rtol), (
          f"loss_denominators[{k!r}] of the halves add up to {summed:.6g}, "
          f"the whole batch's is {whole:.6g}")
  return stats


def _model_weights(path):
  """{key: value} of the model's own weights (no optimizer slots) in the
  checkpoint `path`, or the newest one in the folder `path`."""
  if tf.io.gfile.isdir(path):
    path = tf.train.latest_checkpoint(path)
  reader = tf.train.load_checkpoint(path)
  return {n: reader.get_tensor(n) for n, _ in tf.train.list_variables(path)
          if n.startswith("model/") and ".OPTIMIZER_SLOT" not in n
          and not n.startswith("model/optimizer/")}


def train_run(task, model_dir, steps, every, seed=1):
  """`run_experiment` training `task` for `steps` steps, a loop and a
  checkpoint every `every` steps (all kept), on one device, silent; the
  trained model."""
  from bert.training import RuntimeConfig, run_experiment  # pylint: disable=g-import-not-at-top
  model, _ = run_experiment(
      task, str(model_dir), "train",
      RuntimeConfig(train_steps=steps, steps_per_loop=every,
                    checkpoint_interval=every, max_checkpoints=steps,
                    strategy="one_device", seed=seed), log_fn=None)
  return model


def check_resume(make_task, folder, steps: int = 4, seed: int = 1,
                 atol: float = 1e-6):
  """A run resumed from its checkpoint of step `steps // 2` lands on the
  weights of the run it was cut from (with the task's dropout on).

  Two `run_experiment`s: one of `steps` steps with a checkpoint half way,
  and one that starts from a folder holding only that checkpoint (a new
  process would find nothing else). Proves the training data resumes at
  the checkpoint's step (`build_inputs(start_step=...)`), the dropout masks
  and optimizer state resume with it, and nothing else in a step draws
  from an unseeded source. Returns the whole run's folder."""
  name = type(make_task()).__name__
  with _what(name, "determinism"):
    whole = os.path.join(str(folder), "whole")
    train_run(make_task(), whole, steps, steps // 2, seed)
    half = os.path.join(whole, f"ckpt-{steps // 2}")
    assert tf.io.gfile.exists(half + ".index"), f"no checkpoint {half}"
    resumed = os.path.join(str(folder), "resumed")
    os.makedirs(resumed)
    for path in tf.io.gfile.glob(half + ".*"):
      tf.io.gfile.copy(path, os.path.join(resumed, os.path.basename(path)))
    tf.compat.v1.train.update_checkpoint_state(
        resumed, os.path.join(resumed, os.path.basename(half)))
    train_run(make_task(), resumed, steps, steps // 2, seed)
    expected, got = _model_weights(whole), _model_weights(resumed)
    start = _model_weights(half)
    assert max(max_abs_diff(start[k], got[k]) for k in got) > 0, (
        "the resumed steps changed no weight")
    assert expected.keys() == got.keys()
    diff = max(max_abs_diff(expected[k], got[k]) for k in expected)
    assert diff <= atol, (
        f"resumed at step {steps // 2}, the run ends {diff:.3g} from the "
        f"uninterrupted one (tolerance {atol})")
  return whole


def check_fit_parity(make_task, model_dir, steps: int, seed: int = 1,
                     targets: Optional[Callable] = None, rtol: float = 1e-5,
                     atol: float = 1e-6):
  """Keras `fit` (`compile()`'s defaults: the library's recipe) on the
  batches of the custom loop's first `steps` steps lands on the weights the
  loop (`run_experiment` with `OptimizerConfig()`, seed `seed`) saved in
  `model_dir` after them: one step (loss, gradient, clipping, optimizer,
  schedule, dropout masks) on both paths.

  `targets(features)` gives `fit`'s y from a batch (default: the task
  preprocessor's `targets`). Each weight within `rtol` of its largest value
  plus `atol`: Adam turns float noise in a near-zero gradient into an
  update of up to the learning rate (a bias that starts at 0, or one that
  shifts every choice's score alike), well below what a different batch,
  mask, loss or schedule moves (the learning rate on every weight)."""
  name = type(make_task()).__name__
  with _what(name, "fit"):
    model, _ = fit_on_loop_batches(make_task(), steps, seed, targets)
    assert int(model.optimizer.iterations.numpy()) == steps
    got = _checkpoint_weights(model)
    loop = _model_weights(str(model_dir))
    missing = sorted(set(got) - set(loop))
    assert not missing, f"weights the loop's checkpoint lacks: {missing[:3]}"
    worst, diff, where = 0.0, 0.0, None
    for key, value in got.items():
      d = max_abs_diff(value, loop[key])
      ratio = d / (rtol * float(np.max(np.abs(loop[key]))) + atol)
      if ratio > worst:
        worst, diff, where = ratio, d, key
    assert worst <= 1, (
        f"{steps} fit steps end {diff:.3g} from the custom loop's {where} "
        f"({worst:.3g} times the tolerance: {rtol} of its largest value + "
        f"{atol})")
  return model


def fit_on_loop_batches(task, steps: int, seed: int, targets=None,
                        **compile_args):
  """Keras `fit` of a new model of `task` (`compile(**compile_args)`) on
  the batches of the custom loop's first `steps` steps, from global seed
  `seed`, as `run_experiment` starts: (model, history). `targets(features)`
  gives y (default: the task preprocessor's `targets`)."""
  if targets is None:
    targets = task.preprocessor().targets
  tf_keras.utils.set_random_seed(seed)
  model = task.build_model()
  task.initialize(model)
  # The loop's batches, read once (each pass over a dataset may shuffle).
  seen = [(task.model_inputs(f), targets(f)) for f in
          task.build_inputs(None, training=True).take(steps)]
  batches = tf.data.Dataset.from_generator(
      lambda: iter(seen), output_signature=tf.nest.map_structure(
          lambda t: tf.TensorSpec([None] * t.shape.rank, t.dtype), seen[0]))
  model.compile(**compile_args)
  history = model.fit(
      batches.apply(tf.data.experimental.assert_cardinality(steps)),
      epochs=1, verbose=0)
  return model, history


def _checkpoint_weights(model):
  """`_model_weights` of `model`, keyed as a run's checkpoint keys them."""
  with tempfile.TemporaryDirectory() as folder:
    return _model_weights(
        tf.train.Checkpoint(model=model).write(os.path.join(folder, "c")))


def check_predictions(task, model_dir, read_predictions: Callable,
                      raw_inputs: Callable, keras_answers: Callable,
                      atol: float = 1e-5):
  """The task's predict mode (`run_experiment(mode="predict")`) writes
  its `prediction_files`, and the model it returns answers the task's raw
  predict inputs through Keras `predict` as those files do.

  `read_predictions(task, model_dir)`: the files' answers, one per example;
  `raw_inputs(task)`: the predict split as raw inputs; `keras_answers(
  model.predict(raw))`: the same per-example answers. Answers are compared
  exactly, or within `atol` where they are floats. Returns the model."""
  from bert.training import RuntimeConfig, run_experiment  # pylint: disable=g-import-not-at-top
  with _what(type(task).__name__, "predict"):
    model, _ = run_experiment(task, str(model_dir), "predict",
                              RuntimeConfig(strategy="one_device"), log_fn=None)
    written = set(os.listdir(str(model_dir)))
    missing = [f for f in task.prediction_files[:1] if f not in written]
    assert not missing, f"predict wrote no {missing}"
    expected = read_predictions(task, str(model_dir))
    got = keras_answers(model.predict(raw_inputs(task)))
    _same_answers(expected, got, atol, "Keras predict", "the task's files")
  return model


def check_export(model, folder, served_inputs: Callable, served_answers: Callable,
                 keras_answers: Callable, raw, atol: float = 1e-5):
  """The serving export of `model` (`model.export`, loaded with
  `load_serving`) answers `raw` as Keras `predict` does.

  `served_inputs(raw)`: the export's string inputs; `served_answers(
  outputs)` and `keras_answers(model.predict(raw))`: per-example answers."""
  from bert import export  # pylint: disable=g-import-not-at-top
  with _what(_name(model), "export"):
    path = os.path.join(str(folder), "export")
    model.export(path)
    served = export.load_serving(path)(**served_inputs(raw))
    expected = keras_answers(model.predict(raw))
    _same_answers(expected, served_answers(served), atol, "the export",
                  "Keras predict")


def _same_answers(expected, got, atol, what, reference):
  assert len(got) == len(expected), (
      f"{what} gives {len(got)} answers, {reference} {len(expected)}")
  for i, (e, g) in enumerate(zip(expected, got)):
    if isinstance(e, (float, np.floating, np.ndarray, list, tuple)) and \
        np.asarray(e).dtype.kind == "f":
      diff = max_abs_diff(e, g)
      assert diff <= atol, (f"answer {i}: {what} is {diff:.3g} from "
                            f"{reference} ({g} against {e})")
    else:
      assert g == e, f"answer {i}: {what} says {g!r}, {reference} {e!r}"


def run_task_test(make_task, folder, *, steps: int = 4, checks=TASK_CHECKS,
                  targets: Optional[Callable] = None,
                  answers: Optional[Mapping[str, Callable]] = None,
                  atol: float = 1e-5):
  """Runs the task checks on the task `make_task()` builds (anew for each
  run; tiny model, tiny data) in `folder`.

  Args:
    make_task: () -> a Task.
    folder: an empty folder for the runs.
    steps: training steps of the runs (even; the resumed run starts half
      way).
    checks: a subset of `TASK_CHECKS` (leave out what the task has not,
      e.g. "predict" and "export" for pre-training, and say why at the call
      site).
    targets: for "fit", `fit`'s y from a batch (default: the task
      preprocessor's `targets`).
    answers: for "predict" and "export": `read_predictions`, `raw_inputs`,
      `keras_answers` (see `check_predictions`) and `served_inputs`,
      `served_answers` (see `check_export`).
  Returns:
    The model of the predict check (or None).
  """
  unknown = set(checks) - set(TASK_CHECKS)
  if unknown:
    raise ValueError(f"unknown checks {sorted(unknown)}; known: {TASK_CHECKS}")
  if "export" in checks and "predict" not in checks:
    raise ValueError("the export check compares with the predict check's model")
  if "stats" in checks:
    check_task_stats(make_task())
  whole = None
  if "determinism" in checks or "fit" in checks or "predict" in checks:
    whole = (check_resume(make_task, folder, steps) if "determinism" in checks
             else _train_whole(make_task, folder, steps))
  if "fit" in checks:
    check_fit_parity(make_task, whole, steps, targets=targets)
  model = None
  if "predict" in checks:
    task = make_task()
    model = check_predictions(task, whole, answers["read_predictions"],
                              answers["raw_inputs"], answers["keras_answers"],
                              atol)
    if "export" in checks:
      check_export(model, folder, answers["served_inputs"],
                   answers["served_answers"], answers["keras_answers"],
                   answers["raw_inputs"](task), atol)
  return model


def _train_whole(make_task, folder, steps):
  whole = os.path.join(str(folder), "whole")
  train_run(make_task(), whole, steps, steps // 2)
  return whole


# ------------------------------------------------ Keras task model checks
def one_step_lowers_the_loss(model, x, y):
  """One `fit` step on all the rows of (x, y) (one length bucket, one
  batch) lowers their loss."""
  pre = model.preprocessor
  buckets, pre.length_buckets = pre.length_buckets, (pre.seq_length,)
  rows = len(pre.encode(x, y)["input_word_ids"])
  before = model.evaluate(x, y, return_dict=True, verbose=0)["loss"]
  model.fit(x, y, batch_size=rows, epochs=1, verbose=0)
  after = model.evaluate(x, y, return_dict=True, verbose=0)["loss"]
  pre.length_buckets = buckets
  assert model.optimizer.iterations.numpy() == 1
  assert after < before, (before, after)


def same_after_round_trips(model, x, tmp_path):
  """get_config and save/load round trips: the same outputs (<= 1e-6) on the
  encoded raw inputs, and the same predictions on the raw inputs."""
  expected = model.predict(x)

  def outputs(m):
    features = m.preprocessor.encode(x)
    return m(m.preprocessor.model_inputs(features), training=False)

  clone = type(model).from_config(model.get_config())
  clone.set_weights(model.get_weights())
  model.save(str(tmp_path / "saved"))
  loaded = tf_keras.models.load_model(str(tmp_path / "saved"))
  # Each model's outputs once (encoding the inputs and running the model
  # again for every output key only repeated the same computation).
  want = outputs(model)
  for other in (clone, loaded):
    assert type(other) is type(model)
    assert other.preprocessor.get_config() == model.preprocessor.get_config()
    got = outputs(other)
    for k, v in want.items():
      np.testing.assert_allclose(got[k], v, rtol=0, atol=1e-6)
    got = other.predict(x)
    for k, v in expected.items():
      if k == "nbest":          # scores as floats: the answers are compared
        continue
      if isinstance(v, np.ndarray) and v.dtype.kind == "f":
        np.testing.assert_allclose(got[k], v, rtol=0, atol=1e-6)
      else:
        assert np.all(got[k] == v) if isinstance(v, np.ndarray) else got[k] == v
  return expected
