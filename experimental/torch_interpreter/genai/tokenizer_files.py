"""The tokenizer files of a package: those of the model's folder, or those a transformers tokenizer writes."""

from __future__ import annotations

import logging
import os
import shutil
from typing import Any

from ..checkpoint.folder_files import file_in_folder
from ..errors import GenAIError

logger = logging.getLogger(__name__)

#: the files of a folder written by ``save_pretrained`` that onnxruntime-genai's tokenizer reads
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json",
                   "tokenizer.model", "vocab.json", "merges.txt", "vocab.txt", "chat_template.jinja")


def tokenizer_folder(model: Any) -> str | None:
    """The local folder a transformers model was loaded from (``model.name_or_path``, as ``from_pretrained`` sets
    it) when it holds tokenizer files, else None: a hub name or a model built from a config has none.

    >>> class Loaded:
    ...     name_or_path = "no/such/folder"
    >>> tokenizer_folder(Loaded()) is None
    True
    """
    path = getattr(model, "name_or_path", None) or getattr(getattr(model, "config", None), "name_or_path", None)
    if not isinstance(path, (str, os.PathLike)) or not os.path.isdir(path):
        return None
    return os.fspath(path) if any(os.path.isfile(os.path.join(path, f)) for f in TOKENIZER_FILES) else None


#: the largest tokenizer file copied (a tokenizer.json of 250,000 tokens is about 20 MB)
MAX_TOKENIZER_BYTES = 512 * 2**20


def _inside(folder: str, name: str) -> str | None:
    """The path of ``folder``'s file ``name`` when it is there, a regular file of at most
    :data:`MAX_TOKENIZER_BYTES` whose resolved path stays in the folder; None when absent; else
    :class:`~experimental.torch_interpreter.GenAIError` (a link out of the folder, a FIFO, a device, a folder)."""
    return file_in_folder(folder, name, GenAIError, "the tokenizer file", MAX_TOKENIZER_BYTES)


def write_tokenizer(folder: str | None, tokenizer: Any, target: str) -> list[str]:
    """Writes the tokenizer files into ``target``: ``tokenizer`` (a transformers tokenizer or a folder) when
    given, else those of the model's ``folder``; returns the names written (none: the package generates from
    token ids, ``onnxruntime_genai.Tokenizer`` cannot load).

    Example::

        >>> import tempfile
        >>> write_tokenizer(None, None, tempfile.mkdtemp())
        []
    """
    if tokenizer is not None and not isinstance(tokenizer, (str, os.PathLike)):
        tokenizer.save_pretrained(target)
        return sorted(f for f in os.listdir(target) if f in TOKENIZER_FILES)
    source = os.fspath(tokenizer) if tokenizer is not None else folder
    written = []
    if source is not None:
        for name in TOKENIZER_FILES:
            path = _inside(source, name)
            if path is not None:
                shutil.copyfile(path, os.path.join(target, name))  # the content only: no setuid or write bits
                os.chmod(os.path.join(target, name), 0o644)
                written.append(name)
    if not written:
        logger.warning("no tokenizer files: the package generates from token ids, onnxruntime_genai.Tokenizer "
                       "cannot load it (give export_genai tokenizer=)")
    return written
