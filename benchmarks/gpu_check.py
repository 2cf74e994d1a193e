"""Checks the exported models on onnxruntime's CUDA provider against eager PyTorch on the same GPU.

Each case is a family (a tiny model), an optimization level of ``to_onnx`` (``optimize=False``, ``True``,
``"onnxruntime"``, and ``"onnxruntime"`` for CUDA only: ``providers="cuda"``, on the GPU only) and a dtype (float32, float16, bfloat16, by ``model.to(dtype)``). The model is exported on the
GPU, run by the project's ``InferenceSession`` on ``CUDAExecutionProvider`` (``run_torch`` with CUDA torch feeds)
and compared with the eager model: float32 within 1e-3, float16 and bfloat16 within 1e-2, the error measured as
``max |onnx - eager| / max |eager|`` per output (the largest over the outputs and runs is reported), the NaN of
both sides counted (a NaN on one side only is a mismatch). Integer outputs must be equal.

The families: the tiny transformers models of the optimize tests (Llama, Mistral, Qwen2, Phi-3, GPT-2, BERT, T5:
hidden 64, intermediate 128, 2 layers, 4 heads, 2 kv heads, vocabulary 1000, random weights), all run on one
padded batch (batch 2, sequence 8, ``attention_mask[0, :4] = 0``: the padded rows are compared too); a small
ResNet (``cnn``); ``torch.cond`` (``cond``), ``scan`` (``scan``) and ``while_loop`` (``while_loop``) models; a
custom ``torch.autograd.Function`` exported as a PythonOp node (``python_op``); a Llama with its cache
(``llama_cache``): a prefill from an empty cache on the padded batch, then one decode step fed with the cache
the ONNX prefill returned (eager PyTorch decodes from its own cache). The models come from the package's
``testing/`` (``llm_models.py``, ``models.py``) and BERT from ``benchmarks/graph_snapshot.py``.

For each case the table also gives what onnxruntime placed on the CPU (``session.record_ep_graph_assignment_info``
and ``InferenceSession.get_provider_graph_assignment_info()``: the nodes assigned at partitioning, before the
fusions that follow it) and the Memcpy nodes it inserted (read from the optimized model it writes, through
``SessionOptions.optimized_model_filepath``). Both come from a second onnxruntime session on the same model with
the same providers (for a model with PythonOp nodes, one per ONNX segment, cut as the runtime cuts it).

A case is ``ok``, ``MISMATCH`` (values), ``ERROR`` (onnxruntime could not load or run the exported model, or ran
it without the CUDA provider), or one of: ``eager fails`` (PyTorch cannot run the model in this dtype),
``export refused`` (``to_onnx`` raised), ``no kernel`` (no provider has a kernel for an op in this dtype),
``not built`` (the family could not be built here, e.g. pytest missing). The exit code is 1 when a case is
``MISMATCH`` or ``ERROR``, else 0.

Here (no GPU)::

    python benchmarks/gpu_check.py                    # says "no GPU: nothing checked" and what is missing, exits 0
    python benchmarks/gpu_check.py --cpu --quick      # the same cases on the CPU provider (says so)

On the GPU test machine (``../shared/gpu/README.md``: onnxruntime-gpu 1.31.1 arrives in parts; ``import torch``
comes before any session, which this script does), from the repository root:

1. here: ``bash ../shared/gpu/make_parts.sh`` (``.gpu/parts/p0`` to ``p3`` and ``md5``), then
   ``cp ../shared/gpu/on_device.sh .gpu/``;
2. on the machine, one call per part but the last, ``.gpu/parts/pN`` and ``.gpu/on_device.sh`` sent:
   ``bash .gpu/on_device.sh stash``;
3. with the last part and ``.gpu/parts/md5`` sent:
   ``source .gpu/on_device.sh install && python3 benchmarks/gpu_check.py --json "$OUT/gpu_check.json"``
   (``$OUT``: a folder that comes back from the machine; ``--quick`` for less than half the time;
   ``--families`` / ``--levels`` / ``--dtypes`` to split the run). Where ``python3 -c "import pytest"`` fails
   there, send pytest's wheels too (``pip download --no-deps pytest pluggy iniconfig -d .gpu/wheels`` here,
   ``python3 -m pip install --no-index --no-deps --target /tmp/site .gpu/wheels/*.whl`` after the install
   there): without it the families taken from the test modules are ``not built``.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import dataclasses
import json
import os
import platform
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import torch  # before onnxruntime: onnxruntime-gpu runs with the CUDA libraries torch loads

import onnx
import onnxruntime as ort
from torch.utils._pytree import tree_leaves, tree_map_only

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))

from experimental.torch_interpreter import InferenceSession, bypass_export_some_errors, to_onnx  # noqa: E402
from experimental.torch_interpreter.runtime.python_op_nodes import has_python_ops, node_inputs  # noqa: E402
from experimental.torch_interpreter.runtime.segments import Segment, plan, segment_model, value_infos  # noqa: E402

CUDA, CPU = "CUDAExecutionProvider", "CPUExecutionProvider"
DECODERS = ["llama", "mistral", "qwen2", "phi3", "gpt2"]
FAMILIES = [*DECODERS, "bert", "t5", "cnn", "cond", "scan", "while_loop", "python_op", "llama_cache"]
#: each level's to_onnx arguments; "onnxruntime+cuda": a model made for CUDA only (providers="cuda": the guards
#: and float16 roundings the CPU needs left out), checked on the GPU only
LEVELS: dict[str, dict[str, Any]] = {
    "False": {"optimize": False},
    "True": {"optimize": True},
    "onnxruntime": {"optimize": "onnxruntime"},
    "onnxruntime+cuda": {"optimize": "onnxruntime", "providers": "cuda"},
}
DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
TOLERANCE = {torch.float32: 1e-3, torch.float16: 1e-2, torch.bfloat16: 1e-2}
#: --quick: these levels and dtypes unless --levels / --dtypes are given
QUICK_LEVELS, QUICK_DTYPES = ["True", "onnxruntime", "onnxruntime+cuda"], ["float32", "float16"]
#: results that make the exit code 1
FAILURES = ("MISMATCH", "ERROR")


# -- cases ---------------------------------------------------------------------------------------------------------
@dataclasses.dataclass
class Step:
    """One run of a case: eager PyTorch on ``args``/``kwargs``, the ONNX model on ``feeds`` (its inputs in order),
    or on ``feeds(outputs of the previous ONNX run)``."""

    name: str
    args: tuple
    kwargs: dict
    feeds: list[torch.Tensor] | Callable[[list[torch.Tensor]], list[torch.Tensor]]


@dataclasses.dataclass
class Case:
    """A model on its device and dtype, the inputs it is exported with, and the runs compared."""

    model: torch.nn.Module
    export_args: tuple
    export_kwargs: dict
    dynamic_shapes: Any
    steps: list[Step]


@contextlib.contextmanager
def _caches_as_pytrees() -> Iterator[None]:
    """transformers caches flatten into their tensors (keys and values per layer) inside this block."""
    with bypass_export_some_errors(patch_sympy=False, patch_torch=False, patch_transformers=True):
        yield


def tensors(value: Any) -> list[torch.Tensor]:
    """The tensors of nested inputs or outputs, caches included, in the order of the ONNX inputs and outputs."""
    with _caches_as_pytrees():
        return [t for t in tree_leaves(value) if isinstance(t, torch.Tensor)]


def moved(value: Any, device: str, dtype: torch.dtype) -> Any:
    """``value`` (tensors, caches) on ``device``, its floating tensors in ``dtype``."""

    def move(t: torch.Tensor) -> torch.Tensor:
        return t.to(device=device, dtype=dtype if t.is_floating_point() else t.dtype)

    with _caches_as_pytrees():
        return tree_map_only(torch.Tensor, move, value)


def one_step(model: torch.nn.Module, args: tuple, kwargs: dict, dynamic_shapes: Any) -> Case:
    """A case exported and run on the same inputs."""
    return Case(model, args, kwargs, dynamic_shapes, [Step("run", args, kwargs, tensors((args, kwargs)))])


def padded_batch(vocab: int = 1000) -> dict[str, torch.Tensor]:
    """Batch 2, sequence 8, the first 4 tokens of the first row padded (left padding)."""
    ids = torch.randint(0, vocab, (2, 8), generator=torch.Generator().manual_seed(0))
    mask = torch.ones(2, 8, dtype=torch.int64)
    mask[0, :4] = 0
    return {"input_ids": ids, "attention_mask": mask}


TEXT_AXES = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"}}


def build_decoder(name: str, device: str, dtype: torch.dtype) -> Case:
    from experimental.torch_interpreter.testing.llm_models import decoder_model

    model = decoder_model(name)
    model.config.use_cache = False
    return one_step(model.to(device, dtype), (), moved(padded_batch(), device, dtype), TEXT_AXES)


def build_bert(device: str, dtype: torch.dtype) -> Case:
    from graph_snapshot import _bert

    return one_step(_bert().to(device, dtype), (), moved(padded_batch(), device, dtype), TEXT_AXES)


def build_t5(device: str, dtype: torch.dtype) -> Case:
    from experimental.torch_interpreter.testing.llm_models import t5_model

    model = t5_model()
    model.config.use_cache = False
    decoder_ids = torch.randint(0, 1000, (2, 5), generator=torch.Generator().manual_seed(1))
    kwargs = {**padded_batch(), "decoder_input_ids": decoder_ids}
    axes = {**TEXT_AXES, "decoder_input_ids": {0: "batch", 1: "dec_seq"}}
    return one_step(model.to(device, dtype), (), moved(kwargs, device, dtype), axes)


def build_cnn(device: str, dtype: torch.dtype) -> Case:
    from experimental.torch_interpreter.testing.models import IMAGE_AXES, TinyResNet, images, randomize_batchnorm

    model = randomize_batchnorm(TinyResNet()).to(device, dtype)
    return one_step(model, moved((images(2, 3, 32, 32),), device, dtype), {}, IMAGE_AXES)


def build_cond(device: str, dtype: torch.dtype) -> Case:
    from experimental.torch_interpreter.testing.models import CondModel

    gen = torch.Generator().manual_seed(0)
    args = (torch.randn(3, 4, generator=gen), torch.randn(3, 4, generator=gen))
    return one_step(CondModel().to(device, dtype), moved(args, device, dtype), {}, ({0: "b"}, {0: "b"}))


def build_scan(device: str, dtype: torch.dtype) -> Case:
    from experimental.torch_interpreter.testing.models import Fn1, scan_cumsum

    args = (torch.randn(5, 3, generator=torch.Generator().manual_seed(0)),)
    return one_step(Fn1(scan_cumsum), moved(args, device, dtype), {}, ({0: "seq", 1: "d"},))


def build_while_loop(device: str, dtype: torch.dtype) -> Case:
    from experimental.torch_interpreter.testing.models import CountDown
    from torch._higher_order_ops.while_loop import while_loop

    class CountDownOnDevice(CountDown):
        """``CountDown`` with its running total made on the input's device and dtype (``CountDown`` makes it
        with ``torch.zeros(())`` on the CPU, which ``while_loop`` refuses beside CUDA carries)."""

        def forward(self, n, x):
            def body_fn(i, h, total):
                h = torch.tanh(h @ self.w)
                return i - 1, h, total + h.sum()

            return while_loop(lambda i, h, total: i > 0, body_fn, (n.clone(), x.clone(), x.new_zeros(())))

    torch.manual_seed(0)
    model = CountDownOnDevice().to(device, dtype)
    args = (torch.tensor(3), torch.randn(2, 3, generator=torch.Generator().manual_seed(0)))
    return one_step(model, moved(args, device, dtype), {}, (None, {0: "b"}))


def build_python_op(device: str, dtype: torch.dtype) -> Case:
    from experimental.torch_interpreter.testing.models import IssueModel

    torch.manual_seed(0)
    args = (torch.randn(3, 4, generator=torch.Generator().manual_seed(0)),)
    return one_step(IssueModel().to(device, dtype), moved(args, device, dtype), {}, ({0: "batch"},))


def build_llama_cache(device: str, dtype: torch.dtype) -> Case:
    """Exported with a cache of 5 tokens; run as a prefill of the padded batch from an empty cache, then one
    decode step: eager PyTorch from the cache its prefill filled, the ONNX model from the prefill's ``present.*``."""
    from experimental.torch_interpreter.testing.llm_models import decoder_dynamic_shapes, decoder_inputs, decoder_model

    model = decoder_model("llama").to(device, dtype)
    export_kwargs = moved(decoder_inputs(model, 2, 3, 5), device, dtype)
    prefill = moved({**decoder_inputs(model, 2, 8, 0), **padded_batch()}, device, dtype)
    prefill_feeds = [t.clone() for t in tensors(prefill)]  # before the eager prefill grows the cache in place
    next_ids = torch.tensor([[5], [7]], device=device)
    mask = torch.cat([prefill["attention_mask"], torch.ones(2, 1, dtype=torch.int64, device=device)], dim=1)
    decode = {"input_ids": next_ids, "attention_mask": mask, "past_key_values": prefill["past_key_values"]}
    steps = [
        Step("prefill", (), prefill, prefill_feeds),
        Step("decode", (), decode, lambda present: [next_ids, mask, *present[1:]]),
    ]
    return Case(model, (), export_kwargs, decoder_dynamic_shapes(model), steps)


