"""rocmkit's runtime layer: how it starts and stops processes (proc), talks to the Docker engine (docker_engine),
picks a docker client that can build with BuildKit (docker_client), starts ROCm containers (container), reads
image references (imageref) and puts its own code into a target (host_rocmkit: this host's rocmkit, never the
target's). Layered: proc knows nothing of Docker; container passes proc.run the cleanup that removes a run's
containers."""
