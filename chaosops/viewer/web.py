"""``chaosops view``: a local web viewer of run folders (starlette, Jinja2
templates, inline SVG charts; every script and style ships in the package).

Each run is a :class:`RunIndex`, refreshed when a page asks; the pages filter,
sort and page its rows, and read an episode's lines from the files when it is
shown, so memory follows the number of episodes by a few hundred bytes each.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from chaosops.pairing import no_shared_note, paired

from .charts import bar_chart
from .index import FILTERED, SORTS, EpisodeRow, Filters, RunIndex
from .transcript import action_text

PAGE = 100
"""Episodes a run page lists at a time."""
HERE = Path(__file__).parent


class Viewer:
    """The runs on show, by their number in the order given."""

    def __init__(self, indexes: Sequence[RunIndex]) -> None:
        self.runs = list(indexes)
        self.templates = Jinja2Templates(directory=HERE / "templates")
        self.templates.env.globals["action_text"] = action_text

    def run(self, number: int) -> RunIndex:
        if not 0 <= number < len(self.runs):
            raise HTTPException(404, f"no run {number}: {len(self.runs)} run(s) on show")
        index = self.runs[number]
        index.refresh()
        return index

    def page(self, request: Request, name: str, **context: Any) -> Response:
        return self.templates.TemplateResponse(request, name, {"runs": self.runs, **context})

    # -- pages

    async def home(self, request: Request) -> Response:
        for index in self.runs:
            index.refresh()
        return self.page(request, "home.html", cards=[_card(i, _choices(i)) for i in self.runs])

    async def run_page(self, request: Request) -> Response:
        number = int(request.path_params["run"])
        index = self.run(number)
        filters = Filters(**{name: request.query_params.get(name, "") for name in FILTERED})
        sort = request.query_params.get("sort", "finished")
        key, reverse = SORTS.get(sort, SORTS["finished"])
        kept = sorted((r for r in index.rows if filters.keeps(r)), key=key, reverse=reverse)
        start = _number(request, "start", 0)
        choices = _choices(index)
        context = {
            "number": number, "index": index, "filters": filters, "sort": sort,
            "rows": kept[start:start + PAGE], "total": len(kept), "start": start, "page": PAGE,
            "choices": choices, "card": _card(index, choices),
            "previous": _moved(request, start - PAGE) if start > 0 else None,
            "next": _moved(request, start + PAGE) if start + PAGE < len(kept) else None,
        }  # fmt: skip
        if request.query_params.get("part") == "episodes":
            return self.page(request, "episodes.html", **context)
        return self.page(request, "run.html", charts=_charts(index), **context)

    async def episode_page(self, request: Request) -> Response:
        number = int(request.path_params["run"])
        index = self.run(number)
        episode = request.path_params["episode"]
        row = index.row(episode)
        if row is None:
            flying = index.in_flight.get(episode)
            if flying is None:
                raise HTTPException(404, f"no episode {episode} in run {index.name}")
            return self.page(request, "in_flight.html", number=number, index=index, episode=flying)
        record = index.record(row)
        lines = {int(s.get("step", 0)): s for s in index.trajectory(row.episode_id)}
        steps = [
            {"number": n, **step, "line": lines.get(n, {})}
            for n, step in enumerate(record.get("steps") or (), start=1)
        ]
        others = [
            (other_number, other.name, other.rows[i].episode_id)
            for other_number, other in enumerate(self.runs)
            if other_number != number
            for i in other.by_scenario.get(row.scenario, [])[:1]
        ]
        return self.page(request, "episode.html", number=number, index=index, row=row,
                         record=record, steps=steps, others=others)  # fmt: skip

    async def compare_page(self, request: Request) -> Response:
        a, b = _number(request, "a", 0), _number(request, "b", 1)
        left, right = self.run(a), self.run(b)
        pairs = [
            (left.rows[i], right.rows[j[0]])
            for scenario, i_list in left.by_scenario.items()
            if (j := right.by_scenario.get(scenario))
            for i in i_list[:1]
        ]
        pairs.sort(key=lambda p: abs(p[0].reward - p[1].reward), reverse=True)
        difference = paired(
            right.name, left.name,
            {r.scenario: (r.reward, r.resolved) for _, r in pairs},
            {x.scenario: (x.reward, x.resolved) for x, _ in pairs},
        )  # fmt: skip
        return self.page(request, "compare.html", a=a, b=b, left=left, right=right,
                         sides=[_side(left, [p[0] for p in pairs]),
                                _side(right, [p[1] for p in pairs])],
                         pairs=pairs[:PAGE], shared=len(pairs), difference=difference,
                         no_shared=no_shared_note(left.name, right.name))  # fmt: skip

    async def state(self, request: Request) -> Response:
        """What changed: a page polls it and reloads its part when it moves."""
        index = self.run(int(request.path_params["run"]))
        return JSONResponse(
            {
                "episodes": len(index.rows),
                "in_flight": len(index.in_flight),
                "turns_in_flight": sum(len(e.turns) for e in index.in_flight.values()),
                "finished": index.finished(),
                "status": index.status(),
            }
        )


def _number(request: Request, name: str, default: int) -> int:
    text = request.query_params.get(name) or str(default)
    if not text.isdigit():
        raise HTTPException(400, f"{name}={text!r}: expected a whole number from 0")
    return int(text)


def _moved(request: Request, start: int) -> str:
    """This page's URL with another ``start`` (and not the part it polls)."""
    params = {k: v for k, v in request.query_params.items() if k not in ("start", "part")}
    return "?" + urlencode({**params, "start": max(0, start)})


