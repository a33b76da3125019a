"""vcbench: how good is a pre-trained visual representation for acting, and how robust is it."""

__version__ = "0.1.0"
