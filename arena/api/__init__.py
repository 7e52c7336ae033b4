"""The edge: starlette app with the WebSocket ingest, HTTP queries, admin routes and metrics."""
