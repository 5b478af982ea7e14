"""Programs the fleet part runs as processes of their own, by path (not imported)."""
