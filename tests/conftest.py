import pytest
from django.conf import settings
from django.contrib.auth import get_user_model

# Tests run with DEBUG off (as production does) but without collectstatic's manifest.
settings.STORAGES = {
    **settings.STORAGES,
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}


@pytest.fixture(autouse=True)
def _fresh_cache():
    """Each test starts with an empty cache (rate-limit counts, the pod page's engine answer)."""
    from django.core.cache import cache

    cache.clear()


@pytest.fixture
def admin_user_client(client, db):
    user = get_user_model().objects.create_superuser("root", "root@example.com", "pw-for-tests-only")
    client.force_login(user)
    client.user = user
    return client


# --- users in the UI's roles (the pages' and the API's tests) ----------------------------------

def _user_in(group_name, username):
    from django.contrib.auth.models import Group

    user = get_user_model().objects.create_user(username, f"{username}@example.com", "pw-for-tests-only")
    if group_name:
        # get_or_create: a transactional test elsewhere may have flushed the migration-made groups.
        user.groups.add(Group.objects.get_or_create(name=group_name)[0])
    return user


@pytest.fixture
def viewer(db):
    return _user_in("viewer", "vera")


@pytest.fixture
def operator(db):
    return _user_in("operator", "otto")


@pytest.fixture
def nobody(db):
    return _user_in(None, "nora")


@pytest.fixture
def viewer_client(client, viewer):
    client.force_login(viewer)
    return client


@pytest.fixture
def operator_client(client, operator):
    client.force_login(operator)
    return client


@pytest.fixture
def demo_world(db):
    from django.core.management import call_command

    call_command("seed_demo")
