"""A policy played by a transformers model in this process (``--policy hf``).

:class:`HFPolicy` loads a checkpoint (or takes a model in memory), renders
each turn as the LLM policy does, and answers the turns pending across
concurrent episodes with one ``generate`` call on a worker thread
(:mod:`.batcher`). :class:`HFSettings` holds what ``--hf-*`` and ``[hf.NAME]``
set. Needs the ``hf`` extra (torch and transformers).
"""

from __future__ import annotations

from .local import HFModelError, weights_hash
from .policy import HFGenerateError, HFPolicy
from .settings import DTYPES, HFSettings

__all__ = ["DTYPES", "HFGenerateError", "HFModelError", "HFPolicy", "HFSettings", "weights_hash"]
