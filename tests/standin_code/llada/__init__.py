"""Stand-in of LLaDA's remote code (tests only)."""
