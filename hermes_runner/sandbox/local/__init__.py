"""The local sandbox (`sandbox.backend=local`): backend (bubblewrap per command), spawn (the child processes),
cgroups, mounts (the disk cap's tmpfs), seccomp, the watchdog."""
