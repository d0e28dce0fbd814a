"""docs/api.md's walkthrough, run as written (curl + jq: its bash blocks, read from the document) against a live
server on the demo world as `./karpweb.sh run` has it (a fleet of three clusters whose loops ran once):
the issue's "done when" (list reservations with their utilization, change a NodeClass's selector
terms safely, run a what-if, using only the documented API)."""

import io
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from django.core.management import call_command

from django.utils import timezone

from fleet.models import Cluster
from fleet.scope import cluster_scope, default_cluster
from reservations.models import EC2NodeClass
from scheduling.loop import steps
from scheduling.models import Pod
from scheduling.models import AuditEntry

DOC = Path(__file__).resolve().parents[2] / "docs" / "api.md"


def walkthrough_script() -> str:
    text = DOC.read_text()
    return "\n".join(re.findall(r"```bash\n(.*?)```", text[text.index("## Walkthrough"):], re.S))


def test_the_walkthrough_runs_as_documented(live_server, transactional_db, operator):
    for tool in ("curl", "jq"):
        if shutil.which(tool) is None:
            pytest.fail(f"{tool} is missing: apt-get install -y {tool} (the walkthrough in docs/api.md uses it)")
    call_command("seed_demo", stdout=io.StringIO())
    # As `./karpweb.sh run` has it a moment later: each cluster's loop ran once, and the simulated workloads'
    # pods arrived in every cluster under the same names (names are unique per cluster only).
    now = timezone.now()
    for cluster in Cluster.objects.order_by("name"):
        with cluster_scope(cluster):
            steps.sync_kubernetes(now)
    assert Pod.objects.fleet().filter(namespace="sim").values("name").distinct().count() < \
        Pod.objects.fleet().filter(namespace="sim").count()
    out = io.StringIO()
    call_command("api_token", operator.username, stdout=out)
    # The doc's default, prod-use1, is the first cluster of `./karpweb.sh run`; the tests name theirs otherwise.
    env = {**os.environ, "KARPWEB": live_server.url, "KARPWEB_TOKEN": out.getvalue().strip(),
           "CLUSTER": default_cluster().name}
    result = subprocess.run(["bash", "-c", walkthrough_script()], env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    output = result.stdout

    assert "cr-0a1b2c3d4e5f60002\tdefault\tm5.xlarge\tus-east-1b\t0/4 used\t24h: " in output
    assert re.search(r"cr-0a1b2c3d4e5f60007\tcapacity-block\t.*drains at 20\d\d-", output)
    assert "== cr-0a1b2c3d4e5f60002 since " in output
    assert "would add: cr-0a1b2c3d4e5f60002; would remove: \n" in output
    assert "saved batch at version 1; it selects " in output
    assert 'refused (400):\ncapacityReservationSelectorTerms[3].id: "x" does not match ^cr-[0-9a-z]+$' in output
    whatif = output[output.index(f"== what-if in {default_cluster().name}"):]
    assert re.search(r"launch \S+ reserved in us-east-1\w \(cr-0a1b2c3d4e5f6000\d\) for default/trainer-pending-0", whatif)
    assert all(re.search(rf"(bind|for) .*default/whatif-{i}\b", whatif) for i in range(3)), whatif
    assert 'pods[0].spec.containers[0].resources.requests.cpu: "lots" is not a quantity' in output

    batch = EC2NodeClass.objects.get(name="batch")
    assert batch.capacity_reservation_selector_terms[-1] == {"id": "cr-0a1b2c3d4e5f60002"}
    assert "cr-0a1b2c3d4e5f60002" in {r.reservation_id for r in batch.selected_reservations.all()}
    entry = AuditEntry.objects.exclude(content_type__model="authtoken").get()  # the token made is audited too
    assert (entry.source, entry.actor, entry.object_repr) == ("api", operator.username, "batch")
