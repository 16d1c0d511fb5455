"""The local sandbox (`sandbox.backend=local`): backend (the prompts' dirs), confine (bubblewrap, the uid drop, the
limits), spawn (the child processes), cgroups, mounts (the disk cap's tmpfs), seccomp, the watchdog."""
