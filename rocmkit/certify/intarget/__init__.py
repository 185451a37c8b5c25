"""The code certify runs inside its target (this host's Python or a container of the image), by module name:
the setup (setup), TRL's trainer (trl_run) and its vLLM launcher (trl_launch, vllm_cpu_serve, file_weights).
It is always this host's rocmkit (rocmkit/runtime/host_rocmkit.py), so these names may change between releases;
what drives them from the host lives in rocmkit/certify/ and rocmkit/certify/engines/."""
