"""The long run of the program fuzzer (``testing/random_programs.py``): ``--n`` random programs from
``--seed`` on, each exported with ``to_onnx`` and compared with eager PyTorch; with ``--training``, each trained one
step through the ``torch.compile`` backend and compared with eager (outputs, loss, every input gradient:
``testing/random_training.py``).

Run: ``python benchmarks/fuzz.py --n 10000 [--seed 0] [--out _doc/fuzz.rst] [--timeout 60] [--max-seconds T]``;
``python benchmarks/fuzz.py --training --n 2000 [--out _doc/fuzz_training.inc]``.
Prints one line
per bug (outcome, seed, detail) and writes the summary page (counts by outcome, outcomes per op template,
each bug with its seed, the most frequent unsupported ops) to ``--out``. One program:
``python benchmarks/fuzz.py --n 1 --seed S --show`` prints its source and outcome.
"""

from __future__ import annotations

import argparse
import collections
import gc
import logging
import resource
import signal
import sys
import time
import warnings

from experimental.torch_interpreter.testing.program_runs import BUGS, OUTCOMES, Outcome, run_program
from experimental.torch_interpreter.testing.random_programs import RandomChooser, generate
from experimental.torch_interpreter.testing.random_training import (
    TRAINING_BUGS,
    TRAINING_OUTCOMES,
    run_training_program,
)

logger = logging.getLogger("fuzz")


def _on_alarm(signum, frame):
    raise TimeoutError("the program ran past --timeout")


def run(
    n: int,
    seed: int,
    timeout: int,
    show: bool = False,
    max_seconds: float | None = None,
    out: str | None = None,
    training: bool = False,
) -> list[tuple[int, list[str], Outcome]]:
    """Runs programs ``seed .. seed + n - 1`` (fewer when ``max_seconds`` runs out); returns
    ``(seed, op templates, outcome)`` per program. Every 100 programs, the summary so far goes to ``out``."""
    run_one, bugs = (run_training_program, TRAINING_BUGS) if training else (run_program, BUGS)
    write = training_summary if training else summary
    results = []
    signal.signal(signal.SIGALRM, _on_alarm)
    begin = time.perf_counter()
    for s in range(seed, seed + n):
        if max_seconds is not None and time.perf_counter() - begin > max_seconds:
            logger.warning("--max-seconds reached after %d programs", s - seed)
            break
        prog = generate(RandomChooser(s))
        signal.alarm(timeout)
        try:
            outcome = run_one(prog)
        except TimeoutError:
            outcome = Outcome("raw_exception", f"timeout after {timeout}s", "TimeoutError")
        finally:
            signal.alarm(0)
        results.append((s, prog.ops, outcome))
        if show:
            print(prog.describe())
            print(outcome)
        elif outcome.kind in bugs or (training and outcome.kind == "fallback"):
            print(f"{outcome.kind} seed={s}: {outcome.detail[:300]}", flush=True)
        if (s - seed + 1) % 100 == 0:
            counts = collections.Counter(o.kind for _, _, o in results)
            rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
            logger.warning(
                "%d programs in %.0fs (max RSS %d MB): %s", s - seed + 1, time.perf_counter() - begin, rss, dict(counts)
            )
            gc.collect()
            if out:
                _write(out, write(results, seed, time.perf_counter() - begin))
    return results


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = [".. list-table::", "   :header-rows: 1", ""]
    for row in [header, *rows]:
        lines.append(f"   * - {row[0]}")
        lines.extend(f"     - {cell}" for cell in row[1:])
    return "\n".join(lines)


