"""Engine lifecycle: start (resolve → readiness → run → /health → register), stop, reconcile."""
