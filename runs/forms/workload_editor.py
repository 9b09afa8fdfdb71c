"""The workload page's script editor: what the API's `scripts` and `processes` take, as fields.

Each built-in script has a weight (0: not used; ticking it without a weight means 1).
Custom scripts are slots of name, text and weight: the saved ones plus one empty slot
(saving with it filled adds another). A point's several pgbench processes are given as the
API's JSON list. The form (runs.forms.catalogue.WorkloadForm) adds these fields and reads them back
with `scripts_from` and `processes_from`.
"""

import json
from typing import Any

from django import forms

from agents.contract.spec.document import BUILTIN_SCRIPTS, ScriptSpec

SCRIPT_PARTS = ("name", "text", "weight")


def weight_field(builtin: str) -> str:
    return f"weight_{builtin.replace('-', '_')}"


def slot_field(part: str, slot: int) -> str:
    """`script_text`, `script_name`, `script_weight` for slot 0, then `script_text_1`..."""
    return f"script_{part}" if slot == 0 else f"script_{part}_{slot}"


def slot_count(scripts: list[dict[str, Any]], data: Any) -> int:
    """The saved custom scripts or the posted slots, whichever is more, plus an empty one."""
    saved = sum(1 for script in scripts if "text" in script)
    posted = 0
    while data is not None and slot_field("text", posted) in data:
        posted += 1
    return max(saved, posted) + 1


def add_script_fields(form: forms.BaseForm, scripts: list[dict[str, Any]], slots: int) -> None:
    """Weights for the built-ins and `slots` custom slots, filled from `scripts`."""
    builtin_weights = {s["builtin"]: s["weight"] for s in scripts if "builtin" in s}
    for builtin in BUILTIN_SCRIPTS:
        form.fields[weight_field(builtin)] = forms.IntegerField(
            required=False,
            min_value=0,
            label=f"{builtin} weight",
            initial=builtin_weights.get(builtin),
            help_text="0 or empty: not used (ticked above without a weight: 1)",
        )
    custom = [s for s in scripts if "text" in s]
    for slot in range(slots):
        saved = custom[slot] if slot < len(custom) else {}
        _add_slot(form, slot, saved)


def _add_slot(form: forms.BaseForm, slot: int, saved: dict[str, Any]) -> None:
    form.fields[slot_field("name", slot)] = forms.CharField(
        required=False, max_length=64, label="Script name", initial=saved.get("name")
    )
    form.fields[slot_field("text", slot)] = forms.CharField(
        required=False,
        strip=False,
        label="Custom script" if slot == 0 else f"Custom script {slot + 1}",
        initial=saved.get("text", ""),
        widget=forms.Textarea(attrs={"rows": 6, "spellcheck": "false"}),
        help_text="pgbench script text; <code>\\shell</code> and <code>\\setshell</code> "
        "are refused.",
    )
    form.fields[slot_field("weight", slot)] = forms.IntegerField(
        required=False, min_value=0, label="Weight", initial=saved.get("weight", 1)
    )


def slots_of(form: forms.BaseForm, slots: int) -> list[tuple[forms.BoundField, ...]]:
    """Each custom slot's bound fields (name, text, weight), for the template."""
    return [tuple(form[slot_field(part, slot)] for part in SCRIPT_PARTS) for slot in range(slots)]


def scripts_from(cleaned: dict[str, Any], slots: int) -> list[ScriptSpec]:
    """The workload's scripts in the job spec's form: built-ins first, then custom ones."""
    scripts: list[ScriptSpec] = []
    ticked = set(cleaned.get("builtins") or [])
    for builtin in BUILTIN_SCRIPTS:
        weight = cleaned.get(weight_field(builtin))
        if weight is None and builtin in ticked:
            weight = 1
        if weight:
            scripts.append({"builtin": builtin, "weight": weight})
    for slot in range(slots):
        text = (cleaned.get(slot_field("text", slot)) or "").replace("\r\n", "\n")
        if not text.strip():
            continue
        name = (cleaned.get(slot_field("name", slot)) or "").strip()
        weight = cleaned.get(slot_field("weight", slot))
        scripts.append(
            {
                "name": name or ("custom" if slot == 0 else f"custom-{slot + 1}"),
                "text": text,
                "weight": 1 if weight is None else weight,
            }
        )
    return scripts


def script_error_field(spec_field: str | None, scripts: list[ScriptSpec]) -> str:
    """The form field a spec error about `workload.scripts[i]...` belongs to."""
    prefix = "workload.scripts["
    if not spec_field or not spec_field.startswith(prefix):
        return "script_text"
    index = int(spec_field[len(prefix) :].split("]")[0])
    if index >= len(scripts) or "builtin" in scripts[index]:
        return "builtins"
    slot = sum(1 for script in scripts[:index] if "text" in script)
    return slot_field("text", slot)


def processes_from(text: str) -> list[object]:
    """The processes field: empty, or a JSON list as the API takes it."""
    if not text.strip():
        return []
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise forms.ValidationError(f"not JSON: {error.msg} at line {error.lineno}") from error
    if not isinstance(value, list):
        raise forms.ValidationError('a JSON list of {"scripts": [...], "clients": n} objects')
    return value