BUILDERS: dict[str, Callable[[str, torch.dtype], Case]] = {
    **{name: (lambda device, dtype, name=name: build_decoder(name, device, dtype)) for name in DECODERS},
    "bert": build_bert,
    "t5": build_t5,
    "cnn": build_cnn,
    "cond": build_cond,
    "scan": build_scan,
    "while_loop": build_while_loop,
    "python_op": build_python_op,
    "llama_cache": build_llama_cache,
}


# -- running and comparing -----------------------------------------------------------------------------------------
@dataclasses.dataclass
class Result:
    family: str
    level: str
    dtype: str
    result: str = "ok"
    max_abs: float | None = None
    max_rel: float | None = None
    nan_onnx: int = 0
    nan_eager: int = 0
    nodes: int | None = None
    cpu_nodes: list[str] = dataclasses.field(default_factory=list)
    memcpy: list[str] = dataclasses.field(default_factory=list)
    providers: list[str] = dataclasses.field(default_factory=list)
    note: str = ""
    seconds: float = 0.0

    def add_note(self, text: str) -> None:
        self.note = f"{self.note}; {text}" if self.note else text


def short(exc: BaseException) -> str:
    """An exception on one line, with its type, cut at 300 characters."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return f"{type(exc).__name__}: {' / '.join(lines)}"[:300]


def eager_outputs(case: Case) -> list[list[torch.Tensor]]:
    """The eager outputs of each step, in order (a step may read the caches the previous one filled)."""
    outputs = []
    with torch.no_grad():
        for step in case.steps:
            outputs.append([t.detach() for t in tensors(case.model(*step.args, **step.kwargs))])
    return outputs


def export(case: Case, level: dict[str, Any]) -> onnx.ModelProto:
    torch._dynamo.reset()  # torch.cond/scan/while_loop trace through dynamo, whose cache outlives an export
    args, kwargs = copy.deepcopy((case.export_args, case.export_kwargs))  # the caches grow in eager runs
    return to_onnx(case.model, args, kwargs, dynamic_shapes=case.dynamic_shapes, **level)


def compare(expected: torch.Tensor, got: torch.Tensor, tolerance: float, result: Result) -> bool:
    """Updates ``result`` with the errors of one output; whether it matches (floats: within ``tolerance`` of the
    largest finite eager value, NaN at the same places; other types: equal)."""
    if tuple(got.shape) != tuple(expected.shape) or got.dtype != expected.dtype:
        result.note = f"output {tuple(got.shape)} {got.dtype}, eager {tuple(expected.shape)} {expected.dtype}"
        return False
    got = got.to(expected.device)
    if not expected.is_floating_point():
        differ = got != expected
        abs_err = float((got.long() - expected.long())[differ].abs().max()) if bool(differ.any()) else 0.0
        result.max_abs = max(result.max_abs or 0.0, abs_err)
        return abs_err == 0
    g, e = got.float(), expected.float()
    nan_g, nan_e = torch.isnan(g), torch.isnan(e)
    result.nan_onnx += int(nan_g.sum())
    result.nan_eager += int(nan_e.sum())
    same = (g == e) | (nan_g & nan_e)  # equal infinities and NaN on both sides count as equal
    diff = torch.where(same, torch.zeros_like(g), (g - e).abs().nan_to_num(nan=float("inf")))
    finite = e[torch.isfinite(e)].abs()
    scale = float(finite.max()) if finite.numel() and float(finite.max()) > 0 else 1.0
    abs_err = float(diff.max()) if diff.numel() else 0.0
    result.max_abs = max(result.max_abs or 0.0, abs_err)
    result.max_rel = max(result.max_rel or 0.0, abs_err / scale)
    return bool((nan_g == nan_e).all()) and abs_err / scale <= tolerance


def run_steps(case: Case, sess: InferenceSession, expected: list[list[torch.Tensor]], result: Result) -> None:
    """Runs the ONNX model on each step's feeds and compares with the eager outputs (the tolerance of the
    case's dtype, for every output: a float32 output of a float16 model computes from float16 values)."""
    tolerance = TOLERANCE[DTYPES[result.dtype]]
    names = [i.name for i in sess.get_inputs()]
    previous: list[torch.Tensor] = []
    ok = True
    for step, want in zip(case.steps, expected):
        feeds = step.feeds(previous) if callable(step.feeds) else step.feeds
        if len(feeds) != len(names):
            raise RuntimeError(f"{step.name}: {len(feeds)} tensors for the ONNX inputs {names}")
        previous = sess.run_torch(None, dict(zip(names, feeds)))
        if len(previous) != len(want):
            result.result, result.note = "MISMATCH", f"{step.name}: {len(previous)} outputs, eager {len(want)}"
            return
        for i, (e, g) in enumerate(zip(want, previous)):
            if not compare(e, g, tolerance, result):
                ok = False
                result.note = result.note or f"{step.name}: output {i} differs"
    if not ok:
        result.result = "MISMATCH"


