"""The loop's step names, apart from scheduling/tasks.py so that what reads their runs
(scheduling/loop/health.py) needs not import the Celery tasks (tasks -> startup -> health)."""

STEPS = ("sync_ec2", "sync_catalogue", "sync_kubernetes", "provision", "status", "lifecycle", "consolidate",
         "expire_capacity_blocks", "demote")
# Steps on an AWS account's view in a region (reservations, catalogue), not on a cluster: one run per
# (account, region) in use, in the scope of its first cluster (which also does its clusters' EC2 side).
EC2_STEPS = frozenset({"sync_ec2", "sync_catalogue"})
