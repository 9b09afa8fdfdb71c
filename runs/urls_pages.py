"""Page URLs; the pages engineer fills this in."""

urlpatterns: list = []
