"""A checkpoint: the tensors given with ``weights=``, by name, as ONNX tensors that read nothing until asked.

``weights=`` is a safetensors file, a folder (transformers' ``model.safetensors.index.json`` and its shards, a
single ``model.safetensors``, or every ``*.safetensors`` file in it), or a mapping from names to tensors.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from typing import Any

import onnx_ir as ir
import torch

from ..dtypes import onnx_dtype
from ..errors import CheckpointError
from ..saving import IN_PLACE, release_mapped
from .empty_weights import meta_tensor_names
from .folder_files import file_in_folder
from .safetensors_header import StoredTensor, read_safetensors

#: transformers' index of a sharded checkpoint, and its single-file name
INDEX_FILE = "model.safetensors.index.json"
SINGLE_FILE = "model.safetensors"


class Checkpoint:
    """The tensors of ``weights`` (see the module's docstring) by name; ``in_place=False`` copies them into the
    saved model's external data file instead of pointing into the checkpoint's files; ``prefix`` is what the
    model's names add before the checkpoint's (``"lm."`` for a module holding the checkpoint's model as ``lm``).

    Example::

        >>> import os, tempfile, torch
        >>> from safetensors.torch import save_file
        >>> folder = tempfile.mkdtemp()
        >>> save_file({"w": torch.ones(2, 3)}, os.path.join(folder, "model.safetensors"))
        >>> checkpoint = Checkpoint(folder)
        >>> t = checkpoint.tensor("w", (2, 3), torch.float32)
        >>> type(t).__name__, t.numpy().sum()
        ('ExternalTensor', np.float32(6.0))
        >>> checkpoint.tensor("w", (2, 3), torch.float16).numpy().dtype  # converted when read
        dtype('float16')
    """

    def __init__(self, weights: str | os.PathLike | Mapping[str, Any], in_place: bool = True, prefix: str = ""):
        #: what the model's names add before the checkpoint's (a module wrapping the one the checkpoint is of)
        self.prefix = prefix
        #: whether a saved model points into the checkpoint's files (linked beside it) instead of copying the
        #: tensors stored with the model's type into its own external data file
        self.in_place = in_place
        #: name -> where it lies (files) or the tensor itself (a mapping)
        self.entries: dict[str, StoredTensor | torch.Tensor] = {}
        #: what was given, for messages
        self.description = ""
        if isinstance(weights, Mapping):
            self.description = f"the mapping of {len(weights)} tensors"
            for name, value in weights.items():
                tensor = torch.as_tensor(value)
                if tensor.device.type == "meta":
                    raise CheckpointError(f"weights[{name!r}] is on the meta device: it holds no values",
                                          tensor=name)
                self.entries[name] = tensor
            return
        if not isinstance(weights, (str, os.PathLike)):
            raise CheckpointError(f"weights= takes a safetensors file, a folder of them or a mapping of tensors, "
                                  f"not {type(weights).__name__}")
        path = os.path.abspath(os.fspath(weights))
        self.description = path
        for file in _files(path):
            for name, stored in read_safetensors(file).items():
                if name in self.entries:
                    raise CheckpointError(f"tensor {name!r} is stored twice: in {self.entries[name].path!r} "
                                          f"and {file!r}", tensor=name, path=file)
                self.entries[name] = stored

    def tensor(self, name: str, shape: Iterable[int], dtype: torch.dtype,
               aliases: Iterable[str] = ()) -> ir.TensorProtocol:
        """The tensor ``name`` (or the first of its ``aliases`` the checkpoint holds: tied weights are stored once)
        as an ONNX tensor of ``shape`` and ``dtype``: an ``ExternalTensor`` pointing into its file when stored
        with that type, a lazy conversion when stored with another floating type; raises
        :class:`~experimental.torch_interpreter.CheckpointError` naming the tensor when it is missing, of another
        shape, or of a type it cannot be converted from."""
        shape, target = tuple(int(d) for d in shape), onnx_dtype(dtype)
        stored_names = [n[len(self.prefix):] for n in (name, *aliases) if n.startswith(self.prefix)]
        found = next((n for n in stored_names if n in self.entries), None)
        if found is None:
            tied = f" (nor under the names it is tied to: {', '.join(aliases)})" if aliases else ""
            raise CheckpointError(f"tensor {name!r} of the model is not in {self.description}{tied}", tensor=name)
        entry = self.entries[found]
        stored_shape = tuple(entry.shape)
        stored = entry.dtype if isinstance(entry, StoredTensor) else onnx_dtype(entry.dtype)
        where = f"{found!r} in {entry.path if isinstance(entry, StoredTensor) else self.description}"
        if stored_shape != shape:
            raise CheckpointError(f"tensor {name!r}: the model's shape is {list(shape)}, the checkpoint's "
                                  f"({where}) {list(stored_shape)}", tensor=name)
        if stored != target and not (stored.is_floating_point() and target.is_floating_point()):
            raise CheckpointError(f"tensor {name!r}: the model's type is {target.name}, the checkpoint's ({where}) "
                                  f"{stored.name}, which is not converted into it (only floating types are)",
                                  tensor=name)
        original = _onnx_tensor(entry, name)
        if stored == target:
            if self.in_place and isinstance(original, ir.ExternalTensor):
                original.meta[IN_PLACE] = True
            return original
        numpy_type = target.numpy()

        def converted() -> ir.Tensor:
            result = ir.Tensor(original.numpy().astype(numpy_type), name=name)
            release_mapped(original)  # the file's pages leave the process once converted
            return result

        return ir.LazyTensor(converted, dtype=target, shape=ir.Shape(shape), name=name)


def _onnx_tensor(entry: StoredTensor | torch.Tensor, name: str) -> ir.TensorProtocol:
    if isinstance(entry, torch.Tensor):
        return ir.tensor_adapters.TorchTensor(entry.detach().contiguous(), name=name)
    return ir.ExternalTensor(os.path.basename(entry.path), entry.offset, entry.length, entry.dtype,
                             shape=ir.Shape(entry.shape), name=name, base_dir=os.path.dirname(entry.path))


#: the largest index file read (transformers' index of a 400 B model is about 2 MB)
MAX_INDEX_BYTES = 64 * 2**20


def index_shards(folder: str) -> list[str] | None:
    """The shard files ``folder``'s ``model.safetensors.index.json`` names, resolved inside the folder (the
    folder rule of :mod:`.folder_files`); None when the folder has no index. A name leading out of the folder, a
    shard that is not a regular file, an index of the wrong types raise
    :class:`~experimental.torch_interpreter.CheckpointError` before any shard is read.

    >>> import tempfile
    >>> index_shards(tempfile.mkdtemp()) is None
    True
    """
    index = file_in_folder(folder, INDEX_FILE, CheckpointError, "the checkpoint index", MAX_INDEX_BYTES,
                           path=os.path.join(folder, INDEX_FILE))
    if index is None:
        return None
    try:
        with open(index, encoding="utf-8") as f:
            weight_map = json.load(f)["weight_map"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise CheckpointError(f"{index!r} is not a checkpoint index (a JSON object with a 'weight_map'): {e}",
                              path=index) from e
    if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
        raise CheckpointError(f"{index!r} is not a checkpoint index: its 'weight_map' must map names to shard "
                              "file names", path=index)
    files, missing = [], []
    for shard in sorted(set(weight_map.values())):
        real = file_in_folder(folder, shard, CheckpointError, "the shard", path=index)
        if real is None:
            missing.append(os.path.join(folder, shard))
        else:
            files.append(real)
    if missing:
        raise CheckpointError(f"{index!r} names shards that are not in the folder: {missing}", path=index)
    return files


def _files(path: str) -> list[str]:
    """The safetensors files of ``path`` (a file or a folder, see the module's docstring); a folder's files obey
    the folder rule (:mod:`.folder_files`)."""
    if os.path.isfile(path):
        return [path]
    if not os.path.isdir(path):
        raise CheckpointError(f"weights={path!r}: no such file or folder", path=path)
    shards = index_shards(path)
    if shards is not None:
        return shards
    names = [SINGLE_FILE] if os.path.lexists(os.path.join(path, SINGLE_FILE)) else sorted(
        f for f in os.listdir(path) if f.endswith(".safetensors"))
    files = [file_in_folder(path, name, CheckpointError, "the checkpoint file", path=os.path.join(path, name))
             for name in names]
    if not files:
        raise CheckpointError(f"weights={path!r}: the folder holds no safetensors file", path=path)
    return files


class MetaWeights:
    """The values of a model's tensors on the meta device, taken from ``weights`` (see :class:`Checkpoint`) under
    their name or a name they are tied to; the translation calls it for each such parameter, buffer or constant.

    Example::

        >>> import torch
        >>> from experimental.torch_interpreter.checkpoint import empty_weights
        >>> with empty_weights():
        ...     layer = torch.nn.Linear(3, 2)
        >>> weights = MetaWeights(layer, {"weight": torch.ones(2, 3), "bias": torch.zeros(2)})
        >>> weights("weight", layer.weight).numpy().tolist()
        [[1.0, 1.0, 1.0], [1.0, 1.0, 1.0]]
    """

    def __init__(self, model: torch.nn.Module | None, weights: Checkpoint | str | os.PathLike | Mapping[str, Any]):
        self.checkpoint = weights if isinstance(weights, Checkpoint) else Checkpoint(weights)
        names, self.aliases = meta_tensor_names(model) if model is not None else ([], {})
        #: the names of the model's tensors on the meta device (their stand-ins are CPU tensors while captured)
        self.names = set(names)

    def __call__(self, name: str, meta: torch.Tensor, buffer: bool = False) -> ir.TensorProtocol:
        try:
            return self.checkpoint.tensor(name, meta.shape, meta.dtype, self.aliases.get(name, ()))
        except CheckpointError as e:
            if not buffer or name in self.checkpoint.entries:
                raise
            raise CheckpointError(
                f"{e} It is a buffer the model computes when it is built, which checkpoints do not hold: build the "
                "model under empty_weights() (experimental.torch_interpreter.empty_weights), which puts the "
                "parameters only on the meta device and keeps the buffers' values", tensor=name) from None
