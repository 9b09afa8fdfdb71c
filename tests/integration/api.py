"""The lab's API as the integration tests drive it (the test process plays the web tier)."""


def create(api, path: str, payload: dict) -> dict:
    response = api.post(f"/api/{path}/", payload, format="json")
    assert response.status_code == 201, response.content
    return response.json()


def start(api, experiment_id: int) -> list[int]:
    response = api.post(f"/api/experiments/{experiment_id}/start/")
    assert response.status_code == 201, response.content
    return [run["id"] for run in response.json()]
