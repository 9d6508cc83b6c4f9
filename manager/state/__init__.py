"""The manager's state directory: engine records, pid files, logs and the router daemon."""
