"""OpInfo coverage: ``to_onnx`` against ``torch.onnx.export(..., dynamo=True)`` on the same samples.

For every OpInfo entry with float32 CPU support, the first ``--samples`` sample inputs of each dtype are
wrapped in a module, exported once with ``torch.export.export``, and the ExportedProgram is converted by
both exporters, run with onnxruntime and compared with eager PyTorch (``testing/opinfo_sweep.py``).
An op passes when every sample that torch.export can export matches eager PyTorch.

Prints the table and the totals, and writes it as reStructuredText::

    python benchmarks/opinfo_coverage.py --samples 3 --rst _doc/coverage.rst \
        --cache ~/.cache/aten2onnx/opinfo_official.json

The official exporter takes about a second per sample; ``--cache`` keeps its outcomes (they do not depend
on this project's code) so that a second run only converts with ``to_onnx``.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import datetime
import io
import json
import logging
import os
import sys
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

import torch  # noqa: E402

from experimental.torch_interpreter.testing import opinfo_sweep as sweep  # noqa: E402
from experimental.torch_interpreter.testing.opinfo_expected_failures import (  # noqa: E402
    EXPECTED_FAILURES,
    VALUES_NOT_COMPARED,
)

logger = logging.getLogger("opinfo_coverage")


def _load_cache(path: str | None) -> dict:
    if not path or not os.path.exists(path):
        return {}
    with open(path) as f:
        data = json.load(f)
    if data.get("torch") != torch.__version__:
        logger.warning("cache %s was made with torch %s, ignored", path, data.get("torch"))
        return {}
    return data["outcomes"]


def _save_cache(path: str | None, outcomes: dict) -> None:
    if not path:
        return
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump({"torch": torch.__version__, "outcomes": outcomes}, f)
    os.replace(tmp, path)


def _as_json(o: sweep.Outcome) -> list:
    return [o.category, o.short(), list(o.missing), o.reference]


def _from_json(v: list) -> sweep.Outcome:
    category, short, missing, reference = v
    message = short.split(": ", 1)[1] if ": " in short else ""
    return sweep.Outcome(category, message, tuple(missing), reference)


def run(keys: list[str], dtypes: tuple, samples: int | None, official: bool, cache_path: str | None) -> dict:
    """``{op: {"ours": [(dtype, i, Outcome)], "official": [...]}}``."""
    cache = _load_cache(cache_path)
    results: dict = {}
    begin = time.perf_counter()
    by_key = sweep.ops_by_key()
    for n, key in enumerate(keys):
        op = by_key[key]
        res = results[key] = {"ours": [], "official": []}
        for dtype in dtypes:
            if dtype not in sweep.supported_dtypes(op):
                continue
            try:
                chosen = sweep.samples(op, dtype, samples)
            except Exception as e:  # a sample generator failing for this dtype
                logger.warning("%s %s: sample_inputs fails: %s", key, dtype, e)
                continue
            for i, sample in enumerate(chosen):
                ckey = f"{key}|{str(dtype).replace('torch.', '')}|{i}"
                exporters = ("ours", "official") if official and ckey not in cache else ("ours",)
                with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
                    warnings.simplefilter("ignore")
                    out = sweep.check_sample(op, sample, dtype, exporters, key not in VALUES_NOT_COMPARED)
                res["ours"].append((dtype, i, out["ours"]))
                if "official" in out:
                    cache[ckey] = _as_json(out["official"])
                if official:
                    res["official"].append((dtype, i, _from_json(cache[ckey])))
        if official:
            _save_cache(cache_path, cache)
        logger.info("[%d/%d] %s (%.0fs)", n + 1, len(keys), key, time.perf_counter() - begin)
    return results


def _summary(outcomes: list) -> tuple[str, str]:
    """(status, reason) of one exporter on one op: ``pass``, ``fail`` or ``n/a`` (nothing compared)."""
    if not outcomes:
        return "n/a", "no sample"
    for dtype, i, o in outcomes:
        if o.failed:
            where = f"{str(dtype).replace('torch.', '')} sample {i}"
            return "fail", f"{o.short()} ({where})"
    compared = [o for _, _, o in outcomes if o.category == sweep.PASS]
    if compared:
        return "pass", "onnx.reference" if all(o.reference for o in compared) else ""
    first = outcomes[0][2]
    return "n/a", first.short()


def table(results: dict, official: bool) -> list[dict]:
    rows = []
    for key, res in results.items():
        ours, ours_reason = _summary(res["ours"])
        row = {"op": key, "ours": ours, "reason": ours_reason, "samples": len(res["ours"])}
        if official:
            row["official"], row["official_reason"] = _summary(res["official"])
        row["listed"] = EXPECTED_FAILURES.get(key, "")
        rows.append(row)
    return rows


def totals(rows: list[dict], official: bool) -> dict:
    count = collections.Counter(r["ours"] for r in rows)
    out = {"ops": len(rows), "ours_pass": count["pass"], "ours_fail": count["fail"], "n/a": count["n/a"]}
    if official:
        out["official_pass"] = sum(r["official"] == "pass" for r in rows)
        out["official_fail"] = sum(r["official"] == "fail" for r in rows)
        out["official_only"] = [r["op"] for r in rows if r["official"] == "pass" and r["ours"] != "pass"]
        out["ours_only"] = [r["op"] for r in rows if r["ours"] == "pass" and r["official"] != "pass"]
    return out


def print_table(rows: list[dict], tot: dict, official: bool) -> None:
    width = max(len(r["op"]) for r in rows)
    for r in rows:
        line = f"{r['op']:<{width}}  {r['ours']:<4}"
        if official:
            line += f"  official {r['official']:<4}"
        if r["reason"]:
            line += f"  {r['reason'][:150]}"
        print(line)
    print()
    print(f"ops: {tot['ops']}, to_onnx pass {tot['ours_pass']}, fail {tot['ours_fail']}, n/a {tot['n/a']}")
    if official:
        print(f"torch.onnx.export(dynamo=True): pass {tot['official_pass']}, fail {tot['official_fail']}")
        print(f"passed by the official exporter only ({len(tot['official_only'])}): {', '.join(tot['official_only'])}")
        print(f"passed by to_onnx only: {len(tot['ours_only'])}")


def _rst_cell(text: str) -> str:
    text = text.replace("|", "/").replace("`", "'").replace("*", "\\*").replace("\n", " ")[:200]
    return text.replace("_", "\\_")  # reST would read ``resize_`` as a link target


def write_rst(path: str, rows: list[dict], tot: dict, official: bool, args: argparse.Namespace) -> None:
    dtypes = ", ".join(args.dtypes.split(","))
    lines = [
        ".. _coverage:",
        "",
        "OpInfo coverage",
        "===============",
        "",
        "PyTorch's OpInfo database (``torch.testing._internal.common_methods_invocations.op_db``) gives sample",
        "inputs for every operator PyTorch tests. Each sample is wrapped in a module (tensors become inputs, other",
        "arguments are constants), exported with ``torch.export.export``, converted, run with onnxruntime and",
        "compared with eager PyTorch. The same ExportedProgram is converted by ``to_onnx`` and by",
        "``torch.onnx.export(..., dynamo=True)``. An op *passes* when every sample torch.export can export",
        "matches; *n/a* means no sample could be compared (torch.export fails, the outputs are not tensors,",
        "complex numbers). Random ops are compared on shapes and dtypes only.",
        "",
        f"Generated by ``python benchmarks/opinfo_coverage.py --samples {args.samples} --dtypes {args.dtypes}``",
        f"on {datetime.date.today().isoformat()} with torch {torch.__version__}: the first {args.samples} samples",
        f"of each dtype among {dtypes}. The unit tests (``_unittests/test_opinfo.py``) run the same sweep;",
        "the ops expected to fail are listed with their reason in ``testing/opinfo_expected_failures.py``.",
        "",
        "Totals",
        "------",
        "",
        f"* OpInfo entries: {tot['ops']}",
        f"* ``to_onnx``: **{tot['ours_pass']} pass**, {tot['ours_fail']} fail, {tot['n/a']} n/a",
    ]
    if official:
        lines += [
            f"* ``torch.onnx.export(..., dynamo=True)``: **{tot['official_pass']} pass**, {tot['official_fail']} fail",
            f"* passed by the official exporter and not by ``to_onnx``: {len(tot['official_only'])}"
            + (f" ({', '.join(f'``{op}``' for op in tot['official_only'])})" if tot["official_only"] else ""),
            f"* passed by ``to_onnx`` and not by the official exporter: {len(tot['ours_only'])}",
        ]
    header = ["op", "to_onnx"] + (["official"] if official else []) + ["reason (to_onnx)"]
    lines += [
        "",
        "Per dtype",
        "---------",
        "",
        "The same sweep over float16, bfloat16, int32, int64 and bool, every sample of every op, ``to_onnx`` only",
        "(``benchmarks/opinfo_dtypes.py``, as ``pytest --opinfo-full``).",
        "",
        ".. include:: coverage_dtypes.inc",
    ]
    lines += [
        "",
        "Table (float32)",
        "-----",
        "",
        ".. list-table::",
        "    :header-rows: 1",
        "    :widths: " + " ".join(["30", "8"] + (["8"] if official else []) + ["54"]),
        "",
    ]
    lines.append("    * - " + "\n      - ".join(header))
    for r in rows:
        cells = [f"``{r['op']}``", r["ours"]] + ([r["official"]] if official else []) + [_rst_cell(r["reason"])]
        lines.append("\n".join(f"    {'*' if i == 0 else ' '} -" + (f" {c}" if c else "") for i, c in enumerate(cells)))
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--samples", type=int, default=3, help="samples per op and dtype (0: all)")
    parser.add_argument(
        "--dtypes",
        default="float32",
        help="comma-separated, among " + ", ".join(str(d).replace("torch.", "") for d in sweep.DTYPES),
    )
    parser.add_argument("--ops", default="", help="comma-separated substrings of the op names to keep")
    parser.add_argument("--no-official", action="store_true", help="do not run torch.onnx.export")
    parser.add_argument("--cache", default=None, help="JSON file keeping the official exporter's outcomes")
    parser.add_argument("--rst", default=None, help="writes the table there (e.g. _doc/coverage.rst)")
    parser.add_argument("--json", default=None, help="writes the rows and totals there")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(message)s")
    for name in ("experimental", "torch", "onnxscript", "onnx_ir", "torch.onnx"):
        logging.getLogger(name).setLevel(logging.ERROR)

    dtypes = tuple(getattr(torch, d) for d in args.dtypes.split(","))
    keys = list(sweep.ops_by_key())
    if args.ops:
        keys = [k for k in keys if any(p in k for p in args.ops.split(","))]
    official = not args.no_official
    results = run(keys, dtypes, args.samples or None, official, args.cache)
    rows = table(results, official)
    tot = totals(rows, official)
    print_table(rows, tot, official)
    if args.rst:
        write_rst(args.rst, rows, tot, official, args)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                {"dtypes": args.dtypes.split(","), "samples": args.samples, "torch": torch.__version__,
                 "rows": rows, "totals": tot},
                f,
                indent=1,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
