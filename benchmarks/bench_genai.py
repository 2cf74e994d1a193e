"""Tokens per second of onnxruntime-genai packages: ours (``export_genai``) against the ones onnxruntime-genai's model
builder writes from the same folder, in the same run.

    python benchmarks/bench_genai.py                          # medium size (hidden 512, 6 layers), CPU, fp32
    python benchmarks/bench_genai.py --size 0.5b --precision int4 fp32
    python benchmarks/bench_genai.py --families llama qwen2 --json results.json
    python benchmarks/bench_genai.py --device cuda            # on a GPU, with and without CUDA graphs
    python benchmarks/bench_genai.py --threads 2              # both packages on 2 threads: the graphs alone
    python benchmarks/bench_genai.py --busy 2                 # beside 2 processes spinning a core each

For each family: a random-weight checkpoint (:func:`write_random_causal_lm`), our package and the builder's, then
``--repeats`` rounds alternating the two, each round timing the prompt (``--prompt`` tokens, one
``append_tokens``) and the decoding (``--new`` tokens, one ``generate_next_token`` each); the median of the rounds
is reported for each package, and our speed over the builder's as the median of the rounds' ratios. A family the
builder refuses is reported as such, ours alone.

Each package runs as written (``threads`` "as written"): ours asks onnxruntime for one thread per physical core, the
builder's leaves onnxruntime-genai's default, half the hardware threads, which is half the cores on a machine
without SMT. ``--threads N`` writes the same count into both packages' ``genai_config.json``: what remains is the
graphs' difference.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

#: the sizes: hidden, layers, heads, key-value heads, intermediate, vocabulary
SIZES = {
    "tiny": dict(hidden=64, layers=2, heads=4, kv_heads=2, intermediate=128, vocab=1000),
    "medium": dict(hidden=512, layers=6, heads=8, kv_heads=4, intermediate=1536, vocab=32000),
    # about 0.5 B parameters, the shape of Qwen2.5-0.5B with Llama's vocabulary
    "0.5b": dict(hidden=896, layers=24, heads=14, kv_heads=2, intermediate=4864, vocab=32000),
}
FAMILIES = ("llama", "mistral", "qwen2", "qwen3", "phi3", "gemma")
BUILDER_PRECISION = {"fp32": "fp32", "fp16": "fp16", "bf16": "bf16", "int4": "int4"}


def make_folder(family: str, size: str, root: str) -> str:
    from experimental.torch_interpreter.genai.tiny import write_random_causal_lm

    folder = os.path.join(root, f"{family}_{size}")
    if not os.path.exists(folder):
        write_random_causal_lm(family, folder, **SIZES[size])
    return folder


def ours(src: str, out: str, precision: str, provider: str) -> tuple[str, float]:
    from experimental.torch_interpreter import export_genai

    begin = time.perf_counter()
    export_genai(src, out, precision=precision, provider=provider, overwrite=True)
    return out, time.perf_counter() - begin


def builder(src: str, out: str, precision: str, provider: str, cache: str) -> tuple[str | None, float, str]:
    begin = time.perf_counter()
    run = subprocess.run(
        [sys.executable, "-m", "onnxruntime_genai.models.builder", "-i", src, "-o", out, "-p",
         BUILDER_PRECISION[precision], "-e", provider, "-c", cache],
        capture_output=True, text=True)
    seconds = time.perf_counter() - begin
    if run.returncode != 0 or not os.path.exists(os.path.join(out, "genai_config.json")):
        lines = [line for line in (run.stderr or run.stdout).splitlines() if line.strip()]
        return None, seconds, (lines[-1] if lines else f"exit {run.returncode}")[:160]
    return out, seconds, ""


def edit_session_options(folder: str, edit) -> None:
    """Calls ``edit`` on the decoder's ``session_options`` of the package ``folder`` and writes them back."""
    path = os.path.join(folder, "genai_config.json")
    with open(path, encoding="utf-8") as f:
        config = json.load(f)
    edit(config["model"]["decoder"]["session_options"])
    with open(path, "w", encoding="utf-8") as f:
        json.dump(config, f, indent=4)


def set_cuda_graphs(folder: str, enabled: bool) -> None:
    def edit(options):
        for option in options.setdefault("provider_options", []):
            if "cuda" in option:
                option["cuda"]["enable_cuda_graph"] = "1" if enabled else "0"

    edit_session_options(folder, edit)


def set_threads(folder: str, threads: int) -> None:
    edit_session_options(folder, lambda options: options.update(intra_op_num_threads=threads))


