"""rocmkit's runtime layer: how it starts and stops processes (proc), talks to the Docker engine (docker_engine),
picks a docker client that can build with BuildKit (docker_client), starts ROCm containers (container), reads
image references (imageref) and runs its own code inside a target (intarget). Layered: proc knows nothing of
Docker; container passes proc.run the cleanup that removes a run's containers."""
