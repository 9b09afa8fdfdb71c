"""Page views. Each module serves one area; `content/` builds what the signed-in
pages and the read-only share pages both show."""
