"""The user fixtures (viewer, operator, nobody, *_client) and demo_world live in tests/conftest.py,
shared with the API's tests."""
