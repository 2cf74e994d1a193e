"""Command line: ``python -m experimental.torch_interpreter`` (console script ``aten2onnx``).

``export FILE.py:factory`` converts the model a factory returns (``export FOLDER`` the transformers model of a
folder ``save_pretrained`` wrote), ``compare FILE.py:factory`` runs
:func:`~experimental.torch_interpreter.find_discrepancies` on it, ``genai MODEL_FOLDER OUT_FOLDER`` writes an
onnxruntime-genai package (:func:`~experimental.torch_interpreter.export_genai`). The factory is a function without
arguments returning ``model``, ``(model, args)``, ``(model, args, kwargs)`` or
``(model, args, kwargs, dynamic_shapes)``, or a dict with these keys.
"""

from __future__ import annotations

import argparse
import importlib.util
import logging
import os
import shutil
import sys
from collections.abc import Sequence
from typing import Any

import torch

from .convert import to_onnx
from .errors import InvalidModelError, TorchInterpreterError, require
from .genai.package import PRECISIONS, PROVIDERS, export_genai
from .investigate.discrepancies import find_discrepancies
from .investigate.report import ExportReport
from .opsets import DEFAULT_OPSET

logger = logging.getLogger(__name__)

EPILOG = """\
The factory file, e.g. model.py:

    import torch

    def factory():
        model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.GELU())
        return model, (torch.randn(2, 4),), {}, ({0: "batch"},)

Exit status: 0 success, 1 the export failed or results differ, 2 wrong arguments.
"""


def load_factory(spec: str) -> tuple[torch.nn.Module, tuple, dict, Any]:
    """Runs the factory ``FILE.py:name`` (``name`` defaults to ``factory``) and returns
    ``(model, args, kwargs, dynamic_shapes)``.

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "m.py")
    >>> with open(path, "w") as f:
    ...     _ = f.write("import torch\\ndef factory():\\n    return torch.nn.ReLU(), (torch.randn(2),)\\n")
    >>> model, args, kwargs, ds = load_factory(path + ":factory")
    >>> type(model).__name__, len(args), kwargs, ds
    ('ReLU', 1, {}, None)
    """
    path, sep, name = spec.rpartition(":")
    if not sep or os.path.exists(spec):
        path, name = spec, "factory"
    if not os.path.exists(path):
        raise InvalidModelError(f"{spec!r}: file {path!r} not found; expected FILE.py:factory")
    module_spec = importlib.util.spec_from_file_location(f"aten2onnx_factory_{abs(hash(path))}", path)
    module = importlib.util.module_from_spec(module_spec)
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    try:
        module_spec.loader.exec_module(module)
    finally:
        sys.path.pop(0)
    factory = getattr(module, name, None)
    if not callable(factory):
        raise InvalidModelError(f"{path} has no function {name!r}; expected FILE.py:factory")
    result = factory()
    if isinstance(result, dict):
        result = (result["model"], result.get("args", ()), result.get("kwargs"), result.get("dynamic_shapes"))
    if isinstance(result, torch.nn.Module):
        result = (result,)
    if not isinstance(result, (tuple, list)) or not 1 <= len(result) <= 4:
        raise InvalidModelError(
            f"{spec}: the factory must return model, (model, args), (model, args, kwargs) or "
            f"(model, args, kwargs, dynamic_shapes), not {type(result).__name__}"
        )
    model, args, kwargs, dynamic_shapes = list(result) + [(), None, None][len(result) - 1:]
    if isinstance(args, torch.Tensor):
        args = (args,)
    return model, tuple(args or ()), dict(kwargs or {}), dynamic_shapes


