"""Runtimes run an engine somewhere (a container, a local process) behind one interface."""
