"""The TPC-C-like workload BenchLab ships (preset 1's "TPC-C style test").

TPC-C-like, not an audited TPC-C result: the nine tables and the initial
population of TPC-C section 4.3 (scale = warehouses), and its five
transactions as PL/pgSQL functions called by pgbench scripts in the usual mix
(new order 45, payment 43, order status, delivery and stock level 4 each).
Unlike TPC-C there are no keying or think times, keys are uniform instead of
NURand, customers are found by id only and no new order rolls back. pgbench
reports each script's rate and latency; new-order transactions per minute
(NOPM) are the new-order script's tps x 60.
"""

from importlib import resources
from typing import Any

from agents.contract.spec.document import CustomScriptSpec

TITLE = "TPC-C-like"
HONEST_NAME = "TPC-C-like, not an audited TPC-C result"
NEW_ORDER = "new-order"

_W_D_C = "\\set w_id random(1, :scale)\n\\set d_id random(1, 10)\n\\set c_id random(1, 3000)\n"
SCRIPTS: list[CustomScriptSpec] = [
    {
        "name": NEW_ORDER,
        "text": _W_D_C + "\\set lines random(5, 15)\n"
        "SELECT tpcc_new_order(:w_id, :d_id, :c_id, :lines);\n",
        "weight": 45,
    },
    {
        "name": "payment",
        "text": _W_D_C + "\\set cents random(100, 500000)\n"
        "SELECT tpcc_payment(:w_id, :d_id, :c_id, :cents);\n",
        "weight": 43,
    },
    {
        "name": "order-status",
        "text": _W_D_C + "SELECT tpcc_order_status(:w_id, :d_id, :c_id);\n",
        "weight": 4,
    },
    {
        "name": "delivery",
        "text": "\\set w_id random(1, :scale)\n\\set carrier random(1, 10)\n"
        "SELECT tpcc_delivery(:w_id, :carrier);\n",
        "weight": 4,
    },
    {
        "name": "stock-level",
        "text": "\\set w_id random(1, :scale)\n\\set d_id random(1, 10)\n"
        "\\set threshold random(10, 20)\nSELECT tpcc_stock_level(:w_id, :d_id, :threshold);\n",
        "weight": 4,
    },
]


def setup_sql(warehouses: int) -> str:
    """Schema, transaction functions and the load of `warehouses` warehouses."""
    files = resources.files(__package__)
    schema = files.joinpath("schema.sql").read_text()
    transactions = files.joinpath("transactions.sql").read_text()
    return f"{schema}\n{transactions}\nSELECT tpcc_load({warehouses});\nANALYZE;\n"


def workload_values(warehouses: int) -> dict[str, Any]:
    """A catalogue Workload's values for the workload at `warehouses` warehouses.

    The scale is the warehouse count (the scripts read it as `:scale`); `pgbench -i`
    only drops pgbench's own tables (`-I d`), the setup SQL loads the data.
    """
    return {
        "description": f"{HONEST_NAME}. {warehouses} warehouse(s); scale = warehouses. "
        "No keying or think times, uniform keys, customers by id: compare it only with "
        "itself.",
        "scale": warehouses,
        "init_steps": "d",
        "setup_sql": setup_sql(warehouses),
        "scripts": [dict(script) for script in SCRIPTS],
        "no_vacuum": True,
    }


def per_type(scripts: list[dict[str, Any]], names: list[str]) -> list[dict[str, Any]]:
    """A point's per-script blocks named after the workload's scripts (pgbench numbers
    them from 1 in the order given), with NOPM on the new-order row."""
    rows = []
    for block in scripts:
        number = block.get("number") or 0
        name = names[number - 1] if 0 < number <= len(names) else block.get("name")
        tps = block.get("tps")
        nopm = round(tps * 60, 1) if name == NEW_ORDER and tps is not None else None
        rows.append({**block, "type": name, "nopm": nopm})
    return rows
