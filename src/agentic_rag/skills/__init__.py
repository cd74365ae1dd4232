"""Skills: defined once, served over A2A, MCP and the CLI."""

from agentic_rag.skills.registry import (
    DataResult,
    FileResult,
    InputRequired,
    ResultPart,
    Skill,
    SkillContext,
    SkillError,
    SkillRegistry,
    SkillRejected,
)

__all__ = [
    "DataResult",
    "FileResult",
    "InputRequired",
    "ResultPart",
    "Skill",
    "SkillContext",
    "SkillError",
    "SkillRegistry",
    "SkillRejected",
]