def _card(index: RunIndex, choices: dict[str, list[str]]) -> dict[str, Any]:
    """A run's counts (from its tallies by tier) and what played (``choices``)."""
    tallies = index.tiers.values()
    episodes = sum(t.episodes for t in tallies)
    return {
        "name": index.name,
        "folder": str(index.folder),
        "episodes": episodes,
        "planned": index.planned(),
        "in_flight": len(index.in_flight),
        "success": sum(t.resolved for t in tallies) / episodes if episodes else None,
        "mean_reward": sum(t.reward for t in tallies) / episodes if episodes else None,
        "policies": choices["policy"],
        "models": choices["model"],
        "finished": index.finished(),
        "status": index.status(),
        "resume": index.resume_command(),
    }


def _choices(index: RunIndex) -> dict[str, list[str]]:
    return {
        "policy": sorted({r.policy for r in index.rows}),
        "model": sorted({m for r in index.rows for m in r.models.split("+") if m}),
        "failure_type": sorted({r.failure_type for r in index.rows}),
        "tier": sorted({r.difficulty for r in index.rows}),
    }


def _charts(index: RunIndex) -> dict[str, str]:
    tiers = [(f"{policy} {tier}", t.mean_reward) for (policy, tier), t in index.tiers.items()]
    latency = [
        (f"{f.role} p{q}", value)
        for f in index.roles.figures()
        for q, value in ((50, f.latency_p50_ms), (99, f.latency_p99_ms))
        if value is not None
    ]
    return {
        "reward": bar_chart(tiers, title="mean reward by tier"),
        "latency": bar_chart(latency, unit=" ms", title="turn latency per role"),
    }


def _side(index: RunIndex, rows: Sequence[EpisodeRow]) -> dict[str, Any]:
    """One run's figures over the scenarios both runs played."""
    solved = [r for r in rows if r.resolved]
    return {
        "name": index.name,
        "success": len(solved) / len(rows) if rows else None,
        "mean_reward": sum(r.reward for r in rows) / len(rows) if rows else None,
        "mttr": sum(r.mttr or r.steps for r in solved) / len(solved) if solved else None,
    }


def build_app(indexes: Sequence[RunIndex]) -> Starlette:
    viewer = Viewer(indexes)
    return Starlette(
        routes=[
            Route("/", viewer.home),
            Route("/run/{run:int}", viewer.run_page),
            Route("/run/{run:int}/state", viewer.state),
            Route("/run/{run:int}/episode/{episode}", viewer.episode_page),
            Route("/compare", viewer.compare_page),
            Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
        ]
    )