# -- where onnxruntime places the nodes ----------------------------------------------------------------------------
def ort_models(onx: onnx.ModelProto) -> list[onnx.ModelProto]:
    """The models onnxruntime runs: the model itself, or its ONNX segments when it has PythonOp nodes (cut by
    the runtime's ``plan``, each segment's outputs the values read outside it)."""
    if not has_python_ops(onx):
        return [onx]
    steps, _ = plan(onx.graph)
    initializers = {t.name: t for t in onx.graph.initializer}
    types = value_infos(onx, infer=True)
    graph_outputs = {o.name for o in onx.graph.output}
    models = []
    for index, step in enumerate(steps):
        if not isinstance(step, Segment):
            continue
        mine = {id(n) for n in step.nodes}
        produced = [o for n in step.nodes for o in n.output if o]
        read_elsewhere = {i for n in onx.graph.node if id(n) not in mine for i in node_inputs(n)} | graph_outputs
        step.inputs = sorted({i for n in step.nodes for i in node_inputs(n)} - set(produced) - set(initializers))
        step.outputs = [o for o in produced if o in read_elsewhere]
        if step.outputs:
            models.append(segment_model(onx, step, initializers, types, index))
    return models


def all_nodes(graph: onnx.GraphProto) -> Iterator[onnx.NodeProto]:
    for node in graph.node:
        yield node
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                yield from all_nodes(attr.g)


