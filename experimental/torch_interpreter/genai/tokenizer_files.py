"""The tokenizer files of a package: those of the model's folder, or those a transformers tokenizer writes."""

from __future__ import annotations

import logging
import os
import shutil
from typing import Any

logger = logging.getLogger(__name__)

#: the files of a folder written by ``save_pretrained`` that onnxruntime-genai's tokenizer reads
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json",
                   "tokenizer.model", "vocab.json", "merges.txt", "vocab.txt", "chat_template.jinja")


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
            if os.path.exists(os.path.join(source, name)):
                shutil.copy(os.path.join(source, name), os.path.join(target, name))
                written.append(name)
    if not written:
        logger.warning("no tokenizer files: the package generates from token ids, onnxruntime_genai.Tokenizer "
                       "cannot load it (give export_genai tokenizer=)")
    return written
