"""API tokens move from DRF's table (keys in clear) to django-rest-knox's (SHA-512 digests): each
existing key keeps working, now stored hashed, and DRF's copy of it is deleted. The keys get the
default expiry from now. The table itself stays (rest_framework.authtoken is no longer installed;
its migrations made it) and is left empty."""

import datetime

from django.conf import settings
from django.db import migrations
from django.utils import timezone


def move_keys(apps, schema_editor):
    connection = schema_editor.connection
    if "authtoken_token" not in connection.introspection.table_names():
        return  # a new installation: nothing was ever stored in clear
    from knox.crypto import hash_token
    from knox.settings import CONSTANTS

    AuthToken = apps.get_model("knox", "AuthToken")
    expiry = timezone.now() + datetime.timedelta(days=settings.KARPWEB_API_TOKEN_DAYS)
    with connection.cursor() as cursor:
        cursor.execute("SELECT key, user_id FROM authtoken_token")
        rows = cursor.fetchall()
        AuthToken.objects.bulk_create([
            AuthToken(digest=hash_token(key), token_key=key[:CONSTANTS.TOKEN_KEY_LENGTH], user_id=user_id, expiry=expiry)
            for key, user_id in rows])
        cursor.execute("DELETE FROM authtoken_token")


class Migration(migrations.Migration):
    dependencies = [
        ("accounts", "0001_initial"),
        ("knox", "0009_extend_authtoken_field"),
    ]

    operations = [migrations.RunPython(move_keys, migrations.RunPython.noop)]
