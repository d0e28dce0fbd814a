"""Adapters: the edges between the engine and the outside world (EC2, Kubernetes, a simulated world)."""