def load_folder(folder: str) -> tuple[torch.nn.Module, tuple, dict, Any]:
    """The transformers model of ``folder`` (written by ``save_pretrained``: ``config.json`` naming its class in
    ``architectures``, the weights) in eval mode, with example inputs of batch 2 and sequence 8 for the inputs its
    ``forward`` takes (``input_ids``, ``attention_mask``, ``pixel_values``, ``decoder_input_ids``); no cache
    (``use_cache=False``: the ``genai`` command writes a decoder with its cache). The dynamic shapes are the usual
    ones :func:`~experimental.torch_interpreter.to_onnx` picks for a transformers model. The folder's own code is
    never run (``trust_remote_code=False``).

    >>> load_folder("no/such/folder")
    Traceback (most recent call last):
        ...
    experimental.torch_interpreter.errors.InvalidModelError: 'no/such/folder' has no config.json: ...
    """
    import inspect

    import transformers

    if not os.path.isfile(os.path.join(folder, "config.json")):
        raise InvalidModelError(f"{folder!r} has no config.json: export takes FILE.py:factory or a folder written "
                                "by save_pretrained")
    try:
        config = transformers.AutoConfig.from_pretrained(folder, trust_remote_code=False)
    except (ValueError, KeyError, OSError) as e:
        raise InvalidModelError(f"transformers cannot read {folder}/config.json: {e}") from e
    names = list(getattr(config, "architectures", None) or [])
    cls = getattr(transformers, names[0], None) if names else None
    if cls is None:
        raise InvalidModelError(f"{folder}/config.json names the architectures {names}: transformers has no such "
                                "class (code of the folder's own is not run)")
    model = cls.from_pretrained(folder, trust_remote_code=False).eval()
    takes = inspect.signature(model.forward).parameters
    generator = torch.Generator().manual_seed(0)
    vocab = int(getattr(config, "vocab_size", None) or 100)
    kwargs: dict[str, Any] = {}
    if "input_ids" in takes:
        kwargs["input_ids"] = torch.randint(0, vocab, (2, 8), generator=generator)
        if "attention_mask" in takes:
            kwargs["attention_mask"] = torch.ones(2, 8, dtype=torch.int64)
    if "pixel_values" in takes:
        size = getattr(config, "image_size", 224)
        size = tuple(size) if isinstance(size, (list, tuple)) else (size, size)
        kwargs["pixel_values"] = torch.rand(2, getattr(config, "num_channels", 3), *size, generator=generator)
    if "decoder_input_ids" in takes and getattr(config, "is_encoder_decoder", False):
        kwargs["decoder_input_ids"] = torch.randint(0, vocab, (2, 4), generator=generator)
    if not kwargs:
        raise InvalidModelError(f"{type(model).__name__}.forward takes none of input_ids, pixel_values: write a "
                                "factory (FILE.py:factory) giving its inputs")
    if "use_cache" in takes:
        kwargs["use_cache"] = False
    return model, (), kwargs, None


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m experimental.torch_interpreter",
        description="Exports PyTorch models to ONNX through torch.export (aten2onnx) and investigates the result.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True)

    export = sub.add_parser(
        "export", help="export the model a factory returns, or a transformers folder", epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    export.add_argument("factory", help="FILE.py:function returning model, args, kwargs, dynamic_shapes; or a "
                        "folder written by save_pretrained (config.json and weights; inputs of batch 2, sequence 8, "
                        "batch and sequence dynamic, no cache)")
    export.add_argument("-o", "--output", default="model.onnx", help="ONNX file to write (default: model.onnx)")
    export.add_argument("--verify", action="store_true",
                        help="run onnxruntime on the factory's inputs and compare every FX node with PyTorch; "
                        "fails naming the first node that differs")
    export.add_argument("--report", metavar="R.md", help="write the export report (markdown) there")
    export.add_argument("--dump", metavar="DIR",
                        help="write everything a bug report needs in DIR: the ExportedProgram (exported_program.pt2), "
                        "the FX graph (graph.txt), the ONNX model, the inputs (inputs.pt), the report (report.md)")
    _common_options(export)

    compare = sub.add_parser(
        "compare", help="export and compare every FX node with onnxruntime (find_discrepancies)", epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    compare.add_argument("factory", help="FILE.py:function returning model, args, kwargs, dynamic_shapes")
    compare.add_argument("--atol", type=float, default=None,
                         help="absolute tolerance (default: each type's, 1e-4 for float32, 1e-2 for float16)")
    compare.add_argument("--rtol", type=float, default=None,
                         help="relative tolerance (default: each type's, 1e-3 for float32, 1e-2 for float16)")
    compare.add_argument("--markdown", metavar="R.md", help="write the table of every compared node there")
    compare.add_argument("--repro", metavar="DIR", help="write a standalone repro of the first node that differs there")
    compare.add_argument("--plot", metavar="P.png", help="save the error per node (log scale) as an image")
    _common_options(compare)
    genai = sub.add_parser(
        "genai", help="export a transformers causal LM folder as an onnxruntime-genai package",
        description="Writes OUT_FOLDER: model.onnx (+ external data), genai_config.json and the tokenizer files, "
        "which onnxruntime_genai.Model(OUT_FOLDER) loads.",
    )
    genai.add_argument("model_folder", nargs="?",
                       help="a folder written by save_pretrained (config.json, weights, tokenizer); or -i")
    genai.add_argument("out_folder", nargs="?", help="the package's folder (must not exist, see --overwrite); or -o")
    # the model builder's spelling (python -m onnxruntime_genai.models.builder -i ... -o ... -p ... -e ...)
    genai.add_argument("-i", "--input", dest="input_folder", metavar="MODEL_FOLDER", help="as model_folder")
    genai.add_argument("-o", "--output", dest="output_folder", metavar="OUT_FOLDER", help="as out_folder")
    genai.set_defaults(genai_parser=genai)  # its errors (the folders checked after parsing) in its own usage
    genai.add_argument("-p", "--precision", default="fp32", choices=PRECISIONS,
                       help="fp32 (default); fp16 or bf16 for CUDA; int4: weights of the products in int4")
    genai.add_argument("-e", "--provider", default="cpu", choices=PROVIDERS,
                       help="the execution provider the package is made for (default cpu)")
    genai.add_argument("--overwrite", action="store_true", help="replace OUT_FOLDER when it exists")
    genai.add_argument("-v", "--verbose", action="count", default=0, help="log the steps")
    return parser


def _folders(ns: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    """``model_folder`` and ``out_folder`` from the positional arguments or ``-i``/``-o``, each given once."""
    for name, option, flag in (("model_folder", "input_folder", "-i"), ("out_folder", "output_folder", "-o")):
        positional, given = getattr(ns, name), getattr(ns, option)
        if positional is not None and given is not None:
            parser.error(f"{name} given twice: as an argument and as {flag}")
        if positional is None and given is None:
            parser.error(f"the following arguments are required: {name} (or {flag})")
        setattr(ns, name, positional if positional is not None else given)


def _genai(ns: argparse.Namespace) -> int:
    package = export_genai(ns.model_folder, ns.out_folder, precision=ns.precision, provider=ns.provider,
                           overwrite=ns.overwrite, verbose=ns.verbose)
    sys.stdout.write(f"saved {package.folder} ({', '.join(package.files)}) in {package.seconds:.1f} s\n")
    return 0


def _common_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--opset", type=int, default=DEFAULT_OPSET,
                        help=f"opset of the main domain (default {DEFAULT_OPSET})")
    parser.add_argument("--strict", action="store_true", help="capture with dynamo (torch.export strict=True)")
    parser.add_argument("-v", "--verbose", action="count", default=0,
                        help="-v logs the steps and the report, -vv every FX node with its time")


def _export(ns: argparse.Namespace) -> int:
    load = load_folder if os.path.isdir(ns.factory) else load_factory
    model, args, kwargs, dynamic_shapes = load(ns.factory)
    report = ExportReport()
    output = os.path.join(ns.dump, os.path.basename(ns.output)) if ns.dump and ns.output == "model.onnx" else ns.output
    try:
        to_onnx(model, args, kwargs, dynamic_shapes, filename=output, verify=ns.verify, report=report,
                strict=ns.strict, target_opset=ns.opset, verbose=ns.verbose)
    finally:
        if ns.report:
            report.save(ns.report)
        if ns.dump:
            _dump(ns.dump, report, args, kwargs)
            _copy_model(output, ns.dump)
    sys.stdout.write(f"saved {output}\n")
    if ns.verify:
        sys.stdout.write(report.verification + "\n")
    return 0


def _dump(folder: str, report: Any, args: tuple, kwargs: dict) -> None:
    os.makedirs(folder, exist_ok=True)
    report.save(os.path.join(folder, "report.md"))
    torch.save({"args": args, "kwargs": kwargs}, os.path.join(folder, "inputs.pt"))
    ep = report.exported_program
    if ep is None:
        return
    with open(os.path.join(folder, "graph.txt"), "w", encoding="utf-8") as f:
        f.write(str(ep))
    _save_program(ep, os.path.join(folder, "exported_program.pt2"))


def _save_program(ep: Any, path: str) -> None:
    """``torch.export.save`` of ``ep``, kept only when ``torch.export.load`` reads it back: a program with
    custom ops, PythonOp nodes or classes not registered for serialization (transformers' caches) may save
    and not load; ``graph.txt`` holds the program then."""
    try:
        torch.export.save(ep, path)
        torch.export.load(path)
    except Exception as e:  # noqa: BLE001  (a dump keeps what it can; the reason is logged)
        if os.path.exists(path):
            os.remove(path)
        logger.warning(
            "the ExportedProgram was not kept in the dump (torch.export cannot save it or read it back: %s: %s); "
            "graph.txt holds the program as text",
            type(e).__name__,
            str(e).splitlines()[0] if str(e) else "",
        )


def _copy_model(output: str, folder: str) -> None:
    """The ONNX model (and its external data) in the dump folder too."""
    if not os.path.exists(output) or os.path.abspath(os.path.dirname(output)) == os.path.abspath(folder):
        return
    for path in (output, output + ".data"):
        if os.path.exists(path):
            shutil.copy(path, folder)


def _compare(ns: argparse.Namespace) -> int:
    if ns.plot:  # before the comparison, which takes a while
        require("matplotlib", "--plot's images", "matplotlib")
    model, args, kwargs, dynamic_shapes = load_factory(ns.factory)
    report = find_discrepancies(model, args, kwargs, dynamic_shapes, atol=ns.atol, rtol=ns.rtol,
                                strict=ns.strict, target_opset=ns.opset, verbose=ns.verbose)
    sys.stdout.write(str(report) + "\n")
    if ns.markdown:
        with open(ns.markdown, "w", encoding="utf-8") as f:
            f.write(report.to_markdown())
    if ns.plot:
        import matplotlib

        matplotlib.use("agg")
        ax = report.plot()
        ax.figure.savefig(ns.plot, bbox_inches="tight")
    if ns.repro and report.first is None:
        sys.stdout.write(f"no node differs: no repro written to {ns.repro}\n")
    elif ns.repro:
        paths = report.first.save_repro(ns.repro)
        sys.stdout.write("repro written: " + ", ".join(paths) + "\n")
    return 0 if report.first is None else 1


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m experimental.torch_interpreter`` and of the ``aten2onnx`` script.

    >>> main(["compare", "no_such_file.py:factory"])
    1
    """
    ns = _parser().parse_args(argv)
    if ns.command == "genai":
        _folders(ns, ns.genai_parser)
    try:
        return {"export": _export, "compare": _compare, "genai": _genai}[ns.command](ns)
    except TorchInterpreterError as e:
        sys.stderr.write(f"{type(e).__name__}: {e}\n")
        return 1
