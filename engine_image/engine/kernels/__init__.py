"""Device kernels: leaves that know tensors and nothing of models, batches or memory."""
