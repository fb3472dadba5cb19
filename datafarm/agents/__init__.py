"""LLM roles (author, judge-writer, reviewer) and their providers. Not implemented yet (issue 5)."""
