"""The Agent Card, built from the settings and the skills registry (docs/a2a-notes.md §7,
§10)."""

from importlib.metadata import version
from typing import Any

import orjson

from agentic_rag.a2a.invocation import INPUT_MODES, input_modes
from agentic_rag.a2a.v1 import card as v1_card
from agentic_rag.config import Settings
from agentic_rag.schema.a2a import AgentCapabilities, AgentCard, AgentSkill, SecurityScheme
from agentic_rag.skills import SkillRegistry
from agentic_rag.tasks.calls import OUTPUT_MODES


def agent_card(
    settings: Settings,
    registry: SkillRegistry,
    *,
    security_schemes: dict[str, dict[str, Any]] | None = None,
    extended: bool = False,
) -> AgentCard:
    """The card; `security_schemes` are the enabled ones, any of which is accepted.

    The public card lists public skills; the extended card, for authenticated callers, all.
    With no schemes (open local mode) every caller is authenticated, so all skills show.
    """
    schemes = security_schemes or {}
    return AgentCard(
        name=settings.agent_name,
        description=settings.agent_description,
        url=settings.base_url() + "/",
        version=version("agentic-rag"),
        capabilities=AgentCapabilities(
            streaming=True, push_notifications=True, state_transition_history=False
        ),
        default_input_modes=list(INPUT_MODES),
        default_output_modes=list(OUTPUT_MODES),
        skills=[
            AgentSkill(
                id=skill.name,
                name=skill.name,
                description=skill.description,
                tags=list(skill.tags),
                examples=list(skill.examples) or None,
                input_modes=input_modes(skill),
                output_modes=list(OUTPUT_MODES),
            )
            for skill in registry
            if skill.public or extended or not schemes
        ],
        security_schemes={n: SecurityScheme.model_validate(v) for n, v in schemes.items()} or None,
        security=[{name: []} for name in schemes] or None,
        supports_authenticated_extended_card=bool(schemes),
    )


def card_documents(card: AgentCard) -> tuple[bytes, bytes]:
    """The card as served at agent.json (labelled 0.2.1) and agent-card.json (labelled 0.3.0,
    with A2A 1.0's `supportedInterfaces` added: a2a/v1/card.py).

    The current a2a-sdk client reads agent-card.json and picks its transport from
    `supportedInterfaces` (1.0 first); it cannot talk to a card labelled 0.2.x
    (docs/a2a-notes.md §10, §13).
    """
    base: dict[str, Any] = card.model_dump(mode="json", by_alias=True, exclude_none=True)
    v021 = {**base, "protocolVersion": "0.2.1"}
    v030 = v1_card.shared_document(
        {**base, "protocolVersion": "0.3.0", "preferredTransport": "JSONRPC"}
    )
    return orjson.dumps(v021), orjson.dumps(v030)
