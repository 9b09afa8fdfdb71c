"""Forms of the pages, one module per concern. They parse and check input; writes go
through runs.services."""
