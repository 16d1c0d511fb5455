"""The Docker sandbox (`sandbox.backend=docker`; Podman's builds on it): backend, spec (a container from its image
and the options), the per-call exec, the long-lived shell, images, the warm pool, orphans, procs, the watchdog."""
