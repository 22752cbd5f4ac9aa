#!/bin/sh
# Installs eim-agent as a service on a device whose OS is already installed
# (docs/workloads-agent.md):
#
#   sudo ./install.sh --binary ./eim-agent --config ./agent.json \
#        [--containers-conf ./containers.conf] [--flags "--pod-network none"]
#
# --config is the agent's configuration (url, caCertPem, clientId,
# clientSecret, hostId, project), as provisioning writes it; it is
# installed as /etc/eim/agent.json, root's alone. --containers-conf, when
# given, becomes /etc/eim/containers.conf and is passed to podman.
# --root DIR installs under DIR instead of / (for images and tests);
# --no-start installs without enabling and starting the service (done
# too when systemd is not PID 1). Running it again upgrades in place.
set -eu

usage() {
	sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//' >&2
	exit 2
}

binary= config= conf= flags= root= start=yes
while [ $# -gt 0 ]; do
	case $1 in
	--binary) binary=${2:?--binary needs a file}; shift 2 ;;
	--config) config=${2:?--config needs a file}; shift 2 ;;
	--containers-conf) conf=${2:?--containers-conf needs a file}; shift 2 ;;
	--flags) flags=${2?--flags needs a value}; shift 2 ;;
	--root) root=${2:?--root needs a directory}; shift 2 ;;
	--no-start) start=no; shift ;;
	-h|--help) usage ;;
	*) echo "install.sh: unknown argument $1" >&2; usage ;;
	esac
done
[ -n "$binary" ] || { echo "install.sh: --binary is required" >&2; usage; }
[ -n "$config" ] || { echo "install.sh: --config is required" >&2; usage; }
[ -x "$binary" ] || { echo "install.sh: --binary $binary is not an executable file" >&2; exit 1; }
[ -r "$config" ] || { echo "install.sh: --config $config cannot be read" >&2; exit 1; }
[ -z "$conf" ] || [ -r "$conf" ] || { echo "install.sh: --containers-conf $conf cannot be read" >&2; exit 1; }
for key in url clientId clientSecret; do
	grep -q "\"$key\"" "$config" || { echo "install.sh: --config $config has no \"$key\"" >&2; exit 1; }
done
if [ -z "$root" ] && [ "$(id -u)" != 0 ]; then
	echo "install.sh: run as root (the agent runs podman and host actions as root)" >&2
	exit 1
fi
case $flags in *"'"*|*'"'*|*'\'*) echo "install.sh: --flags must not contain quotes or backslashes" >&2; exit 1 ;; esac

here=$(cd "$(dirname "$0")" && pwd)
umask 022
mkdir -p "$root/usr/local/bin" "$root/etc/systemd/system" "$root/etc/eim" "$root/var/lib/eim-agent"
chmod 0700 "$root/var/lib/eim-agent"
# A new binary beside the old, then renamed: a running agent keeps its own.
cp "$binary" "$root/usr/local/bin/.eim-agent.new"
chmod 0755 "$root/usr/local/bin/.eim-agent.new"
mv -f "$root/usr/local/bin/.eim-agent.new" "$root/usr/local/bin/eim-agent"
(umask 077 && cp "$config" "$root/etc/eim/.agent.json.new")
chmod 0600 "$root/etc/eim/.agent.json.new"
mv -f "$root/etc/eim/.agent.json.new" "$root/etc/eim/agent.json"
if [ -n "$conf" ]; then
	cp "$conf" "$root/etc/eim/containers.conf"
	chmod 0644 "$root/etc/eim/containers.conf"
	flags="--containers-conf /etc/eim/containers.conf${flags:+ $flags}"
fi
printf 'EIM_AGENT_FLAGS="%s"\n' "$flags" > "$root/etc/eim/agent.env"
chmod 0644 "$root/etc/eim/agent.env"
cp "$here/eim-agent.service" "$root/etc/systemd/system/eim-agent.service"
chmod 0644 "$root/etc/systemd/system/eim-agent.service"

if [ "$start" = no ] || [ -n "$root" ]; then
	echo "installed under ${root:-/}; start with: systemctl daemon-reload && systemctl enable --now eim-agent"
	exit 0
fi
if [ ! -d /run/systemd/system ]; then
	echo "installed; systemd is not running here: start it with" >&2
	echo "  /usr/local/bin/eim-agent node --config /etc/eim/agent.json --state-dir /var/lib/eim-agent $flags" >&2
	exit 0
fi
systemctl daemon-reload
systemctl enable eim-agent.service
systemctl restart eim-agent.service
echo "eim-agent installed and started: journalctl -u eim-agent -f"
