# tools/demo-lib.sh: what the demo scripts (run-demo.sh, run-cluster.sh) share; sourced, not run.

# Waits (up to 5 s) for the process's first line naming its address, and echoes the address;
# exits when the process died first, with what it printed.
listening() {  # out-file pid name
    local _
    for _ in $(seq 1 100); do
        grep -q listening= "$1" 2>/dev/null && break
        kill -0 "$2" 2>/dev/null || { echo "$3 did not start" >&2; cat "$1" >&2; exit 1; }
        sleep 0.05
    done
    grep -o 'listening=[^ ]*' "$1" | head -n 1 | cut -d= -f2
}