def placement(onx: onnx.ModelProto, providers: list[str], result: Result) -> None:
    """Fills ``result.cpu_nodes``, ``result.memcpy`` and ``result.nodes`` from onnxruntime's node assignment and
    the optimized model it saves (sessions of their own, same providers as the checked one)."""
    with tempfile.TemporaryDirectory() as folder:
        for i, model in enumerate(ort_models(onx)):
            options = ort.SessionOptions()
            options.log_severity_level = 3  # no warning about saving an optimized model
            options.add_session_config_entry("session.record_ep_graph_assignment_info", "1")
            options.optimized_model_filepath = os.path.join(folder, f"optimized{i}.onnx")
            sess = ort.InferenceSession(model.SerializeToString(), options, providers=providers)
            subgraphs = sess.get_provider_graph_assignment_info()
            assigned = [(sub.ep_name, node) for sub in subgraphs for node in sub.get_nodes()]
            result.nodes = (result.nodes or 0) + len(assigned)
            result.cpu_nodes += [node.op_type for ep, node in assigned if ep == CPU]
            optimized = onnx.load(options.optimized_model_filepath, load_external_data=False)
            result.memcpy += [n.op_type for n in all_nodes(optimized.graph) if n.op_type.startswith("Memcpy")]
    python_ops = sum(n.op_type == "PythonOp" for n in all_nodes(onx.graph))
    if python_ops:
        result.add_note(f"{python_ops} PythonOp node(s) run by PyTorch")


