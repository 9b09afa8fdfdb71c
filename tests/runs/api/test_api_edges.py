"""Bad input at the API's edges answers 400 (or 413/415) JSON naming what to fix, never a 500
or an HTML page: filter values out of range, deep or malformed JSON, bodies over the limit,
content types the API does not read."""

import pytest
from django.conf import settings

from tests.runs.factories import ExperimentFactory

pytestmark = pytest.mark.django_db


def assert_json_error(response, status: int) -> dict:
    assert response.status_code == status, response.content[:500]
    assert response["Content-Type"].startswith("application/json"), response["Content-Type"]
    body = response.json()
    assert body["error"]["code"] and body["error"]["message"], body
    return body


@pytest.mark.parametrize(
    "value", ["100000000000000000000", "-1", "-100000000000000000000", "abc", "1e3", "1.5"]
)
@pytest.mark.parametrize(
    "path, name",
    [
        ("/api/runs/", "workload"),
        ("/api/runs/", "experiment"),
        ("/api/runs/", "config_profile"),
        ("/api/share-links/", "run"),
    ],
)
def test_a_filter_id_out_of_range_or_not_a_number_answers_400_naming_it(
    api_client, path, name, value
):
    body = assert_json_error(api_client.get(path, {name: value}), 400)
    assert name in body["error"]["fields"], body


def test_a_date_filter_reads_any_offset_and_refuses_one_leaving_the_calendar(api_client):
    # PostgreSQL refuses an offset beyond ±15:59 that Python reads (schemathesis found the 500).
    wide = api_client.get("/api/runs/", {"queued_before": "0705-12-18T23:30:40-22:57"})
    assert wide.status_code == 200, wide.content
    early = api_client.get("/api/runs/", {"queued_after": "0001-01-01T00:00:00+10:00"})
    body = assert_json_error(early, 400)
    assert "queued_after" in body["error"]["fields"], body


@pytest.mark.parametrize("value", ["100000000000000000000", "-1", "x"])
def test_a_page_number_out_of_range_answers_json(api_client, value):
    response = api_client.get("/api/runs/", {"page": value})
    assert response.status_code in (400, 404), response.content[:300]
    assert response.json()["error"]["code"]


@pytest.mark.parametrize("path", ["/api/runs/100000000000000000000/", "/api/experiments/-1/"])
def test_an_object_id_out_of_range_answers_404_json(api_client, path):
    assert_json_error(api_client.get(path), 404)


def test_deeply_nested_json_answers_400(api_client):
    body = "[" * 10_000 + "]" * 10_000
    response = api_client.post("/api/workloads/", body, content_type="application/json")
    assert_json_error(response, 400)


def test_deeply_nested_json_inside_an_object_answers_400(api_client):
    body = '{"name": "deep", "settings": ' + "[" * 10_000 + "]" * 10_000 + "}"
    response = api_client.post("/api/config-profiles/", body, content_type="application/json")
    assert_json_error(response, 400)


def test_malformed_json_answers_400(api_client):
    response = api_client.post("/api/workloads/", '{"name": ', content_type="application/json")
    assert_json_error(response, 400)


def test_a_body_over_the_upload_limit_answers_413(api_client):
    size = settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 1024
    body = '{"name": "' + "x" * size + '"}'
    response = api_client.post("/api/workloads/", body, content_type="application/json")
    assert_json_error(response, 413)


@pytest.mark.parametrize(
    "content_type",
    [
        "text/plain",
        "application/xml",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
    ],
)
def test_a_content_type_the_api_does_not_read_answers_415(api_client, content_type):
    response = api_client.post("/api/workloads/", "name=x", content_type=content_type)
    assert_json_error(response, 415)


def test_json_that_is_not_an_object_answers_400(api_client):
    response = api_client.post("/api/workloads/", "[1, 2]", content_type="application/json")
    assert_json_error(response, 400)


def test_json_with_a_lone_surrogate_or_nan_answers_400(api_client):
    for text in ('{"name": "\\ud800"}', '{"name": NaN}'):
        response = api_client.post("/api/workloads/", text, content_type="application/json")
        assert response.status_code in (201, 400), response.content[:300]
        assert response["Content-Type"].startswith("application/json")


@pytest.fixture
def schema(api_client) -> dict:
    response = api_client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200
    return response.json()


@pytest.mark.parametrize(
    "component, fields",
    [("ShareLink", ["run", "experiment", "comparison"]), ("Note", ["run", "host"])],
)
def test_links_that_may_be_null_are_nullable_in_the_schema(schema, component, fields):
    properties = schema["components"]["schemas"][component]["properties"]
    assert [name for name in fields if not properties[name].get("nullable")] == []


def test_the_schema_documents_413_for_bodies_and_409_for_starting_twice(schema):
    paths = schema["paths"]
    assert {"400", "413", "415"} <= set(paths["/api/workloads/"]["post"]["responses"])
    assert "409" in paths["/api/experiments/{id}/start/"]["post"]["responses"]


def test_an_id_filter_declares_its_bounds_in_the_schema(schema):
    parameters = {p["name"]: p for p in schema["paths"]["/api/runs/"]["get"]["parameters"]}
    assert parameters["workload"]["schema"]["minimum"] == 1
    assert parameters["workload"]["schema"]["maximum"] == 2**63 - 1


def test_a_share_link_may_name_the_other_targets_as_null(api_client, user):
    experiment = ExperimentFactory(created_by=user)
    response = api_client.post(
        "/api/share-links/",
        {"experiment": experiment.pk, "run": None, "comparison": None},
        format="json",
    )
    assert response.status_code == 201, response.json()
    assert (response.json()["run"], response.json()["comparison"]) == (None, None)
