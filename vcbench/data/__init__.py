"""Demonstrations, embedding caches and other data vcbench generates and keeps on disk."""
