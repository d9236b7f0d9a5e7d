# device_lib.sh — sourced by the tools/device_*.sh scripts that start a
# cluster.
#
# device_setup LOCAL
#   on the device (LOCAL empty): tools/device_env.sh (the carried Vulkan
#   loader and libraries, $OUT); with LOCAL set (a run here, on lavapipe):
#   only $OUT. Then a private runtime directory for the clusters
#   ($XDG_RUNTIME_DIR, default /tmp/xdg).
device_setup() {
	if [ -z "$1" ]; then
		. tools/device_env.sh
	else
		OUT=${OUT:-/tmp/out}
		mkdir -p "$OUT"
	fi
	export XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-/tmp/xdg}
	mkdir -p "$XDG_RUNTIME_DIR" && chmod 700 "$XDG_RUNTIME_DIR"
}

# cluster_wait_ready URL PID DEADLINE
#   polls URL/health every 0.5 s until it answers 200 (return 0), the
#   unicorn-up process PID is gone or the epoch second DEADLINE passes
#   (return 1). A cluster that loads a large model takes minutes: the caller
#   picks the deadline from its own budget.
cluster_wait_ready() {
	local url=$1 pid=$2 deadline=$3
	while [ "$(date +%s)" -lt "$deadline" ]; do
		kill -0 "$pid" 2>/dev/null || return 1
		if python3 -c "import urllib.request,sys; sys.exit(urllib.request.urlopen('$url/health', timeout=2).status != 200)" 2>/dev/null; then
			return 0
		fi
		sleep 0.5
	done
	return 1
}
