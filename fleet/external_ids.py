"""An account's external ID made anew (the API's `external-id` action and the admin's): one place, so
both audit it the same way and neither writes the value into the log."""

from django.db import transaction

from fleet.models import EXTERNAL_ID_HIDDEN, AwsAccount, new_external_id
from scheduling.audit import record_change
from scheduling.models import AuditEntry


def renew_external_id(account: AwsAccount, *, user, source: str) -> AwsAccount:
    """A new sts:ExternalId for `account` (locked while it is written), audited; returns the row with it."""
    with transaction.atomic():
        account = AwsAccount._base_manager.select_for_update().get(pk=account.pk)
        account.external_id = new_external_id()
        account.save(update_fields=["external_id", "updated_at"])
        record_change(user=user, source=source, obj=account, action=AuditEntry.Action.CHANGE, as_decision=False,
                      changes={"external_id": ["(old)", EXTERNAL_ID_HIDDEN]})
    return account
