"""Skills: defined once, served over A2A, MCP and the CLI."""

from agentic_rag.skills.registry import (
    AnswerOnly,
    ClientRoot,
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
    "AnswerOnly",
    "ClientRoot",
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
