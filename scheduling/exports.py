"""The CSV download of the Karpenter audit (`?export=csv` on /karpenter-audit/, karpweb/csvexport.py):
raw values rather than the page's words, so that a spreadsheet can add up the missed dollars."""

KARPENTER_AUDIT_COLUMNS = [
    ("launched_at", lambda k: k.launched_at),
    ("cluster", lambda k: k.cluster.name if k.cluster_id else ""),
    ("nodeclaim", lambda k: k.claim_name),
    ("nodepool", lambda k: k.node_pool_name),
    ("instance_type", lambda k: k.instance_type),
    ("zone", lambda k: k.zone),
    ("capacity_type", lambda k: k.capacity_type),
    ("outcome", lambda k: k.outcome),
    ("reservation", lambda k: k.reservation_label),
    ("free_units", lambda k: k.free_units),
    ("price_per_hour", lambda k: k.price_per_hour),
    ("price_basis", lambda k: k.price_basis),
    ("idle_hours", lambda k: round(k.idle_hours, 4)),
    ("missed_dollars", lambda k: round(k.missed_dollars, 2)),
    ("ended_at", lambda k: k.ended_at),
    ("reason", lambda k: k.reason),
]


def audit_rows(view, launches):
    return launches.select_related("cluster")
