"""The options of the table (:data:`chaosops.runs.options.OPTIONS`) declared
on the command's argparse parsers: each flag, its help, its type (the text
read, then validated as the option's annotation), its default."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Iterable
from typing import Any

from chaosops.runs.options import (
    EVAL_GROUPS,
    MERGED,
    MODEL_GROUPS,
    OPTIONS,
    RUN_GROUPS,
    SERVED,
    Option,
    options_of,
)

from . import _values as v
from ._flags import flags, with_flags


def arg_type(option: Option) -> Callable[[str], Any] | None:
    """The argparse type of ``option``: the text read, then validated as its kind."""
    if option.switch:
        return None
    if option.kind is None:  # a text, or a path read as one
        return v.refusing(option.parse) if option.parse is not None else None
    if option.by_role:
        return v.by_role(option.kind)
    return v.flag_type(option.kind, option.parse)


def declare(option: Option, parser: Any, serving: bool = False) -> None:
    """Declare ``option`` on an argparse parser or group (``serving``: serve's words)."""
    text = with_flags(option.serve_help if serving and option.serve_help else option.help)
    if option.switch:
        parser.add_argument(*flags(option), dest=option.dest, action="store_true", help=text)
        return
    if option.positional:  # the suites
        parser.add_argument(option.dest, nargs="*", metavar=option.metavar, help=text)
        return
    default = option.initial
    if option.default_env is not None:
        default = os.environ.get(option.default_env) or default  # empty: unset
    parser.add_argument(
        *flags(option),
        dest=option.dest,
        action="append" if option.repeatable else "store",
        type=arg_type(option),
        default=[] if option.repeatable else default,
        metavar=option.metavar,
        help=text,
    )


def add_options(parser: argparse.ArgumentParser, *, run: bool) -> None:
    """Declare the table's options on ``chaosops run``'s parser, or (``run``
    false) on ``chaosops eval``'s, which chooses its players its own way."""
    own = options_of(RUN_GROUPS if run else EVAL_GROUPS)
    _declare_all(parser, own, serving=False)


def add_serve_options(parser: argparse.ArgumentParser) -> None:
    """Declare the options ``chaosops serve`` shares with run, and the models' groups."""
    own = (option for option in OPTIONS if option.dest in SERVED)
    _declare_all(parser, own, serving=True)


def _declare_all(parser: argparse.ArgumentParser, own: Iterable[Option], serving: bool) -> None:
    """``own`` on the parser, the model groups each under its heading, and every
    other option's attribute at its default; then :data:`MERGED`'s."""
    added = set()
    for option in own:
        declare(option, parser, serving)
        added.add(option.dest)
    for group in MODEL_GROUPS:
        models = parser.add_argument_group(with_flags(group))
        for option in options_of([group]):
            declare(option, models, serving)
            added.add(option.dest)
    rest = {o.dest: o.unset for o in OPTIONS if o.dest not in added}
    parser.set_defaults(**rest, **MERGED)
