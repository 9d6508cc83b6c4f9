"""The supervisor: the router's on-demand loader, owner of the engines it loads (issue #23)."""
