"""Environments behind the functional Env contract (docs/design.md): JAX-native ones and CPU
simulators bridged by `host.py`."""
