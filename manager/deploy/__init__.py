"""`gomgr deploy render`: the desired-state file's engines as Kubernetes or KServe manifests."""
