from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from rest_framework.authtoken.models import Token

from karpweb.roles import can_operate, can_view


class Command(BaseCommand):
    help = (
        "Print USER's API token (creating it if needed) for `Authorization: Token <key>`; "
        "--rotate replaces it, --revoke deletes it. The token acts with USER's role."
    )

    def add_arguments(self, parser):
        parser.add_argument("username")
        action = parser.add_mutually_exclusive_group()
        action.add_argument("--revoke", action="store_true", help="Delete the token: requests with it get 401.")
        action.add_argument("--rotate", action="store_true", help="Replace the token with a new key.")

    def handle(self, *args, username, revoke=False, rotate=False, **options):
        User = get_user_model()
        try:
            user = User.objects.get(**{User.USERNAME_FIELD: username})
        except User.DoesNotExist:
            raise CommandError(f'no user "{username}"') from None
        if revoke:
            deleted, _ = Token.objects.filter(user=user).delete()
            self.stdout.write(f"Revoked the API token of {username}." if deleted else f"{username} had no API token.")
            return
        if not user.is_active:
            raise CommandError(f"{username} is inactive: its token would be refused")
        if rotate:
            Token.objects.filter(user=user).delete()
        token, _created = Token.objects.get_or_create(user=user)
        if not can_view(user):
            self.stderr.write(
                f"warning: {username} has neither the viewer nor the operator role: the API will answer 403"
            )
        elif not can_operate(user):
            self.stderr.write(f"note: {username} is a viewer: the token reads, it cannot change anything")
        self.stdout.write(token.key)
