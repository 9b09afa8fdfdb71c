"""Who may do what: ownership checks, share links and API tokens."""