def missing_kernel(exc: BaseException) -> bool:
    """onnxruntime's NOT_IMPLEMENTED: no provider has a kernel for an op and type."""
    return type(exc).__name__ == "NotImplemented"


def check_level(
    case: Case, expected: list[list[torch.Tensor]], family: str, level: str, dtype: str, providers: list[str]
) -> Result:
    """Exports the case at one level, runs it, compares, and reads the placement."""
    result = Result(family, level, dtype)
    try:
        onx = export(case, LEVELS[level])
    except Exception as e:  # noqa: BLE001 - reported in the table
        result.result, result.note = "export refused", short(e)
        return result
    try:
        sess = InferenceSession(onx, providers=providers)
    except Exception as e:  # noqa: BLE001 - reported in the table
        result.result, result.note = ("no kernel" if missing_kernel(e) else "ERROR"), short(e)
        return result
    result.providers = sess.get_providers()
    try:
        if providers[0] == CUDA and CUDA not in result.providers:
            raise RuntimeError(f"the session runs on {result.providers}, not on CUDA")
        run_steps(case, sess, expected, result)
    except Exception as e:  # noqa: BLE001 - reported in the table
        result.result, result.note = "ERROR", short(e)
    try:
        placement(onx, providers, result)
    except Exception as e:  # noqa: BLE001 - the placement is a report, not the check
        result.add_note(f"placement unknown: {short(e)}")
    return result


