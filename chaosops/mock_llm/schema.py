"""Answers kept within the schema a request carries, as a server that enforces
schemas (vLLM, llama.cpp) keeps a model's tokens within it."""

from __future__ import annotations

from typing import Any

from jsonschema import Draft202012Validator

__all__ = ["request_schema", "within"]


def request_schema(body: dict[str, Any]) -> dict[str, Any] | None:
    """The schema an answer to ``body`` must follow: ``response_format``'s
    (``json_schema`` or ``json_object`` with a schema) or the first tool's
    parameters; None when it carries none."""
    fmt = body.get("response_format")
    if isinstance(fmt, dict):
        if fmt.get("type") == "json_schema":
            return (fmt.get("json_schema") or {}).get("schema")
        if fmt.get("type") == "json_object":
            return fmt.get("schema")
    tools = body.get("tools")
    if isinstance(tools, list) and tools and isinstance(tools[0], dict):
        return (tools[0].get("function") or {}).get("parameters")
    return None


def within(schema: dict[str, Any], action: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """``action`` when ``schema`` admits it (without its null target and empty
    args), else the schema's first instance; and whether ``action`` was admitted."""
    answer = {k: v for k, v in action.items() if v is not None and v != {}}
    if Draft202012Validator(schema).is_valid(answer):
        return answer, True
    return _instance(schema), False


def _instance(schema: dict[str, Any]) -> Any:
    """The first instance of ``schema`` (the subset of JSON Schema the policy sends)."""
    if "anyOf" in schema:
        return _instance(schema["anyOf"][0])
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema.get("type")
    if kind == "object":
        properties = schema.get("properties", {})
        return {name: _instance(properties[name]) for name in schema.get("required", [])}
    if kind == "integer":
        return schema.get("minimum", 0)
    if kind == "string":
        return "x" * schema.get("minLength", 0)
    return None
