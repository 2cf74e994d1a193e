"""The smoke set of the unit tests on several torch releases, one virtual environment per release.

For each version, a virtual environment ``<root>/torch-<version>`` is created (``python -m venv``, no system
packages), the release is installed with the project as the README says (``pip install torch==<version> -e
".[dev]"``), the project's other dependencies pinned to the versions of the environment running this script (so
that torch is the only thing that changes), then the smoke set (:data:`SMOKE`: model families, tiny LLMs with and
without a cache, capture strategies, control flow, PythonOp and custom ops, optimization levels, investigation)
runs in it. The results go to ``<root>/results.json`` (merged with the versions run before), a markdown table
(``<root>/torch_matrix.md``, printed too) and the reST table the documentation includes
(``_doc/torch_versions.inc``)::

    python benchmarks/torch_matrix.py                       # 2.11.0 2.12.0 2.13.0 2.14.1 in /tmp/torch_matrix
    python benchmarks/torch_matrix.py /tmp/torch_matrix --versions 2.14.1 --keep
    python benchmarks/torch_matrix.py --render              # the tables again from results.json and the junit files

Installing takes two to four minutes per version where the wheels are on disk or in pip's cache (a CUDA build of
torch and its ``nvidia-*`` packages weigh several GB); a version that does not install within ``--install-timeout``
is recorded as not tested, with the reason. The environments are removed once tested unless ``--keep``.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOC_INC = os.path.join(ROOT, "_doc", "torch_versions.inc")

#: the releases tested by default: the oldest supported to the newest that installs here
VERSIONS = ["2.11.0", "2.12.0", "2.13.0", "2.14.1"]

#: the smoke set: a few minutes per version on two cores
SMOKE = [
    "_unittests/test_torch_versions.py",
    "_unittests/test_convert.py",
    "_unittests/test_models_families.py",
    "_unittests/test_models_llm.py",
    "_unittests/test_models_llm_cache.py",
    "_unittests/test_models_cnn.py",
    "_unittests/test_capture_strategies.py",
    "_unittests/test_control_flow.py",
    "_unittests/test_python_op.py",
    "_unittests/test_custom_ops.py",
    "_unittests/test_optimize.py",
    "_unittests/test_investigate.py",
]

#: the project's other dependencies, pinned to the versions of the running environment when it has them
PINNED = [
    "onnx", "onnx-ir", "onnxruntime", "onnxscript", "numpy", "ml_dtypes", "packaging", "transformers",
    "tokenizers", "huggingface-hub", "safetensors", "pytest", "expecttest", "hypothesis",
]


def _pins() -> list[str]:
    pins = []
    for name in PINNED:
        try:
            pins.append(f"{name}=={importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            continue
    return pins


def _run(command: list[str], log: str, timeout: float, cwd: str = ROOT,
         env: dict | None = None) -> tuple[int, float]:
    """Runs ``command``, its output appended to ``log``; returns its exit code (124 on timeout) and its duration."""
    begin = time.perf_counter()
    with open(log, "a", encoding="utf-8") as f:
        f.write(f"\n$ {' '.join(command)}\n")
        f.flush()
        try:
            proc = subprocess.run(command, cwd=cwd, env=env, stdout=f, stderr=subprocess.STDOUT, timeout=timeout)
            rc = proc.returncode
        except subprocess.TimeoutExpired:
            rc = 124
    return rc, time.perf_counter() - begin


def _tail(log: str, lines: int = 5) -> str:
    with open(log, encoding="utf-8", errors="replace") as f:
        text = [line.strip() for line in f.read().splitlines() if line.strip()]
    return " / ".join(text[-lines:])


def _short(text: str, limit: int = 160) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def read_junit(path: str) -> dict:
    """Counts and reasons from a pytest junit file: passed, failed (errors included), skipped, and for each test
    that did not pass its id and the first line of its message."""
    tree = ET.parse(path)
    counts = {"passed": 0, "failed": 0, "skipped": 0}
    failures, skips = [], []
    for case in tree.iter("testcase"):
        module = case.get("classname", "").split(".")[-1]
        name = f"{module}::{case.get('name')}" if module else case.get("name", "")
        bad = case.find("failure")
        if bad is None:
            bad = case.find("error")
        skipped = case.find("skipped")
        if bad is not None:
            counts["failed"] += 1
            failures.append(f"{name}: {_short(bad.get('message', ''))}")
        elif skipped is not None:  # an expected failure (a known gap of that release) is reported as one
            counts["skipped"] += 1
            kind = "expected failure, " if skipped.get("type") == "pytest.xfail" else ""
            skips.append(f"{name}: {kind}{_short(skipped.get('message', ''))}")
        else:
            counts["passed"] += 1
    return {**counts, "failures": failures, "skips": skips}


def test_version(version: str, root: str, install_timeout: float, test_timeout: float, keep: bool,
                 tests: list[str]) -> dict:
    """Creates the environment of ``version``, installs torch and the project, runs ``tests``; the result row."""
    venv = os.path.join(root, f"torch-{version}")
    log = os.path.join(root, f"torch-{version}.log")
    if os.path.exists(log):
        os.remove(log)
    row: dict = {"version": version, "tests": tests}
    if os.path.exists(venv):
        shutil.rmtree(venv)
    rc, _ = _run([sys.executable, "-m", "venv", venv], log, 300)
    python = os.path.join(venv, "bin", "python")
    constraints = os.path.join(root, "pins.txt")
    with open(constraints, "w", encoding="utf-8") as f:
        f.write("\n".join(_pins()) + "\n")
    # the README's command, torch's version changed; the others pinned as in this environment
    command = [python, "-m", "pip", "install", "-q", "--progress-bar", "off", "-c", constraints,
               f"torch=={version}", "-e", ".[dev]"]
    rc, seconds = _run(command, log, install_timeout) if rc == 0 else (rc, 0.0)
    row["install_s"] = round(seconds)
    if rc != 0:
        row["status"] = "not tested"
        row["why"] = ("install took more than %ds" % install_timeout) if rc == 124 else (
            f"install failed: {_short(_tail(log), 300)}")
        print(f"torch {version}: {row['why']}", flush=True)
        if not keep:
            shutil.rmtree(venv, ignore_errors=True)
        return row
    probe = subprocess.run([python, "-c", "import torch; print(torch.__version__)"], capture_output=True, text=True)
    row["installed"] = probe.stdout.strip()
    junit = os.path.join(root, f"torch-{version}.xml")
    if os.path.exists(junit):
        os.remove(junit)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    command = [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rfEs", f"--junitxml={junit}", *tests]
    rc, seconds = _run(command, log, test_timeout, env=env)
    row["tests_s"] = round(seconds)
    if os.path.exists(junit):
        row.update(read_junit(junit))
        row["status"] = "passed" if rc == 0 else "failed"
        if rc == 124:
            row["status"] = "timeout"
    else:
        row.update(passed=0, failed=0, skipped=0, failures=[], skips=[])
        row["status"] = "failed"
        row["why"] = f"pytest did not run (exit {rc}): {_short(_tail(log), 300)}"
    print(f"torch {version} ({row['installed']}): {row['passed']} passed, {row['failed']} failed, "
          f"{row['skipped']} skipped; install {row['install_s']}s, tests {row['tests_s']}s", flush=True)
    if not keep:
        shutil.rmtree(venv, ignore_errors=True)
    return row


def _why(row: dict) -> str:
    if "why" in row:
        return row["why"]
    parts = []
    if row.get("failures"):
        parts.append("failed: " + "; ".join(row["failures"]))
    if row.get("skips"):
        reasons: dict[str, list[str]] = {}
        for skip in row["skips"]:
            name, _, reason = skip.partition(": ")
            reasons.setdefault(re.sub(r"^Skipped: ", "", reason), []).append(name)
        parts.append("skipped: " + "; ".join(f"{', '.join(names)} ({reason})" for reason, names in reasons.items()))
    if row.get("status") == "timeout":
        parts.append("the tests ran past the time limit")
    return " — ".join(parts) or "all passed"


def _cells(row: dict) -> list[str]:
    tested = "passed" in row
    return [
        row["version"],
        str(row["passed"]) if tested else "-",
        str(row["failed"]) if tested else "-",
        str(row["skipped"]) if tested else "-",
        _why(row),
        f"{row.get('install_s', 0)} s / {row['tests_s']} s" if tested else f"{row.get('install_s', 0)} s / -",
    ]


HEADER = ["torch", "passed", "failed", "skipped", "why", "install / tests"]


def markdown(rows: list[dict]) -> str:
    """The markdown table of the results."""
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    lines += ["| " + " | ".join(c.replace("|", "\\|") for c in _cells(row)) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def rest(rows: list[dict], tests: list[str]) -> str:
    """The reST table ``_doc/torch_versions.inc`` holds."""
    names = ", ".join(f"``{os.path.basename(t)}``" for t in tests)
    out = [
        f".. list-table:: The smoke set ({names}) on each release, "
        "generated by ``benchmarks/torch_matrix.py``",
        "   :header-rows: 1",
        "   :class: wide-table",
        "",
    ]
    for i, cells in enumerate([HEADER, *(_cells(row) for row in rows)]):
        for j, cell in enumerate(cells):
            cell = re.sub(r"([^\w\s]|_)", r"\\\1", cell)  # every punctuation character literal
            out.append(f"   {'* -' if j == 0 else '  -'} {cell}")
    return "\n".join(out) + "\n"


def _key(version: str) -> tuple:
    return tuple(int(p) if p.isdigit() else 0 for p in re.split(r"[.+]", version)[:3])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("root", nargs="?", default="/tmp/torch_matrix", help="where the environments are made")
    parser.add_argument("--versions", nargs="+", default=VERSIONS, help="torch releases to test")
    parser.add_argument("--tests", nargs="+", default=SMOKE, help="test files, relative to the repository")
    parser.add_argument("--install-timeout", type=float, default=600, help="seconds allowed to install a version")
    parser.add_argument("--test-timeout", type=float, default=1800, help="seconds allowed to the tests")
    parser.add_argument("--keep", action="store_true", help="keep the environments")
    parser.add_argument("--doc", default=DOC_INC, help="the reST table to write ('' for none)")
    parser.add_argument("--render", action="store_true", help="only write the tables from results.json")
    args = parser.parse_args(argv)

    os.makedirs(args.root, exist_ok=True)
    results_path = os.path.join(args.root, "results.json")
    results: dict = {}
    if os.path.exists(results_path):
        with open(results_path, encoding="utf-8") as f:
            results = json.load(f)
    if not args.render:
        for version in args.versions:
            results[version] = test_version(version, args.root, args.install_timeout, args.test_timeout,
                                            args.keep, args.tests)
            with open(results_path, "w", encoding="utf-8") as f:
                json.dump(results, f, indent=1)
    for version, row in results.items():  # --render: the counts again from the junit files kept
        junit = os.path.join(args.root, f"torch-{version}.xml")
        if args.render and "passed" in row and os.path.exists(junit):
            row.update(read_junit(junit))
    rows = [results[v] for v in sorted(results, key=_key)]
    table = markdown(rows)
    with open(os.path.join(args.root, "torch_matrix.md"), "w", encoding="utf-8") as f:
        f.write(table)
    print(table)
    if args.doc:
        with open(args.doc, "w", encoding="utf-8") as f:
            f.write(rest(rows, args.tests))
    return 0 if all(row.get("status") == "passed" for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
