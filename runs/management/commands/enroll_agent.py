"""Approve an agent whose identity file the lab's operator can read (scripts/lab's own agent).

    python -m agents identity --name local          # prints the agent's secret_file
    python manage.py enroll_agent local --secret-file PATH

Agents on other machines enroll through the hosts page instead: their secret
never has to be copied by hand.
"""

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser

from runs.services import host_enroll


class Command(BaseCommand):
    help = "Approve the agent NAME with the secret in its identity file."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name", help="the agent's name (its --name)")
        parser.add_argument(
            "--secret-file", type=Path, required=True, help="the agent's identity file"
        )

    def handle(self, *args: object, **options: object) -> None:
        name, path = str(options["name"]), Path(str(options["secret_file"]))
        try:
            secret = path.read_text().strip()
            host = host_enroll(name, secret)
        except (OSError, ValueError) as error:
            raise CommandError(f"--secret-file {path}: {error}") from error
        self.stdout.write(f"enroll_agent: {host.name} approved, fingerprint {host.fingerprint}")
