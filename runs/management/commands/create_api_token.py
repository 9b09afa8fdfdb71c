"""Create an API token for a user and print it, the one time it is shown.

    python manage.py create_api_token admin --name "nightly script"

The lab keeps only the token's digest (runs.services.access.tokens): keep the
printed token where the script that uses it can read it. To revoke a token,
delete it in the admin (API tokens); a lost one is replaced by a new one.
"""

from django.contrib.auth.models import User
from django.core.management.base import BaseCommand, CommandError, CommandParser

from runs.services.access.tokens import api_token_create


class Command(BaseCommand):
    help = "Create an API token for USERNAME and print it (shown this once only)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username", help="the user the token signs in as")
        parser.add_argument("--name", default="", help="what the token is for (shown in admin)")

    def handle(self, *args: object, **options: object) -> None:
        username = str(options["username"])
        user = User.objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"no user {username!r}: create it first (manage.py createsuperuser)")
        _row, token = api_token_create(user, name=str(options["name"])[:100])
        self.stderr.write(f"create_api_token: token for {username} (shown this once only):")
        self.stdout.write(token)
