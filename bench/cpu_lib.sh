# bench/cpu_lib.sh: the CPU time of what a bench runs, sourced by the node benches, so that a report
# can say what a request costs each process (the server, its load generator) and what the
# machine's CPUs allow: with clients and servers on the same cores, a rate is bounded by the
# cores divided by the CPU all of them spend on one request.
#
# Times are in clock ticks (getconf CLK_TCK, 100 a second on Linux), user and system together.

cpu_clk_tck=$(getconf CLK_TCK)

# A live process's ticks, its threads' included.
proc_ticks() {  # pid
    local stat
    local -a f
    stat=$(<"/proc/$1/stat")
    stat=${stat##*) }  # after the command name, which may hold spaces
    read -r -a f <<<"$stat"
    echo $((f[11] + f[12]))  # utime, stime (fields 14, 15 of proc(5))
}

# A process tree's ticks: the root's own and those of its children it has reaped (cutime,
# cstime: a PostgreSQL backend's time joins the postmaster's when it is reaped), and each live
# child's. Read it once nothing of the tree exits in between.
tree_ticks() {  # pid
    local root=$1 stat sum p
    local -a f
    stat=$(<"/proc/$root/stat")
    stat=${stat##*) }
    read -r -a f <<<"$stat"
    sum=$((f[11] + f[12] + f[13] + f[14]))
    for p in /proc/[0-9]*/stat; do
        { read -r stat <"$p"; } 2>/dev/null || continue  # gone meanwhile
        stat=${stat##*) }
        read -r -a f <<<"$stat"
        ((f[1] == root)) && sum=$((sum + f[11] + f[12]))
    done
    echo "$sum"
}

# How many live children a process has.
child_count() {  # pid
    local n=0 p stat
    local -a f
    for p in /proc/[0-9]*/stat; do
        { read -r stat <"$p"; } 2>/dev/null || continue  # gone meanwhile
        stat=${stat##*) }
        read -r -a f <<<"$stat"
        ((f[1] == $1)) && n=$((n + 1))
    done
    echo "$n"
}

# Waits (up to 5 s) until a process has at most `n` live children: a client's server processes
# gone and reaped after it disconnected, so tree_ticks counts them whole.
wait_children() {  # pid n
    local i
    for ((i = 0; i < 50; i++)); do
        (($(child_count "$1") <= $2)) && return 0
        sleep 0.1
    done
    return 0
}

# The ticks in a file bash's `time` wrote with TIMEFORMAT='%3U %3S' (user and system seconds).
time_ticks() {  # file
    local user sys
    read -r user sys <"$1"
    awk -v u="$user" -v s="$sys" -v hz="$cpu_clk_tck" 'BEGIN { printf "%d", (u + s) * hz }'
}

# Microseconds a request from ticks over requests: "12.3".
us_per() {  # ticks requests
    awk -v t="$1" -v n="$2" -v hz="$cpu_clk_tck" 'BEGIN {
        if (n > 0) printf "%.1f", t / hz * 1e6 / n; else print "-" }'
}
