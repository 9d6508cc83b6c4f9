"""Engine container images: build ours from engine_image/, or make sure one is present."""
