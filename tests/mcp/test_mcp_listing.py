"""The compact schemas of tools/list (mcp/listing.py): the rules drop only what changes no
validation, and the output's deeper levels are cut to objects that still validate."""

import json
from typing import Any, Literal

import jsonschema
import pytest
from pydantic import BaseModel, Field

from agentic_rag.mcp.listing import OUTPUT_BUDGET, input_schema, output_schema


class Leaf(BaseModel):
    label: str = Field(description="A leaf's label")
    weight: float | None = None


class Branch(BaseModel):
    leaves: list[Leaf]
    kind: Literal["oak", "elm"] | None = None
    notes: dict[str, Any] = Field(default_factory=dict)


class Tree(BaseModel):
    """A tree, whose description the tool's own says."""

    name: str = Field(description="What it is called")
    when: str | None = Field(None, description="When it was planted")
    height: int | None = Field(None, ge=0)
    trunk: Branch
    branches: list[Branch] = Field(default_factory=list)


GOOD = [
    {"name": "a", "trunk": {"leaves": []}},
    {
        "name": "b",
        "when": None,
        "height": 3,
        "trunk": {"leaves": [{"label": "x", "weight": None}], "kind": "oak", "notes": {"k": 1}},
        "branches": [{"leaves": [{"label": "y", "weight": 0.5}], "kind": None}],
    },
]
BAD = [
    {"trunk": {"leaves": []}},  # no name
    {"name": "a", "height": -1, "trunk": {"leaves": []}},
    {"name": "a", "height": "tall", "trunk": {"leaves": []}},
    {"name": "a", "trunk": {"leaves": [{"weight": 1}]}},
    {"name": "a", "trunk": {"leaves": [], "kind": "pine"}},
]


def keywords(schema: Any) -> set[str]:
    """Every keyword used in `schema` (property names aside)."""
    if isinstance(schema, list):
        return set().union(*map(keywords, schema)) if schema else set()
    if not isinstance(schema, dict):
        return set()
    found = set(schema)
    for key, value in schema.items():
        if key in ("properties", "$defs"):
            found |= set().union(*map(keywords, value.values())) if value else set()
        else:
            found |= keywords(value)
    return found


@pytest.mark.parametrize("instance", GOOD + BAD)
def test_the_compact_input_schema_judges_as_the_full_one(instance: dict[str, Any]) -> None:
    full, listed = Tree.model_json_schema(), input_schema(Tree)
    assert _valid(full, instance) == _valid(listed, instance)
    assert _valid(full, instance) is (instance in GOOD)


def test_the_input_keeps_what_a_model_needs_and_drops_the_rest() -> None:
    listed = input_schema(Tree)
    assert "title" not in keywords(listed) and "description" not in listed
    assert listed["properties"]["name"] == {"description": "What it is called", "type": "string"}
    assert listed["properties"]["when"] == {
        "description": "When it was planted",
        "type": ["string", "null"],
    }
    assert listed["properties"]["height"] == {"minimum": 0, "type": ["integer", "null"]}
    assert len(json.dumps(listed)) < len(json.dumps(Tree.model_json_schema()))


@pytest.mark.parametrize("instance", GOOD)
def test_the_cut_output_schema_still_validates_every_result(instance: dict[str, Any]) -> None:
    listed = output_schema(Tree)
    # Too long whole, so cut: the trunk's leaves are no longer described, only an object.
    assert len(json.dumps(Tree.model_json_schema(mode="serialization"))) > OUTPUT_BUDGET
    assert "$defs" not in listed and listed["properties"]["trunk"] == {"type": "object"}
    assert _valid(listed, Tree.model_validate(instance).model_dump(mode="json"))
    assert keywords(listed).isdisjoint({"title", "description", "default"})


def test_a_small_output_schema_is_listed_whole() -> None:
    listed = output_schema(Leaf)
    assert listed == {
        "properties": {"label": {"type": "string"}, "weight": {"type": ["number", "null"]}},
        "required": ["label"],
        "type": "object",
    }


def _valid(schema: dict[str, Any], instance: Any) -> bool:
    return jsonschema.Draft202012Validator(schema).is_valid(instance)
