from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from accounts.tokens import TokenRefused, create_token, revoke_tokens
from karpweb.roles import can_operate, can_view


class Command(BaseCommand):
    help = (
        "Make a new API token for USER and print its key, once (only a digest is stored), for "
        "`Authorization: Token <key>`; --rotate first revokes USER's other tokens, --revoke only revokes "
        "them. The token acts with USER's role and expires after --days."
    )

    def add_arguments(self, parser):
        parser.add_argument("username")
        action = parser.add_mutually_exclusive_group()
        action.add_argument("--revoke", action="store_true", help="Delete USER's tokens: requests with them get 401.")
        action.add_argument("--rotate", action="store_true", help="Delete USER's tokens, then make a new one.")
        parser.add_argument("--read-only", action="store_true", help="The token reads; it changes nothing.")
        parser.add_argument("--cluster", default=None, help="The token sees one cluster alone (its name).")
        parser.add_argument("--days", type=int, default=None,
                            help=f"Days until the new token expires (default KARPWEB_API_TOKEN_DAYS, {settings.KARPWEB_API_TOKEN_DAYS}).")

    def handle(self, *args, username, revoke=False, rotate=False, days=None, read_only=False, cluster=None, **options):
        User = get_user_model()
        try:
            user = User.objects.get(**{User.USERNAME_FIELD: username})
        except User.DoesNotExist:
            raise CommandError(f'no user "{username}"') from None
        if revoke:
            deleted = revoke_tokens(user, source="cli")
            self.stdout.write(f"Revoked {deleted} API token(s) of {username}." if deleted else f"{username} had no API token.")
            return
        if not user.is_active:
            raise CommandError(f"{username} is inactive: its token would be refused")
        if days is not None and not 1 <= days <= 3650:
            raise CommandError("--days must be from 1 to 3650")
        narrowed_to = None
        if cluster is not None:
            from fleet.models import Cluster

            narrowed_to = Cluster._base_manager.filter(name=cluster).first()
            if narrowed_to is None:
                raise CommandError(f'--cluster: no cluster is named "{cluster}"')
        if rotate:
            revoke_tokens(user, source="cli")
        try:
            token, key = create_token(user, days, source="cli", read_only=read_only, cluster=narrowed_to)
        except TokenRefused as exc:
            raise CommandError(str(exc)) from None
        if not can_view(user):
            self.stderr.write(
                f"warning: {username} has neither the viewer nor the operator role: the API will answer 403"
            )
        elif not can_operate(user):
            self.stderr.write(f"note: {username} is a viewer: the token reads, it cannot change anything")
        self.stderr.write(f"The key is shown this once (only its digest is kept); it expires {token.expiry:%Y-%m-%d %H:%M} UTC.")
        self.stdout.write(key)
