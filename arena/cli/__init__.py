"""`arena serve | rebuild | verify | migrate | token`."""
