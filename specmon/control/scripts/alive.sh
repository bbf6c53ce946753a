# shellcheck shell=sh
# specmon-alive PIDFILE PID START [LOG]: is the server specmon recorded still running? Read-only.
# exit 0: running and still named by PIDFILE; 3: gone (or its PID reused), then the last 40
# lines of LOG (its cause); 4: running but PIDFILE names another process now; 2: bad arguments.
pidfile=$(hostpath "$1") pid=$2 start=$3 log=${4-}
say() { echo "specmon-alive $*"; }
if ! isnum "$pid" || ! isnum "$start"; then say result=refused reason=malformed; exit 2; fi
if ! alive "$pid" "$start"; then
  say result=gone pid="$pid"
  if [ -n "$log" ] && [ -f "$log" ] && [ -r "$log" ]; then
    partial=0
    [ -n "$(tail -c 1 -- "$log" 2>/dev/null)" ] && partial=1
    say log-tail lines="$(wc -l < "$log" | tr -d ' ')" partial=$partial
    tail -n 40 -- "$log" 2>/dev/null | cut -c 1-2000
  fi
  exit 3
fi
fpid='' fstart=''
if [ -f "$pidfile" ] && [ ! -L "$pidfile" ] && [ -O "$pidfile" ]; then read -r fpid fstart _ < "$pidfile" || true; fi
if [ "$fpid" != "$pid" ] || [ "$fstart" != "$start" ]; then say result=running pid="$pid" reason=pidfile-differs; exit 4; fi
say result=running pid="$pid"
