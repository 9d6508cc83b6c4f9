"""Running the model over a batch: the forward batch description and the model runner."""
