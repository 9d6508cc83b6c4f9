"""Typed messages between the engine's processes and the ZMQ sockets that carry them."""
