"""The engine's bottom layer: imports no other engine package, so every package may import it.

``forward_batch``: one model forward's inputs; ``errors``: what the engine reports to callers;
``process_guard``: what ties the engine's child processes to the server's life.
"""
