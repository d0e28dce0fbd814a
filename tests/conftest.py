import pytest
from django.conf import settings
from django.contrib.auth import get_user_model

# Tests run with DEBUG off (as production does) but without collectstatic's manifest.
settings.STORAGES = {
    **settings.STORAGES,
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}


@pytest.fixture
def admin_user_client(client, db):
    user = get_user_model().objects.create_superuser("root", "root@example.com", "pw-for-tests-only")
    client.force_login(user)
    client.user = user
    return client