def summary(results: list[tuple[int, list[str], Outcome]], seed: int, elapsed: float) -> str:
    """The reST page: counts by outcome, outcomes per op template, bugs, most frequent unsupported ops."""
    counts = collections.Counter(o.kind for _, _, o in results)
    per_op: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for _, ops, o in results:
        for op in set(ops):
            per_op[op][o.kind] += 1
    kinds = [k for k in OUTCOMES if any(c[k] for c in per_op.values()) or counts[k]]
    unsupported = collections.Counter(
        o.detail.split(" failed: ")[-1][:90] for _, _, o in results if o.kind == "unsupported"
    )
    bugs = [(s, o) for s, _, o in results if o.kind in BUGS]
    out = [
        "Program fuzzer",
        "==============",
        "",
        "Random small programs of everyday ops (``testing/random_programs.py``: elementwise with broadcasting",
        "and Python scalars, comparisons, reductions, softmax, matmul, views, cat/split, indexing, scatter, sort,",
        "casts, in-place ops, convolution, pooling, padding, normalization, activations) on random shapes and",
        "dtypes (float32, float16, bfloat16, int64, bool, mixed), a third ending with half-precision arithmetic",
        "whose result jumps (``.long()``, a comparison, ``floor``, ``argmax``, the index of a ``gather`` or",
        "``scatter_add``; half of these on an input of values next to the integer boundaries), half of them with",
        "dynamic axes checked again on grown inputs, exported with ``to_onnx`` and compared with eager PyTorch.",
        "``_unittests/test_fuzz.py`` runs 400 of them (hypothesis, derandomized, about a minute, fewer of them",
        "ending with such arithmetic) with the tests; this page is the summary of the long run:",
        "",
        ".. code-block:: bash",
        "",
        f"    python benchmarks/fuzz.py --n {len(results)} --seed {seed} --out _doc/fuzz.rst",
        "",
        f"{len(results)} programs in {elapsed:.0f} s on a 2-core machine shared with other jobs. Outcomes:",
        "",
        "* ``match``: onnxruntime equals eager within the tolerance of the least precise type the value was",
        "  computed from (on the grown inputs too);",
        "* ``precision``: a float16/bfloat16 value differs by more than that tolerance, and onnxruntime's worst",
        "  error against the same program run in float64 is no larger than eager's (see below);",
        "* ``guarded``: the grown inputs break a condition on the input sizes that the exported graph relies on",
        "  (a narrowed range, the number of pieces of a ``split``), and ``InferenceSession`` refuses them with a",
        "  ``RuntimeFeedError`` naming the condition, the FX node and the line, where the ExportedProgram fails",
        "  or returns other results than eager;",
        "* ``unsupported``: a project error for an op or option the converters do not handle;",
        "* ``export_error``: ``torch.export`` refused the program;",
        "* ``export_unsound``: on the grown inputs, the ExportedProgram itself fails or differs from eager, and",
        "  no condition of the model caught it;",
        "* the bugs: ``project_error`` (a converter crashed, or a size condition refused inputs the",
        "  ExportedProgram handles), ``mismatch``, ``raw_exception``.",
        "",
        _table(["outcome", "programs"], [[f"``{k}``", str(counts[k])] for k in OUTCOMES if counts[k]]),
        "",
        "Outcomes per op template (a program counts once per template it uses):",
        "",
        _table(["template", "programs"] + [f"``{k}``" for k in kinds],
               [[f"``{op}``", str(sum(c.values()))] + [str(c[k]) for k in kinds] for op, c in sorted(per_op.items())]),
        "",
    ]
    out += ["Bugs", "----", ""]
    if bugs:
        out += [".. code-block:: text", ""] + [f"    {o.kind} seed={s}: {o.detail[:200]}" for s, o in bugs] + [""]
    else:
        out += ["None: no mismatch, no raw exception, no crashed converter.", ""]
    out += [
        "Float16 on onnxruntime's CPU",
        "----------------------------",
        "",
        "onnxruntime's CPU has no float16 kernel for most ops: it computes them in float32 and removes the",
        "``Cast`` pairs between two such ops (its ``RemoveDuplicateCastTransformer`` holds float16 and float32",
        "in one type group), so a chain of float16 ops keeps float32 where PyTorch rounds after each op. The",
        "ONNX graph rounds where PyTorch does; the runtime drops the roundings, and the result is more precise",
        "than eager's. Where a later op amplifies the difference (``layer_norm`` of ``log_softmax(cumsum(x))``,",
        "``1.5 / log(x * x + 1)``), it exceeds float16's tolerance: the run counts it as ``precision`` when",
        "onnxruntime is no farther than eager from the float64 result, and as a ``mismatch`` otherwise",
        "(``_unittests/test_fuzz.py`` checks both ways). Bit-exact float16 needs a runtime with float16 kernels",
        "(CUDA) or a graph that computes in float32 explicitly. Where a float16 result jumps (an integer cast, a",
        "comparison, ``floor``/``ceil``/``round``, an index), the graph computes it in float32 explicitly and",
        "rounds it, as PyTorch does: those outputs (``half_jump``) must match exactly, never ``precision``.",
        "",
    ]
    out += [
        "Bugs found by the fuzzer and fixed",
        "----------------------------------",
        "",
        "Each with its smallest program in ``_unittests/test_regressions.py`` (or ``test_fuzz.py`` by seed): a",
        "float16 result read in float32 lost its rounding (``float32 + float16 * float16``), ``copy_`` of a Python",
        "number, ``var``/``std`` (every ``Size``) of bfloat16, ``rms_norm`` with a bfloat16 weight, adaptive average",
        "pooling of bfloat16 over dynamic axes, onnxruntime crashing (segfault) on ``F.linear`` of a transposed",
        "bfloat16 tensor, ``Dim.AUTO`` axes that torch.export made static, writes through ``expand()``ed views,",
        "same-dtype ``.to()`` on a view, one-operand einsum views, an empty-slice ``setitem``; and the",
        "``split`` of a dynamic axis, whose number of pieces the exported graph fixes without a guard (now a",
        "size condition checked by ``InferenceSession``: ``guarded``). The 10,000-program run above found 12",
        "more (the bugs listed above, each seed a ``match`` now): ``clamp`` with one bound (ONNX ``Clip``'s",
        "default bound is the largest finite value: ``inf`` became 3.4e38), ``max_pool`` and global max pooling",
        "of windows of ``-inf`` (onnxruntime starts from the lowest float), linear/bilinear/bicubic",
        "``interpolate`` of infinities (onnxruntime's ``Resize`` gave NaN: an exact path when the input is not",
        "finite), ``group_norm`` of an empty tensor with a dynamic batch (a segfault, and onnxscript's optimizer",
        "writing ``-1`` next to a 0 in a ``Reshape``), ``softmax`` of an empty bool tensor (an int64",
        "``Softmax``), a bfloat16 ``linear`` with bias rounded twice, and a ``Transpose`` followed by a",
        "``MatMul`` by a vector, which onnxruntime's fusion computes wrong (``cummax`` then ``matmul``), ``copy_``",
        "into an empty slice (onnxruntime's optimizer drops an ``Expand`` of 1 to 0 elements), ``floor_divide``",
        "zeros of the wrong sign (PyTorch's ``copysign(0, a / b)``), an index computed from float16 arithmetic",
        "(``(x.abs() * 7).long() % 6``: 4 in PyTorch, 3 in onnxruntime, which truncated the unrounded float32",
        "product). Found since, and exact now: floor division of float32 quotients from 2**22 on (the graph",
        "rounded a ``k + 0.5`` to even where PyTorch floors it) and of float16 and bfloat16 values (PyTorch's CPU",
        "kernel rounds each step to the type), ``cumprod`` meeting a NaN or an infinity after a zero (it stayed 0;",
        "the training programs found it), ``group_norm`` of a constant group (2.4e-4 where PyTorch gives 0: the",
        "float32 mean of a constant is off by an ulp, which the normalization multiplies by up to 300; the rows",
        "are now shifted by their first value, and ``instance_norm``, ``batch_norm``, ``var`` and ``std`` with",
        "them). Of the two ``export_unsound`` programs, one ``unbind`` of a chunk of a dynamic axis (seed 1117)",
        "is ``guarded`` now: its number of tensors is a size condition, as ``split``'s. The other (seed 6971)",
        "unbinds a ``tensor_split`` piece whose size torch.export computes for odd lengths only; on an even one,",
        "onnxruntime fails inside the graph, and the ExportedProgram refuses the input.",
        "",
    ]
    if unsupported:
        out += ["Unsupported", "-----------", "", "The most frequent reasons:", "", ".. code-block:: text", ""]
        out += [f"    {n:5d}  {reason}" for reason, n in unsupported.most_common(10)] + [""]
    return "\n".join(out)