def check_family(
    family: str, levels: list[str], dtypes: list[str], device: str, providers: list[str]
) -> Iterator[Result]:
    """The results of one family, each dtype at each level; the eager outputs computed once per dtype."""
    for dtype in dtypes:
        try:
            case = BUILDERS[family](device, DTYPES[dtype])
        except Exception as e:  # noqa: BLE001 - reported in the table
            yield from (Result(family, level, dtype, "not built", note=short(e)) for level in levels)
            continue
        try:
            expected = eager_outputs(case)
        except Exception as e:  # noqa: BLE001 - reported in the table
            yield from (Result(family, level, dtype, "eager fails", note=short(e)) for level in levels)
            continue
        for level in levels:
            start = time.perf_counter()
            result = check_level(case, expected, family, level, dtype, providers)
            result.seconds = time.perf_counter() - start
            yield result


# -- report --------------------------------------------------------------------------------------------------------
def kinds(names: list[str], limit: int = 4) -> str:
    """``Shape x2, Gather`` (the most frequent first, at most ``limit`` kinds)."""
    common = Counter(names).most_common()
    text = ", ".join(f"{op} x{n}" if n > 1 else op for op, n in common[:limit])
    return text + (", ..." if len(common) > limit else "")


def number(value: float | None) -> str:
    return "" if value is None else f"{value:.2e}"


def row(r: Result, on_cpu: bool) -> list[str]:
    """One line of the table; the errors empty when nothing was compared, the placement when it is unknown."""
    nans = "" if r.max_abs is None else f"{r.nan_onnx}/{r.nan_eager}"
    cpu = memcpy = ""
    if r.nodes is not None:
        cpu = f"{len(r.cpu_nodes)}/{r.nodes}" + ("" if on_cpu or not r.cpu_nodes else f": {kinds(r.cpu_nodes)}")
        memcpy = f"{len(r.memcpy)}" + (f": {kinds(r.memcpy)}" if r.memcpy else "")
    note = r.note.replace("|", "/")[:160]
    return [r.family, r.level, r.dtype, r.result, number(r.max_abs), number(r.max_rel), nans, cpu, memcpy, note]


def table(results: list[Result], on_cpu: bool) -> str:
    placed = "nodes on CPU / all (a CPU run: all)" if on_cpu else "nodes on CPU / all"
    header = ["family", "level", "dtype", "result", "max abs", "max rel", "NaN onnx/eager", placed, "Memcpy", "note"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row(r, on_cpu)) + " |" for r in results]
    return "\n".join(lines)


