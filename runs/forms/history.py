"""Forms of the history pages: importing pgbench outputs, series, alerts and notes."""

from typing import Any

from django import forms
from django.core.files.uploadedfile import UploadedFile

from runs.models import Experiment, Series
from runs.services.history.import_description import (
    DESCRIBE_HELP,
    DescriptionError,
    ImportDescription,
    parse_description,
)
from runs.services.history.imported import not_imported
from runs.services.history.series import cron_fields
from runs.services.history.webhooks import WebhookRefused, webhook_check


class MultipleFileInput(forms.ClearableFileInput):
    allow_multiple_selected = True


class MultipleFileField(forms.FileField):
    """Several files from one input (Django's documented pattern)."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("widget", MultipleFileInput())
        super().__init__(**kwargs)

    def clean(self, data: Any, initial: Any = None) -> list[UploadedFile[bytes]]:
        if isinstance(data, list | tuple):
            return [super(MultipleFileField, self).clean(item, initial) for item in data]
        return [super().clean(data, initial)]


class ImportForm(forms.Form):
    """One or many raw pgbench outputs, with what the user knows about them."""

    outputs = MultipleFileField(help_text="What pgbench printed (stdout and stderr), 9.2 to 18.")
    command_line = forms.CharField(required=False, max_length=2000)
    pg_version = forms.CharField(
        required=False, max_length=40, help_text="Else what the file says (pgbench header)."
    )
    host_name = forms.CharField(
        required=False,
        max_length=80,
        help_text="The machine the outputs came from; the runs go to host 'imported: NAME'.",
    )
    notes = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 3}))
    describe = forms.CharField(
        required=False,
        max_length=20000,
        label="What each file was measured with",
        help_text=DESCRIBE_HELP,
        widget=forms.Textarea(
            attrs={
                "rows": 4,
                "placeholder": "*ssd*: storage=SSD\n*-fsync.log: wal_sync_method=fsync",
            }
        ),
    )

    def clean_describe(self) -> ImportDescription:
        try:
            return parse_description(self.cleaned_data["describe"])
        except DescriptionError as error:
            raise forms.ValidationError(str(error)) from error


class SeriesForm(forms.ModelForm[Series]):
    """A series: the experiment to repeat, its cron schedule, where alerts go."""

    # An experiment of imported runs cannot be run again.
    template = forms.ModelChoiceField(queryset=not_imported(Experiment.objects.all()))
    webhook_url = forms.URLField(
        required=False,
        assume_scheme="https",
        help_text="Alerts are POSTed here as JSON (http or https).",
    )

    class Meta:
        model = Series
        fields = [
            "name",
            "template",
            "schedule",
            "webhook_url",
            "alert_email",
            "deliver",
            "enabled",
        ]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Left out, a series delivers confirmed alerts only (the model's default).
        self.fields["deliver"].required = False

    def clean_deliver(self) -> str:
        return str(self.cleaned_data.get("deliver") or Series.Deliver.CONFIRMED)

    def clean_schedule(self) -> str:
        schedule = self.cleaned_data["schedule"]
        try:
            cron_fields(schedule)
        except ValueError as error:
            raise forms.ValidationError(str(error)) from error
        return " ".join(schedule.split())

    def clean_webhook_url(self) -> str:
        url = self.cleaned_data["webhook_url"]
        if url:
            try:
                webhook_check(url)
            except WebhookRefused as error:
                raise forms.ValidationError(str(error)) from error
        return url


class AcknowledgeForm(forms.Form):
    note = forms.CharField(max_length=2000, widget=forms.Textarea(attrs={"rows": 2}))


class NoteForm(forms.Form):
    text = forms.CharField(max_length=2000)
