"""The Docker sandbox (`sandbox.backend=docker`; Podman's backend builds on it): backend, the per-call exec, the
long-lived shell, images, the warm pool, labels and orphans, the processes seen from the host, the watchdog."""
