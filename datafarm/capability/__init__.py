"""The versioned capability layer K: skills, role prompts, render templates, price table."""
