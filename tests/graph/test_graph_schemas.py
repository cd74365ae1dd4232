"""The graph skills are Graphiti's MCP tools: the same names and the same JSON schemas as
Graphiti's own server lists (spec/graphiti-mcp-tools.json, a copy of its tools/list), so a
client written for it works unchanged; and the tenant guard's rules for `group_id`."""

import json
import os
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from agentic_rag.config import Settings
from agentic_rag.engine import Engine
from agentic_rag.graph.namespaces import Namespace, NamespaceError, namespace, namespaces
from agentic_rag.graph.results import AddMemoryArguments, EpisodeResult
from agentic_rag.graph.skills import add_graph_skills
from agentic_rag.mcp.listing import compact_input, compact_output, tool_for
from agentic_rag.skills import SkillRegistry

SPEC = Path(__file__).resolve().parents[2] / "spec" / "graphiti-mcp-tools.json"
ALIASES = {"add_episode": "add_memory", "search_facts": "search_memory_facts"}


def graphiti_tools() -> dict[str, dict[str, Any]]:
    return {tool["name"]: tool for tool in json.loads(SPEC.read_text())}


def our_registry() -> SkillRegistry:
    registry = SkillRegistry()
    graph = Engine(Settings()).graph  # built, not started: no skill runs here
    assert graph is not None
    add_graph_skills(registry, graph)
    return registry


def our_tools() -> dict[str, Any]:
    return {skill.name: tool_for(skill) for skill in our_registry()}


def our_models() -> dict[str, Any]:
    """The full schemas of the skills' models, as `help` shows them."""
    return {
        s.name: SimpleNamespace(
            input_schema=s.input_model.model_json_schema(),
            output_schema=s.output_model.model_json_schema(mode="serialization"),
        )
        for s in our_registry()
    }


def test_every_graphiti_tool_and_the_two_aliases_are_skills() -> None:
    assert set(our_tools()) == set(graphiti_tools()) | set(ALIASES)
    assert len(graphiti_tools()) == 13


@pytest.mark.parametrize("name", sorted(graphiti_tools()))
def test_the_schemas_are_graphitis(name: str) -> None:
    """The models' schemas are Graphiti's; tools/list shows them made compact (listing.py),
    by the same rules as every tool's, which change no argument and no result."""
    theirs, ours = graphiti_tools()[name], our_models()[name]
    expected_output = theirs["outputSchema"]
    if name == "get_episodes":  # an episode narrowed from any object to EpisodeResult
        expected_output = narrowed_episodes(expected_output)
    assert ours.output_schema == expected_output
    listed = our_tools()[name]
    assert listed.output_schema == compact_output(expected_output)
    expected = theirs["inputSchema"]
    if name == "clear_graph":  # one optional argument more: confirm, which skips the question
        expected = json.loads(json.dumps(expected))
        expected["properties"]["confirm"] = {
            "default": False,
            "title": "Confirm",
            "type": "boolean",
        }
    if name == "add_memory":  # one optional argument more: use_client_model (MCP sampling)
        expected = json.loads(json.dumps(expected))
        expected["properties"]["use_client_model"] = {
            "anyOf": [{"type": "boolean"}, {"type": "null"}],
            "default": None,
            "description": AddMemoryArguments.model_fields["use_client_model"].description,
            "title": "Use Client Model",
        }
    assert ours.input_schema == expected
    assert listed.input_schema == compact_input(expected)


def narrowed_episodes(graphitis: dict[str, Any]) -> dict[str, Any]:
    """get_episodes' output schema with an episode as EpisodeResult: Graphiti's schema checks
    nothing of an episode but that it is an object."""
    schema = json.loads(json.dumps(graphitis))
    episodes = schema["$defs"]["EpisodeSearchResponse"]["properties"]["episodes"]
    assert episodes["items"] == {"additionalProperties": True, "type": "object"}
    episodes["items"] = {"$ref": "#/$defs/EpisodeResult"}
    schema["$defs"]["EpisodeResult"] = EpisodeResult.model_json_schema(mode="serialization")
    return schema


def test_an_episode_has_the_fields_graphitis_server_gives_it_and_every_field_is_required() -> None:
    schema = EpisodeResult.model_json_schema(mode="serialization")
    graphitis = ["uuid", "name", "content", "created_at", "source", "source_description"]
    assert list(schema["properties"])[:7] == [*graphitis, "group_id"]
    assert schema["required"] == list(schema["properties"])
    assert "additionalProperties" not in schema


@pytest.mark.parametrize(("alias", "name"), sorted(ALIASES.items()))
def test_an_alias_takes_and_gives_what_its_tool_does(alias: str, name: str) -> None:
    tools = our_tools()
    assert tools[alias].input_schema == tools[name].input_schema
    assert tools[alias].output_schema == tools[name].output_schema


def test_graphiti_telemetry_is_switched_off_by_the_graph_package() -> None:
    assert os.environ["GRAPHITI_TELEMETRY_ENABLED"] == "false"


# -- the tenant guard ---------------------------------------------------------------------


def test_no_group_id_or_the_tenant_names_the_tenants_main_graph() -> None:
    assert namespace("alpha", None) == Namespace("alpha")
    assert namespace("alpha", "alpha") == Namespace("alpha")
    assert namespaces("alpha", None) == [Namespace("alpha")]
    assert namespaces("alpha", []) == [Namespace("alpha")]


def test_sub_groups_are_written_tenant_colon_name() -> None:
    assert namespace("alpha", "alpha:notes") == Namespace("alpha", "notes")
    assert namespace("alpha", "alpha:notes").name == "alpha:notes"
    assert namespaces("alpha", "alpha:notes") == [Namespace("alpha", "notes")]
    assert namespaces("alpha", ["alpha", "alpha:a", "alpha"]) == [
        Namespace("alpha"),
        Namespace("alpha", "a"),
    ]


@pytest.mark.parametrize("group_id", ["beta", "beta:notes", "alphabet", "", "alpha:", "_"])
def test_any_other_group_is_refused(group_id: str) -> None:
    with pytest.raises(NamespaceError, match="group_id"):
        namespace("alpha", group_id)


def test_a_list_with_one_foreign_group_is_refused_whole() -> None:
    with pytest.raises(NamespaceError, match="outside your tenant"):
        namespaces("alpha", ["alpha", "beta"])


def test_a_sub_group_name_is_letters_digits_dash_underscore() -> None:
    with pytest.raises(NamespaceError, match="sub-group name"):
        namespace("alpha", "alpha:a b")
    with pytest.raises(NamespaceError, match="sub-group name"):
        namespace("alpha", "alpha:x:y")


def test_graphs_are_distinct_per_namespace_and_valid_graphiti_group_ids() -> None:
    # A tenant whose name looks like another's sub-group still gets a graph of its own.
    spaces = [
        Namespace("a"),
        Namespace("a", "b"),
        Namespace("a:b"),
        Namespace("a", "b:c"),
        Namespace("a:b", "c"),
        Namespace("ä/ü"),
    ]
    graphs = [ns.graph for ns in spaces]
    assert len(set(graphs)) == len(graphs)
    assert all(re.fullmatch(r"[A-Za-z0-9_-]+", graph) for graph in graphs)
