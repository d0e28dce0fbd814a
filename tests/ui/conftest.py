import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management import call_command


def _user_in(group_name, username):
    user = get_user_model().objects.create_user(username, f"{username}@example.com", "pw-for-tests-only")
    if group_name:
        user.groups.add(Group.objects.get(name=group_name))
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
    call_command("seed_demo")
