"""The flags of the run options: each option's field as a flag (``seed_offset``
is ``--seed-offset``), the few old names kept as aliases, and the options'
help texts with the options they name (``{resume}``) said as flags."""

from __future__ import annotations

import re
from types import MappingProxyType

from chaosops.runs.options import OPTIONS, Option, own_settings

_FLAGS = MappingProxyType(
    {
        "llm_base_url": ("--llm-base-url", "--base-url"),
        "llm_model": ("--llm-model", "--model"),
        # the stop rule counts any model's failures; its first name said LLM
        "llm_max_failures": ("--model-max-failures", "--llm-max-failures"),
    }
)
"""The options whose flags are not their field's alone: the first is the flag."""
BY_FIELD = MappingProxyType({option.dest: option for option in OPTIONS})
"""The options by their field."""


def flag_named(field: str) -> str:
    """The flag of a field (an option's, or a command's own: ``policies``)."""
    given = _FLAGS.get(field)
    return given[0] if given else "--" + field.replace("_", "-")


def flags(option: Option) -> tuple[str, ...]:
    """The option's flags, its name first (none: the positional suites)."""
    if option.positional:
        return ()
    return _FLAGS.get(option.dest) or (flag_named(option.dest),)


def flag(option: Option) -> str:
    """The name messages give the option (the positional's metavar)."""
    return f"{option.metavar} (the suites)" if option.positional else flag_named(option.dest)


def with_flags(text: str) -> str:
    """A help text with each option it names in braces (``{resume}``) as its flag."""
    return re.sub(r"\{([a-z_]+)\}", lambda m: flag_named(m.group(1)), text)


def flags_of(kind: str) -> tuple[tuple[str, str, tuple[str, ...]], ...]:
    """The settings of a kind's own model: (settings' field, option's field, flags)."""
    return tuple((field, dest, flags(BY_FIELD[dest])) for field, dest in own_settings(kind))


REPEATABLE = frozenset(f for option in OPTIONS if option.repeatable for f in flags(option))
"""The options that may be given more than once (each adds a value)."""
