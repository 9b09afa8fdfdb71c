"""The run page shows a point's numbers per transaction type and per pgbench process."""

import pytest
from django.urls import reverse

from runs import tpcc_like
from tests.runs.factories import ResultFactory, RunFactory

pytestmark = pytest.mark.django_db


def test_run_page_shows_each_transaction_type_and_nopm(signed_in):
    scripts = [dict(script) for script in tpcc_like.SCRIPTS]
    run = RunFactory(spec={"workload": {"scripts": scripts, "processes": []}})
    blocks = [
        {
            "number": n,
            "name": f"/x/script-{n - 1}.sql",
            "weight": s["weight"],
            "tps": 10.0 * n,
            "transactions": 100 * n,
            "latency_avg_ms": 1.5,
        }
        for n, s in enumerate(scripts, start=1)
    ]
    ResultFactory(run=run, scripts=blocks)

    page = signed_in.get(reverse("run-detail", args=[run.pk])).content.decode()

    assert "per transaction type" in page
    for script in scripts:
        assert f"<td>{script['name']}</td>" in page
    assert '<td class="num">600.0</td>' in page, "new order at 10 tps is 600 NOPM"


def test_run_page_shows_each_process_with_its_command(signed_in):
    run = RunFactory()
    processes = [
        {
            "number": n,
            "clients": 1,
            "threads": 1,
            "tps": 50.0,
            "transactions": 100,
            "latency_avg_ms": 2.0,
            "exit_code": 0,
            "argv": ["pgbench", "-f", f"t{n}.sql"],
            "stdout": f"out {n}",
            "stderr": "",
        }
        for n in (1, 2)
    ]
    ResultFactory(run=run, tps=100.0, processes=processes)

    page = signed_in.get(reverse("run-detail", args=[run.pk])).content.decode()

    assert "2 pgbench processes, summed above" in page
    assert "pgbench -f t1.sql" in page and "pgbench -f t2.sql" in page
