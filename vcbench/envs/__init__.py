"""Environments behind the functional Env contract (DESIGN.md): JAX-native ones and CPU
simulators bridged by `host.py`."""