def time_generation(folder: str, prompt: int, new: int, vocab: int) -> tuple[float, float]:
    """(prompt tokens/s, decoding tokens/s) of one generation: ``prompt`` random tokens, ``new`` generated."""
    import onnxruntime_genai as og

    model = og.Model(folder)
    params = og.GeneratorParams(model)
    params.set_search_options(max_length=prompt + new, min_length=prompt + new, do_sample=False)
    generator = og.Generator(model, params)
    tokens = np.random.default_rng(0).integers(4, min(vocab, 500), (1, prompt)).astype(np.int32)
    begin = time.perf_counter()
    generator.append_tokens(tokens)
    prompt_seconds = time.perf_counter() - begin
    count = 0
    begin = time.perf_counter()
    while not generator.is_done():
        generator.generate_next_token()
        count += 1
    decode_seconds = time.perf_counter() - begin
    return prompt / prompt_seconds, count / decode_seconds


@contextlib.contextmanager
def busy_processes(count: int):
    """``count`` processes each spinning a core for the duration of the block (a machine whose cores are shared)."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]
    try:
        if procs:
            time.sleep(1)
        yield
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


def bench_family(family: str, args: argparse.Namespace, root: str) -> list[dict]:
    src = make_folder(family, args.size, root)
    vocab = SIZES[args.size]["vocab"]
    rows = []
    for precision in args.precision:
        packages = {}
        packages["ours"], export_seconds = ours(src, os.path.join(root, f"ours_{family}_{precision}"), precision,
                                                args.device)
        path, builder_seconds, refused = builder(src, os.path.join(root, f"builder_{family}_{precision}"),
                                                 precision, args.device, os.path.join(root, "cache"))
        if path is not None:
            packages["builder"] = path
        if args.threads is not None:
            for folder in packages.values():
                set_threads(folder, args.threads)
        graphs = (False, True) if args.device == "cuda" else (None,)
        for cuda_graph in graphs:
            if cuda_graph is not None:
                for folder in packages.values():
                    set_cuda_graphs(folder, cuda_graph)
            times = {name: [] for name in packages}
            with busy_processes(args.busy):
                for _ in range(args.repeats):
                    for name, folder in packages.items():
                        times[name].append(time_generation(folder, args.prompt, args.new, vocab))
            row = {"family": family, "size": args.size, "precision": precision, "device": args.device,
                   "cuda_graph": cuda_graph, "threads": "as written" if args.threads is None else args.threads,
                   "busy_processes": args.busy,
                   "export_s": round(export_seconds, 1), "builder_s": round(builder_seconds, 1),
                   "builder": refused or "ok"}
            for name, values in times.items():
                row[f"{name}_prompt_tps"] = round(statistics.median(v[0] for v in values), 1)
                row[f"{name}_decode_tps"] = round(statistics.median(v[1] for v in values), 1)
            if "builder" in times:
                # the median of the rounds' own ratios: each round times both packages back to back, so a slower
                # moment of the machine (2 shared cores here) slows both sides of one ratio
                for phase, index in (("decode", 1), ("prompt", 0)):
                    ratios = [o[index] / b[index] for o, b in zip(times["ours"], times["builder"])]
                    row[f"{phase}_ratio"] = round(statistics.median(ratios), 2)
            rows.append(row)
            print(json.dumps(row), flush=True)
        for folder in packages.values():
            shutil.rmtree(folder, ignore_errors=True)
    return rows


def markdown(rows: list[dict]) -> str:
    head = ("| family | precision | ours decode tok/s | builder decode tok/s | decode ratio | ours prompt tok/s | "
            "builder prompt tok/s | prompt ratio |\n|---|---|---|---|---|---|---|---|\n")
    lines = []
    for r in rows:
        builder = (r.get("builder_decode_tps", "refused"), r.get("decode_ratio", "-"),
                   r.get("builder_prompt_tps", "refused"), r.get("prompt_ratio", "-"))
        lines.append(f"| {r['family']} | {r['precision']} | {r['ours_decode_tps']} | {builder[0]} | {builder[1]} | "
                     f"{r['ours_prompt_tps']} | {builder[2]} | {builder[3]} |")
    return head + "\n".join(lines)


def main(argv=None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--families", nargs="+", default=list(FAMILIES))
    parser.add_argument("--size", choices=sorted(SIZES), default="medium")
    parser.add_argument("--precision", nargs="+", default=["fp32"], choices=sorted(BUILDER_PRECISION))
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--prompt", type=int, default=128, help="prompt tokens (default 128)")
    parser.add_argument("--new", type=int, default=128, help="generated tokens (default 128)")
    parser.add_argument("--repeats", type=int, default=3, help="rounds, the median reported (default 3)")
    parser.add_argument("--threads", type=int,
                        help="the threads of each operator, written into both packages (default: as written)")
    parser.add_argument("--busy", type=int, default=0,
                        help="processes spinning a core each while the packages are timed (default 0: an idle machine)")
    parser.add_argument("--json", help="also write the rows there")
    parser.add_argument("--keep", help="write the checkpoints and packages there and keep them")
    args = parser.parse_args(argv)
    root = args.keep or tempfile.mkdtemp(prefix="bench_genai_")
    os.makedirs(root, exist_ok=True)
    try:
        rows = [row for family in args.families for row in bench_family(family, args, root)]
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    print(markdown(rows))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(rows, f, indent=1)
    return rows


if __name__ == "__main__":
    main()
