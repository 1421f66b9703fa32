"""`save` and `save_weights` of the library's Keras models, written as every
output of the library is (`atomic_folder`, `atomic_file`).

Keras writes in place: into a folder that holds the user's files (merging
into their `variables/`), half a SavedModel or `.keras` file on a full disk,
a TensorFlow traceback for an output under a file. Here:

- a SavedModel (a path without a file suffix, `save_format="tf"`) is a
  folder written by `atomic_folder`: it replaces an empty folder or an
  earlier SavedModel holding nothing but what the library wrote there;
- a `.keras` (or `.h5`) model and a `.weights.h5` (or `.h5`) weights file
  are written by `atomic_file`, under their own name (Keras goes by it);
- TensorFlow-format weights (`save_weights("w")`: `w.index`, `w.data-*`)
  are written in a temp folder beside them and renamed into place, the
  index last; Keras then points the folder's `checkpoint` file at them;
- `overwrite=False` and an existing output: a FileExistsError (where Keras
  would ask on the terminal).

So a failed write (an error, a full disk, a kill) leaves the previous
output, and every refusal is one line naming the path. A remote path
(`gs://...`) or an open `h5py.File` is left to Keras.
"""

import os
import shutil
import tempfile

from bert.io.output_file import atomic_file, check_output_file
from bert.io.output_folder import atomic_folder
from bert.io.output_saved_model import tracing_for_savedmodel
from bert.io.output_record import (cannot_write_in, disk_error,
                                      output_path, remove_leftovers,
                                      sync_folder, sync_tree, this_host,
                                      write_failed)


class AtomicSave:
  """Mixed into a Keras model (before `tf_keras.Model`): its `save` and
  `save_weights` write atomically, replacing only what the library wrote."""

  def save(self, filepath, overwrite=True, save_format=None, **kwargs):
    """Keras `save` (a SavedModel folder, `.keras` or `.h5`), written whole
    or not at all (see `bert.io.output_keras`)."""
    save_model(super().save, filepath, overwrite, save_format, **kwargs)

  def save_weights(self, filepath, overwrite=True, save_format=None,
                   options=None):
    """Keras `save_weights` (`.weights.h5`, `.h5`, or TensorFlow format),
    written whole or not at all (see `bert.io.output_keras`)."""
    save_weights(super().save_weights, filepath, overwrite, save_format,
                 options=options)


def save_model(keras_save, filepath, overwrite=True, save_format=None,
               **kwargs) -> None:
  """`keras_save` (Keras' `Model.save`, bound) into `filepath` atomically."""
  from tf_keras.src.saving import saving_api  # pylint: disable=g-import-not-at-top
  if _left_to_keras(filepath):
    with tracing_for_savedmodel():     # a SavedModel, if Keras writes one
      keras_save(filepath, overwrite=overwrite, save_format=save_format,
                 **kwargs)
    return
  path = os.fspath(filepath)
  kind = saving_api.get_save_format(path, save_format)   # tf, keras, h5
  if kind == "keras" and not path.endswith(".keras"):
    raise ValueError(f"{path}: save_format={save_format!r} (the Keras format) "
                     "needs a file name ending in .keras")
  _check_overwrite(path, path, overwrite)
  if kind == "tf":
    with atomic_folder(path, _saved_model_folder,
                       "a SavedModel folder") as tmp, tracing_for_savedmodel():
      keras_save(tmp, overwrite=True, save_format="tf", **kwargs)
    return
  with atomic_file(path, "wb", keep_name=True) as f:
    keras_save(f.name, overwrite=True, save_format=kind, **kwargs)


def save_weights(keras_save_weights, filepath, overwrite=True,
                 save_format=None, **kwargs) -> None:
  """`keras_save_weights` (Keras' `Model.save_weights`, bound) into
  `filepath` atomically."""
  if _left_to_keras(filepath):
    keras_save_weights(filepath, overwrite=overwrite, save_format=save_format,
                       **kwargs)
    return
  path = os.fspath(filepath)
  kind = _weights_format(path, save_format)
  if kind is None:                 # Keras' own error: an unknown format
    keras_save_weights(path, overwrite=overwrite, save_format=save_format,
                       **kwargs)
    return
  if kind == "h5":
    _check_overwrite(path, path, overwrite)
    with atomic_file(path, "wb", keep_name=True) as f:
      keras_save_weights(f.name, overwrite=True, save_format=save_format,
                         **kwargs)
    return
  _check_overwrite(path, path + ".index", overwrite)
  _save_checkpoint(keras_save_weights, path, save_format, kwargs)


def _save_checkpoint(keras_save_weights, prefix, save_format, kwargs) -> None:
  """TensorFlow-format weights `prefix.index`, `prefix.data-*`: written in
  a temp folder beside them, each renamed into place (the index, which
  makes them a checkpoint, last), then the folder's `checkpoint` file."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  index = check_output_file(output_path(prefix) + ".index", in_place=False)
  path = index[:-len(".index")]
  parent, base = os.path.split(path)
  existed = os.path.exists(index)
  remove_leftovers(path)
  try:
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(dir=parent, prefix=(
        f"{base}.tmp-{this_host()}-{os.getpid()}-"))
  except OSError as e:
    raise cannot_write_in(e, path, parent) from None
  try:
    keras_save_weights(os.path.join(tmp, base), overwrite=True,
                       save_format=save_format, **kwargs)
    files = sorted((n for n in os.listdir(tmp) if n.startswith(base + ".")),
                   key=lambda n: (n == base + ".index", n))
    sync_tree(tmp, files)
    for name in files:
      os.replace(os.path.join(tmp, name), os.path.join(parent, name))
  except BaseException as e:
    if disk_error(e) is not None:
      raise write_failed(path, disk_error(e), existed) from e
    raise
  finally:
    shutil.rmtree(tmp, ignore_errors=True)
  sync_folder(parent)
  # What Keras does after writing them: tf.train.latest_checkpoint finds them.
  tf.__internal__.train.update_checkpoint_state(
      save_dir=parent, model_checkpoint_path=path, save_relative_paths=True,
      all_model_checkpoint_paths=[path])


def _left_to_keras(filepath) -> bool:
  """An open h5py.File, or a remote path Keras and TensorFlow write."""
  return (not isinstance(filepath, (str, os.PathLike))
          or "://" in os.fspath(filepath))


def _weights_format(path: str, save_format):
  """`save_weights`' format, as Keras chooses it: "h5" (one file), "tf"
  (a checkpoint), or None (what Keras refuses before writing)."""
  if path.endswith(".weights.h5"):
    return "h5"
  if save_format is None:
    return "h5" if path.endswith((".h5", ".keras", ".hdf5")) else "tf"
  user = str(save_format).lower().strip()
  if user in ("tf", "tensorflow"):   # an .h5 name: Keras' own error
    return None if path.endswith((".h5", ".keras", ".hdf5")) else "tf"
  return "h5" if user in ("hdf5", "h5", "keras") else None


def _check_overwrite(path: str, existing: str, overwrite: bool) -> None:
  if not overwrite and os.path.lexists(existing):
    raise FileExistsError(f"{path}: exists, and overwrite=False; refusing to "
                          "replace it (pass overwrite=True, or choose "
                          "another path)")


def _saved_model_folder(path: str) -> bool:
  """An empty folder, or an earlier SavedModel (whose files the library
  wrote, `atomic_folder` checks)."""
  return os.path.isdir(path) and (
      not os.listdir(path)
      or os.path.exists(os.path.join(path, "saved_model.pb")))
