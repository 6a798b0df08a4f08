"""Looking at runs: an index over a run folder (``index``), an episode's
world frame by frame (``frames``) and as plain text (``transcript``), the
live terminal dashboard of ``chaosops watch`` (``dashboard``) and the web
viewer of ``chaosops view`` (``web``)."""
