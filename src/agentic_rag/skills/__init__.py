"""Skills: defined once, served over A2A, MCP and the CLI."""

from agentic_rag.skills.registry import (
    InputRequired,
    Skill,
    SkillContext,
    SkillError,
    SkillRegistry,
)

__all__ = ["InputRequired", "Skill", "SkillContext", "SkillError", "SkillRegistry"]
