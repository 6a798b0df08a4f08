"""What ``chaosops serve`` loads: OpenEnv without its web interface (gradio),
unless OpenEnv's own switch, ``ENABLE_WEB_INTERFACE``, asks for it."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests._needs import needs

try:
    import openenv
except ImportError:  # the serve extra
    openenv = None

# In a process of its own: what an import loads stays in its process.
_SCRIPT = """
import importlib.util, sys
from chaosops.cli._serve import _without_openenv_web_interface

with _without_openenv_web_interface():
    import uvicorn
    from chaosops.serve import build_app
import openenv.core.env_server as server

print("gradio loaded:", "gradio" in sys.modules)
print("web interface:", server.create_web_interface_app is not None)
# importable again once the server's imports are done (None in sys.modules: no spec)
assert importlib.util.find_spec("gradio") is not None
"""


@pytest.mark.parametrize(("switch", "loaded"), [(None, False), ("true", True)])
def test_the_server_s_imports_leave_out_the_web_interface_unless_asked(
    switch: str | None, loaded: bool
) -> None:
    needs(openenv, "openenv", "pip install -e '.[test]' (or the 'serve' extra)")
    env = {k: v for k, v in os.environ.items() if k != "ENABLE_WEB_INTERFACE"}
    if switch is not None:
        env["ENABLE_WEB_INTERFACE"] = switch
    proc = subprocess.run(
        [sys.executable, "-c", _SCRIPT], capture_output=True, text=True, env=env,
        timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert f"gradio loaded: {loaded}" in proc.stdout
    assert f"web interface: {loaded}" in proc.stdout
