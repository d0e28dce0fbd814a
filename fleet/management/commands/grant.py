"""python manage.py grant USER ROLE --cluster NAME | --account ID [--revoke]; --group GROUP instead of
USER for a karpweb group or an identity provider's group. Audited (source cli)."""

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from fleet.models import AwsAccount, Cluster, RoleBinding
from scheduling.audit import record_change
from scheduling.models import AuditEntry


class Command(BaseCommand):
    help = ("Give USER (or --group GROUP) the role viewer or operator on one cluster (--cluster NAME), one account "
            "and its clusters (--account ID), or the fleet (neither); --revoke takes it back. Takes effect at the "
            "holder's next request.")

    def add_arguments(self, parser):
        parser.add_argument("user", nargs="?", help="A karpweb username (or give --group).")
        parser.add_argument("role", choices=[RoleBinding.Role.VIEWER, RoleBinding.Role.OPERATOR])
        parser.add_argument("--group", default="", help="A karpweb group or an identity provider's group name.")
        where = parser.add_mutually_exclusive_group()
        where.add_argument("--cluster", help="The cluster's name.")
        where.add_argument("--account", help="The AWS account ID (12 digits).")
        parser.add_argument("--revoke", action="store_true", help="Remove the binding instead.")

    def handle(self, *args, user=None, role, group="", cluster=None, account=None, revoke=False, **options):
        if bool(user) == bool(group):
            raise CommandError("name a USER or give --group GROUP (one of them)")
        holder = self._user(user) if user else None
        target = {"cluster": self._cluster(cluster) if cluster else None,
                  "account": self._account(account) if account else None}
        binding = {"user": holder, "group": group, "role": role, **target}
        with transaction.atomic():
            found = RoleBinding.objects.filter(**binding).first()
            if revoke:
                if found is None:
                    raise CommandError(f"no such binding: {self._words(binding)}")
                record_change(user=None, source=AuditEntry.Source.CLI, obj=found, action=AuditEntry.Action.DELETE,
                              as_decision=False)
                found.delete()
                self.stdout.write(f"Revoked: {self._words(binding)}.")
                return
            if found is not None:
                self.stdout.write(f"Already granted: {self._words(binding)}.")
                return
            made = RoleBinding.objects.create(**binding)
            record_change(user=None, source=AuditEntry.Source.CLI, obj=made, action=AuditEntry.Action.CREATE,
                          as_decision=False, changes={"binding": [None, str(made)]})
        self.stdout.write(f"Granted: {self._words(binding)}.")

    def _user(self, username):
        User = get_user_model()
        try:
            return User.objects.get(**{User.USERNAME_FIELD: username})
        except User.DoesNotExist:
            raise CommandError(f'user: no user is named "{username}"') from None

    def _cluster(self, name):
        found = Cluster._base_manager.filter(name=name).first()
        if found is None:
            raise CommandError(f'--cluster: no cluster is named "{name}"')
        return found

    def _account(self, account_id):
        found = AwsAccount._base_manager.filter(account_id=account_id).first()
        if found is None:
            raise CommandError(f'--account: no AWS account has the ID "{account_id}"')
        return found

    @staticmethod
    def _words(binding) -> str:
        who = binding["user"].get_username() if binding["user"] else f"group {binding['group']}"
        where = (f"cluster {binding['cluster'].name}" if binding["cluster"] else
                 f"account {binding['account'].account_id}" if binding["account"] else "the fleet")
        return f"{who} is {binding['role']} on {where}"
