"""The form that starts a bisection: the model's fields, as the model declares them."""

from django import forms

from runs.models import Bisection, Host


class BisectionForm(forms.ModelForm[Bisection]):
    """A bisection's definition; the refs and build options are checked again when it
    starts (runs.bisection.services.bisection_start), before anything is queued."""

    class Meta:
        model = Bisection
        fields = [
            "name",
            "host",
            "repository",
            "good_ref",
            "bad_ref",
            "version",
            "configure_flags",
            "cflags",
            "config_profile",
            "workload",
            "storage_data",
            "clients",
            "duration_s",
            "direction",
            "repeats",
            "max_rounds",
            "margin_pct",
            "min_effect_pct",
            "duet",
        ]

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        host = self.fields["host"]
        if isinstance(host, forms.ModelChoiceField):
            host.queryset = Host.objects.filter(enrollment=Host.Enrollment.APPROVED)
