"""The operator console's static files (index.html, scripts, styles), served by `arena.api.console`."""
