"""Runtimes run an engine somewhere (a local process; a container later) behind one interface."""
