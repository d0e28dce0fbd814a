"""karpweb's scheduling engine: pure Python, standard library only (no Django, boto3 or kubernetes).

Entry points:
  simulate(world_dict) -> decisions_dict     the `simulate` contract (docs/simulate-interface.md)
  simulate_json(text) -> decisions_dict      the same from JSON text
  parse_world(world_dict) -> World           WORLD.json -> engine objects (raises WorldError)
  plan(world, mode) -> Plan                  the provisioning plan as objects (claims, bindings, failures)
  capacity_block_timing(end, ultraserver)    drain / termination times of a Capacity Block
  disruption.lifecycle(plan) -> Lifecycle    expiry, demotion, drift and consolidation as objects

Modules: quantities, requirements, labels, taints, podaffinity, timeutil, capacityblocks,
reservations, selectors, overhead, instancetypes, catalog, ledger, cluster, rejection, nodeclaim, scheduler,
launch, explain, world, planning, decisions, simulate; for disruption: budgets, instances,
lifecycle, consolidation, disruption, consolidation_bench.
"""

from .capacityblocks import CapacityBlockTiming, capacity_block_timing
from .cluster import DaemonSet, Node, NodeClass, NodePool, Pod, World
from .ledger import ReservationLedger, ReservedMode
from .planning import Plan, plan
from .quantities import QuantityError, ResourceList, parse_quantity
from .requirements import Requirement, Requirements
from .reservations import CapacityReservation
from .selectors import parse_terms, resolve_node_class
from .simulate import simulate, simulate_json
from .world import WorldError, load_json, parse_world

__all__ = [
    "CapacityBlockTiming", "CapacityReservation", "DaemonSet", "Node", "NodeClass", "NodePool", "Plan", "Pod",
    "QuantityError", "Requirement", "Requirements", "ReservationLedger", "ReservedMode", "ResourceList", "World",
    "WorldError", "capacity_block_timing", "load_json", "parse_quantity", "parse_terms", "parse_world", "plan",
    "resolve_node_class", "simulate", "simulate_json",
]
