#!/usr/bin/env bash
# Bring up a Docker engine on a Debian 12 machine (root, no container registry reachable) and
# build the local test images without pulling anything. Idempotent: a second call takes ~2 s.
#
#   sudo scripts/ci_docker_setup.sh                 engine + local/busybox:ci (+ local/bookworm:ci)
#   WITH_DEBIAN=0 sudo scripts/ci_docker_setup.sh   skip the Debian image (saves ~40 s)
#
# Images:
#   local/busybox:ci   ~2 MB: busybox applets, users root and `sandbox` (uid 1000)
#   local/bookworm:ci  ~170 MB: Debian bookworm minbase + python3 (debootstrap from apt's mirror), user `sandbox` (uid 1000)
#
# dockerd is started directly (no systemd here; `service docker start` fails because the init
# script raises `ulimit -n`, which needs CAP_SYS_RESOURCE). Its log and pid are under $STATE.
set -euo pipefail
STATE=${STATE:-/tmp/ci-docker}
WITH_DEBIAN=${WITH_DEBIAN:-1}
mkdir -p "$STATE"
say() { echo "[docker-setup] $*"; }
t0=$SECONDS

# 1. packages from Debian main. --no-install-recommends keeps out apparmor/criu/needrestart;
#    policy-rc.d stops the postinst from trying to start the daemon through /etc/init.d.
need=()
command -v dockerd >/dev/null || need+=(docker.io)
[ -x /bin/busybox ] || need+=(busybox-static)
if [ "$WITH_DEBIAN" = 1 ] && ! command -v debootstrap >/dev/null; then need+=(debootstrap); fi
if [ ${#need[@]} -gt 0 ]; then
  [ -e /usr/sbin/policy-rc.d ] || { printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d; chmod +x /usr/sbin/policy-rc.d; }
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  say "installed ${need[*]} ($((SECONDS - t0)) s)"
fi

# 2. the daemon, with its defaults (overlay2, iptables, docker0 bridge).
wait_up() {  # $1 = pid
  for _ in $(seq 1 120); do
    docker info >/dev/null 2>&1 && return 0
    kill -0 "$1" 2>/dev/null || return 1
    sleep 0.25
  done
  return 1
}
if ! docker info >/dev/null 2>&1; then
  (cd / && exec setsid nohup /usr/sbin/dockerd) >"$STATE/dockerd.log" 2>&1 </dev/null &  # from /: see ci_podman_setup.sh
  echo $! >"$STATE/dockerd.pid"
  if ! wait_up "$(cat "$STATE/dockerd.pid")"; then
    say "dockerd did not come up; last lines of $STATE/dockerd.log:"
    tail -20 "$STATE/dockerd.log" >&2
    exit 1
  fi
  say "dockerd started (pid $(cat "$STATE/dockerd.pid"), log $STATE/dockerd.log)"
fi

have() { docker image inspect "$1" >/dev/null 2>&1; }

# 3. local/busybox:ci from the host's static busybox.
if ! have local/busybox:ci; then
  root="$STATE/busybox-root"
  rm -rf "$root" && mkdir -p "$root"/{bin,etc,tmp,root,home/sandbox,proc,sys,dev}
  cp /bin/busybox "$root/bin/busybox"
  for applet in $("$root/bin/busybox" --list); do
    [ "$applet" = busybox ] || ln -s busybox "$root/bin/$applet"
  done
  printf 'root:x:0:0:root:/root:/bin/sh\nsandbox:x:1000:1000:sandbox:/home/sandbox:/bin/sh\n' >"$root/etc/passwd"
  printf 'root:x:0:\nsandbox:x:1000:\n' >"$root/etc/group"
  chmod 1777 "$root/tmp"
  chown 1000:1000 "$root/home/sandbox"
  tar -C "$root" -c . | docker import -c 'ENV PATH=/bin' -c 'CMD ["/bin/sh"]' - local/busybox:ci >/dev/null
  rm -rf "$root"
  say "built local/busybox:ci"
fi

# 4. local/bookworm:ci: Debian minbase with python3, from the mirror apt already uses.
if [ "$WITH_DEBIAN" = 1 ] && ! have local/bookworm:ci; then
  t=$SECONDS
  mirror=${MIRROR:-$(awk '/^URIs:/{print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)}
  mirror=${mirror:-$(awk '$1=="deb"{print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)}
  [ -n "$mirror" ] || { say "no Debian mirror found in apt sources; set MIRROR=..."; exit 1; }
  root="$STATE/bookworm-root"
  rm -rf "$root"
  if ! debootstrap --variant=minbase --include=python3 bookworm "$root" "$mirror" >"$STATE/debootstrap.log" 2>&1; then
    say "debootstrap failed; last lines of $STATE/debootstrap.log:"
    tail -20 "$STATE/debootstrap.log" >&2
    exit 1
  fi
  rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
  # a regular user, so the sandbox's user=auto runs the default image as non-root (uid 1000)
  echo 'sandbox:x:1000:1000:sandbox:/home/sandbox:/bin/bash' >>"$root/etc/passwd"
  echo 'sandbox:x:1000:' >>"$root/etc/group"
  mkdir -p "$root/home/sandbox" && chown 1000:1000 "$root/home/sandbox"
  tar -C "$root" -c . | docker import \
    -c 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' -c 'CMD ["/bin/bash"]' \
    - local/bookworm:ci >/dev/null
  rm -rf "$root"
  say "built local/bookworm:ci ($((SECONDS - t)) s)"
fi

# 5. smoke test with the sandbox's isolation options.
docker run --rm --network none --read-only --cap-drop ALL --security-opt no-new-privileges \
  --memory 64m --pids-limit 32 --init local/busybox:ci true
say "engine ready ($((SECONDS - t0)) s)"
