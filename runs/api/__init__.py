"""The DRF API: everything the pages can do."""
