"""The OpInfo sweep per dtype: every OpInfo entry, for each of ``--dtypes`` it supports on the CPU, every sample
(or the first ``--samples``) converted by ``to_onnx``, run with onnxruntime and compared with eager PyTorch
(``testing/opinfo_sweep.py``, as ``pytest --opinfo-full`` does, without the official exporter).

One outcome per (op, dtype): the first failing sample, else ``pass``, else why nothing was compared. Each
failure is checked against ``testing/opinfo_expected_failures.py`` (``reason_for``: ``op[dtype]``,
``op[float32]``, ``op``):
``listed`` when it fails as its reason says, ``new`` otherwise. Outcomes are kept in ``--json`` after every op
(``--resume`` goes on from there) and rendered as ``_doc/coverage_dtypes.inc``, included by the coverage page::

    python benchmarks/opinfo_dtypes.py --dtypes float16,bfloat16,int32,int64,bool --samples 0
    python benchmarks/opinfo_dtypes.py --resume --recheck     # the failing pairs again, after a fix
    python benchmarks/opinfo_dtypes.py --render-only
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
    VALUES_NOT_COMPARED,
    expected_category,
    reason_for,
)

logger = logging.getLogger("opinfo_dtypes")
JSON = os.path.join(HERE, "opinfo_dtypes.json")
INC = os.path.join(ROOT, "_doc", "coverage_dtypes.inc")
DEFAULT_DTYPES = "float16,bfloat16,int32,int64,bool"


def verdict(category: str, reason: str | None) -> str:
    """``pass``, ``n/a`` (nothing compared), ``listed`` (fails as its listed reason says) or ``new``."""
    if category == sweep.PASS:
        return "pass" if reason is None else "new"  # a listed op that passes: the list must shrink
    if category not in sweep.FAILURES:
        return "n/a"
    return "listed" if reason is not None and expected_category(reason) == category else "new"


def check(key: str, dtype: torch.dtype, limit: int | None) -> dict:
    """One (op, dtype): every selected sample, summarized as the unit test does."""
    begin = time.perf_counter()
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        outcomes = [
            o["ours"]
            for _, _, _, o in sweep.sweep([key], (dtype,), limit, ("ours",), frozenset(VALUES_NOT_COMPARED))
        ]
    o = sweep.summarize(outcomes)
    name = str(dtype).replace("torch.", "")
    reason = reason_for(key, name)
    return {
        "op": key,
        "dtype": name,
        "category": o.category,
        "short": o.short(),
        "samples": len(outcomes),
        "reference": o.reference,
        "listed": reason or "",
        "verdict": verdict(o.category, reason),
        "seconds": round(time.perf_counter() - begin, 2),
    }


def _save(path: str, data: dict) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(data, f, indent=0, sort_keys=True)
    os.replace(tmp, path)


def run(dtypes: list[str], limit: int | None, ops: str, path: str, resume: bool, recheck: bool = False) -> dict:
    data = {"rows": {}}
    if resume and os.path.exists(path):
        with open(path) as f:
            data = json.load(f)
        if recheck:  # the failures again (after a fix), the passes kept
            data["rows"] = {k: r for k, r in data["rows"].items() if r["verdict"] not in ("listed", "new")}
    data.update(torch=torch.__version__, date=datetime.date.today().isoformat(), samples=limit or 0)
    data["dtypes"] = sorted(set(data.get("dtypes", [])) | set(dtypes), key=DEFAULT_DTYPES.find)
    by_key = sweep.ops_by_key()
    keys = [k for k in by_key if not ops or any(p in k for p in ops.split(","))]
    begin = time.perf_counter()
    for n, key in enumerate(keys):
        for name in dtypes:
            dtype = getattr(torch, name)
            if f"{key}|{name}" in data["rows"] or dtype not in sweep.supported_dtypes(by_key[key]):
                continue
            row = data["rows"][f"{key}|{name}"] = check(key, dtype, limit)
            if row["verdict"] == "new":
                logger.warning("%s[%s]: %s (listed: %s)", key, name, row["short"], row["listed"] or "nothing")
        _save(path, data)
        logger.info("[%d/%d] %s (%.0fs)", n + 1, len(keys), key, time.perf_counter() - begin)
    return data


def _cell(text: str) -> str:
    text = text.replace("|", "/").replace("`", "'").replace("*", "\\*").replace("\n", " ")[:400]
    return text.replace("_", "\\_")


def render(data: dict, path: str = INC) -> str:
    """The per-dtype table and the list of the (op, dtype) pairs that fail, as a reST fragment."""
    rows = list(data["rows"].values())
    for r in rows:  # against the list as it is now (reasons added since the run)
        reason = reason_for(r["op"], r["dtype"])
        r["listed"], r["verdict"] = reason or "", verdict(r["category"], reason)
    dtypes = [d for d in data["dtypes"] if any(r["dtype"] == d for r in rows)]
    by = collections.defaultdict(collections.Counter)
    for r in rows:
        by[r["dtype"]][r["verdict"]] += 1
        if r["verdict"] != "pass" and r["category"] in sweep.FAILURES:
            by[r["dtype"]][r["category"]] += 1
        if r["category"] == sweep.MISMATCH and not r["listed"].startswith("by design:"):
            by[r["dtype"]]["numeric mismatch"] += 1
    samples = f"the first {data['samples']} samples" if data.get("samples") else "every sample"
    lines = [
        ".. generated by benchmarks/opinfo_dtypes.py, do not edit",
        "",
        f"Generated on {data['date']} with torch {data['torch']} ({samples} of each op and dtype; the failing pairs",
        "run again with ``--resume --recheck`` after fixes)::",
        "",
        f"    python benchmarks/opinfo_dtypes.py --dtypes {','.join(dtypes)} --samples {data.get('samples', 0)}",
        "",
        "An (op, dtype) *passes* when every sample torch.export can export matches eager PyTorch (float16 and",
        "bfloat16 within 1e-2, or at least as close to the float64 result as eager; integers and booleans",
        "exactly); *n/a* when no sample could be compared (torch.export or eager PyTorch fails on it);",
        "*expected failure* when it fails as ``testing/opinfo_expected_failures.py`` says, with the reason;",
        "*unexpected* otherwise. *Numeric mismatches* counts the outputs that differ from eager PyTorch",
        "(ONNX's defined behaviour where PyTorch's is not, listed as *by design*, excluded).",
        "",
        ".. list-table:: OpInfo sweep per dtype",
        "    :header-rows: 1",
        "",
        "    * - dtype\n      - ops\n      - pass\n      - n/a\n      - expected failure\n      - unexpected"
        "\n      - numeric mismatches\n      - failures by category",
    ]
    for d in dtypes:
        c = by[d]
        cats = ", ".join(f"{k} {c[k]}" for k in sweep.FAILURES if c[k]) or "none"
        cells = [d, sum(c[v] for v in ("pass", "n/a", "listed", "new")), c["pass"], c["n/a"], c["listed"], c["new"],
                 c["numeric mismatch"], cats]
        lines.append("    * - " + "\n      - ".join(str(x) for x in cells))
    failing = sorted((r for r in rows if r["verdict"] in ("listed", "new")), key=lambda r: (r["op"], r["dtype"]))
    lines += [
        "",
        f"The {len(failing)} (op, dtype) pairs that fail, with the reason listed for them:",
        "",
        ".. list-table::",
        "    :header-rows: 1",
        "    :widths: 28 10 62",
        "    :class: wide-table",
        "",
        "    * - op\n      - dtype\n      - reason",
    ]
    for r in failing:
        reason = r["listed"] if r["verdict"] == "listed" else "UNEXPECTED: " + r["short"]
        lines.append(f"    * - ``{r['op']}``\n      - {r['dtype']}\n      - {_cell(reason)}")
    text = "\n".join(lines) + "\n"
    with open(path, "w") as f:
        f.write(text)
    return "\n".join(f"{d}: {dict(by[d])}" for d in dtypes)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dtypes", default=DEFAULT_DTYPES, help="comma-separated dtypes")
    parser.add_argument("--samples", type=int, default=0, help="samples per op and dtype (0: all)")
    parser.add_argument("--ops", default="", help="comma-separated substrings of the op names to keep")
    parser.add_argument("--json", default=JSON, help="the outcomes, written after every op")
    parser.add_argument("--out", default=INC, help="the reST fragment")
    parser.add_argument("--resume", action="store_true", help="keep the outcomes already in --json")
    parser.add_argument("--recheck", action="store_true", help="with --resume: run the failing pairs again")
    parser.add_argument("--render-only", action="store_true", help="write --out from --json")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(message)s")
    logger.setLevel(logging.INFO)
    for name in ("experimental", "torch", "onnxscript", "onnx_ir"):
        logging.getLogger(name).setLevel(logging.ERROR)
    if args.render_only:
        with open(args.json) as f:
            data = json.load(f)
    else:
        data = run(args.dtypes.split(","), args.samples or None, args.ops, args.json, args.resume, args.recheck)
    print(render(data, args.out))
    return 1 if any(r["verdict"] == "new" for r in data["rows"].values()) else 0


if __name__ == "__main__":
    sys.exit(main())
