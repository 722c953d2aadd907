"""Stand-in of Dream's remote code (tests only)."""