def training_summary(results: list[tuple[int, list[str], Outcome]], seed: int, elapsed: float) -> str:
    """The reST section of a ``--training`` run (included by the training page): counts by outcome, then every
    program that fell back, chose among ties or differs."""
    counts = collections.Counter(o.kind for _, _, o in results)
    shown = [(s, o) for s, _, o in results if o.kind in (*TRAINING_BUGS, "fallback", "ties")]
    out = [
        ".. code-block:: bash",
        "",
        f"    python benchmarks/fuzz.py --training --n {len(results)} --seed {seed} --out _doc/fuzz_training.inc",
        "",
        f"{len(results)} programs in {elapsed:.0f} s on this 2-core machine:",
        "",
        _table(["outcome", "programs"], [[f"``{k}``", str(counts[k])] for k in TRAINING_OUTCOMES if counts[k]]),
        "",
    ]
    if shown:  # the block ends with an empty line: text may follow it
        out += [".. code-block:: text", ""] + [f"    {o.kind} seed={s}: {o.detail[:160].rstrip()}" for s, o in shown]
        out += [""]
    return "\n".join(out)


def _write(path: str, text: str) -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=1000, help="number of programs")
    parser.add_argument("--seed", type=int, default=0, help="seed of the first program")
    parser.add_argument("--timeout", type=int, default=60, help="seconds allowed to one program")
    parser.add_argument("--max-seconds", type=float, default=None, help="stop after this time (summary of those run)")
    parser.add_argument("--out", default=None, help="reST summary to write (e.g. _doc/fuzz.rst)")
    parser.add_argument("--show", action="store_true", help="print each program and its outcome")
    parser.add_argument("--training", action="store_true", help="train each program one step (torch.compile backend)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    logging.getLogger("torch").setLevel(logging.ERROR)
    warnings.filterwarnings("ignore")
    begin = time.perf_counter()
    results = run(args.n, args.seed, args.timeout, args.show, args.max_seconds, args.out, args.training)
    elapsed = time.perf_counter() - begin
    counts = collections.Counter(o.kind for _, _, o in results)
    print(f"{len(results)} programs in {elapsed:.0f}s: {dict(counts)}")
    if args.out:
        _write(args.out, (training_summary if args.training else summary)(results, args.seed, elapsed))
    return 1 if any(counts[k] for k in (TRAINING_BUGS if args.training else BUGS)) else 0


if __name__ == "__main__":
    sys.exit(main())
