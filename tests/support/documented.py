"""Answers held against the OpenAPI document (`arena.api.openapi.DOCUMENT`): what a route
answers must be what it documents, so that a client generated from the document reads it."""

from __future__ import annotations

from typing import Any

from jsonschema import Draft202012Validator

from arena.api.openapi import DOCUMENT, JSON


def assert_documented(path: str, method: str, body: Any, status: int = 200) -> None:
    """Raise when ``body`` does not match the schema ``path`` (a template of the document)
    documents for ``method`` and ``status``."""
    answer = DOCUMENT["paths"][path][method.lower()]["responses"][str(status)]
    schema = {**answer["content"][JSON]["schema"], "components": DOCUMENT["components"]}
    Draft202012Validator(schema).validate(body)
