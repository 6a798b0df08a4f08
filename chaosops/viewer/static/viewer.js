// Pages of a run being written follow it: poll the run's state every two
// seconds; when episodes finish or turns are played, reload the episode list
// (run page) or the page itself (an episode in flight).
(function () {
  const watched = document.querySelector("[data-state]");
  if (!watched) return;
  let last = null;
  async function poll() {
    try {
      const response = await fetch(watched.dataset.state, { cache: "no-store" });
      const state = await response.json();
      const now = [state.episodes, state.in_flight, state.turns_in_flight].join("/");
      if (last !== null && now !== last) {
        if (watched.dataset.reload) { location.reload(); return; }
        const url = new URL(location.href);
        url.searchParams.set("part", "episodes");
        const part = await fetch(url, { cache: "no-store" });
        document.getElementById("episodes").innerHTML = await part.text();
        watched.dataset.episodes = state.episodes;
      }
      last = now;
      if (state.finished && !watched.dataset.reload) return;
    } catch (error) {
      // the viewer stopped or restarts: try again at the next tick
    }
    setTimeout(poll, 2000);
  }
  poll();
})();
