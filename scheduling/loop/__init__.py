"""The control loop: thin orchestration (load models -> engine -> act through adapters -> save).

Celery tasks in scheduling/tasks.py call the steps here; every step runs under a lease and is
recorded as a TaskRun."""
