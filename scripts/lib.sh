# Shell helpers shared by the test script and the benchmarks. Source it; it defines functions only.

# Installs the Debian packages that are missing (apt-get update first, once).
apt_install() {
  local missing=()
  for pkg in "$@"; do
    dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "installing: ${missing[*]}" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
}

# Makes a temporary directory ($work) and an empty list of started processes ($pids); at exit,
# every PID added to the list is stopped and waited for, and the directory removed.
start_work() {
  work=$(mktemp -d)
  pids=()
  trap stop_work EXIT
}

stop_work() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}

# Waits up to 10 s for something to listen on 127.0.0.1:PORT.
wait_port() {
  for _ in $(seq 200); do
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
    sleep 0.05
  done
  echo "nothing listens on 127.0.0.1:$1" >&2
  return 1
}

# Waits up to 30 s for URL to answer 200.
wait_http() {
  for _ in $(seq 600); do
    curl -sf -o /dev/null "$1" && return 0
    sleep 0.05
  done
  echo "$1 did not answer 200" >&2
  return 1
}

# "utime+stime stime", in clock ticks, summed over the given PIDs (all their threads).
cpu_ticks() {
  local total=0 sys=0 stat
  for pid in "$@"; do
    stat=$(cat "/proc/$pid/stat")
    stat=${stat##*) }
    # After the command name: fields 3.. ; utime and stime are fields 14 and 15.
    set -- $stat
    total=$((total + ${12} + ${13}))
    sys=$((sys + ${13}))
  done
  echo "$total $sys"
}

# Peak resident set (VmHWM, KiB) summed over the given PIDs.
peak_rss() {
  local total=0 kib
  for pid in "$@"; do
    kib=$(awk '/^VmHWM:/ {print $2}' "/proc/$pid/status")
    total=$((total + kib))
  done
  echo "$total"
}

# Current resident set (VmRSS, KiB) of one PID.
current_rss() {
  awk '/^VmRSS:/ {print $2}' "/proc/$1/status"
}