def summary(results: list[Result]) -> str:
    counts = Counter(r.result for r in results)
    return ", ".join(f"{n} {name}" for name, n in counts.most_common())


def what_is_missing() -> list[str]:
    """What the CUDA check needs and this machine lacks (empty: a GPU, onnxruntime-gpu, and its provider starts)."""
    missing = []
    if not torch.cuda.is_available():
        missing.append(f"a CUDA device for torch (torch {torch.__version__}, built for CUDA {torch.version.cuda})")
    if CUDA not in ort.get_available_providers():
        offered = ort.get_available_providers()
        missing.append(f"onnxruntime-gpu's {CUDA} (onnxruntime {ort.__version__} offers {offered})")
    if missing:
        return missing
    identity = onnx.helper.make_model(
        onnx.helper.make_graph(
            [onnx.helper.make_node("Identity", ["x"], ["y"])], "probe",
            [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1])],
            [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1])],
        ),
        opset_imports=[onnx.helper.make_opsetid("", 18)],
    )
    try:
        providers = ort.InferenceSession(identity.SerializeToString(), providers=[CUDA, CPU]).get_providers()
    except Exception as e:  # noqa: BLE001 - reported
        return [f"a {CUDA} that starts ({short(e)})"]
    return [] if CUDA in providers else [f"a {CUDA} that starts (the session fell back to {providers})"]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--families", default=",".join(FAMILIES), help=f"comma-separated, among {FAMILIES}")
    parser.add_argument("--levels", help=f"comma-separated, among {list(LEVELS)} (default: all)")
    parser.add_argument("--dtypes", help=f"comma-separated, among {list(DTYPES)} (default: all)")
    parser.add_argument("--quick", action="store_true",
                        help=f"levels {QUICK_LEVELS} and dtypes {QUICK_DTYPES} unless --levels/--dtypes are given")
    parser.add_argument("--cpu", action="store_true", help="the same cases on the CPU provider and torch on the CPU")
    parser.add_argument("--json", help="also writes the results there")
    args = parser.parse_args(argv)
    args.families = split(args.families, FAMILIES, "family")
    default = [n for n in (QUICK_LEVELS if args.quick else LEVELS) if not (args.cpu and n.endswith("+cuda"))]
    args.levels = split(args.levels or ",".join(default), list(LEVELS), "level")
    args.dtypes = split(args.dtypes or ",".join(QUICK_DTYPES if args.quick else DTYPES), list(DTYPES), "dtype")
    return args


def split(text: str, allowed: list[str], what: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in allowed]
    if unknown:
        raise SystemExit(f"unknown {what} {unknown}, expected among {allowed}")
    return names


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.cpu:
        device, providers = "cpu", [CPU]
        cpu_name = platform.processor() or platform.machine()
        where = f"the CPU ({cpu_name}): {CPU}, eager PyTorch on the CPU; not a GPU check"
    else:
        missing = what_is_missing()
        if missing:
            print(f"no GPU: nothing checked (missing: {'; '.join(missing)})")
            return 0
        device, providers = "cuda", [CUDA, CPU]
        where = f"GPU {torch.cuda.get_device_name(0)}: {CUDA} (then {CPU}), eager PyTorch on CUDA"
    print(f"# gpu_check: ran on {where}")
    print(f"torch {torch.__version__}, onnxruntime {ort.__version__}, families {args.families}, "
          f"levels {args.levels}, dtypes {args.dtypes}", flush=True)
    results: list[Result] = []
    for family in args.families:
        for result in check_family(family, args.levels, args.dtypes, device, providers):
            results.append(result)
            print(f"  {family} {result.level} {result.dtype}: {result.result} ({result.seconds:.1f}s)",
                  file=sys.stderr, flush=True)
    print()
    print(table(results, on_cpu=args.cpu))
    print()
    print(f"{len(results)} cases: {summary(results)}")
    if args.json:
        with open(args.json, "w") as f:
            header = {"ran_on": where, "device": device, "providers": providers, "torch": torch.__version__,
                      "onnxruntime": ort.__version__}
            json.dump({**header, "results": [dataclasses.asdict(r) for r in results]}, f, indent=1)
    return 1 if any(r.result in FAILURES for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
