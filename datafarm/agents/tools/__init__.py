"""The roles' tools. Each role gets only its own list (author, judge-writer, reviewer), and every path
a tool touches goes through the role's path guard (datafarm.agents.access)."""

from datafarm.agents.tools.author import AUTHOR_ARTIFACTS, RolloutFunction, author_tools
from datafarm.agents.tools.base import Tool, ToolArgs, Toolbox, ToolContext, ToolError, ToolOutput, WriteOutcome
from datafarm.agents.tools.judge_writer import JUDGE_DRAFT, judge_writer_tools
from datafarm.agents.tools.reviewer import REVIEW_FILE, ReviewMaterial, reviewer_tools, verdict_schema

__all__ = [
    "AUTHOR_ARTIFACTS",
    "JUDGE_DRAFT",
    "REVIEW_FILE",
    "ReviewMaterial",
    "RolloutFunction",
    "Tool",
    "ToolArgs",
    "ToolContext",
    "ToolError",
    "ToolOutput",
    "Toolbox",
    "WriteOutcome",
    "author_tools",
    "judge_writer_tools",
    "reviewer_tools",
    "verdict_schema",
]
