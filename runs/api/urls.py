"""API routes."""

urlpatterns: list = []
