# shellcheck shell=sh
# specmon-alive PIDFILE PID START: is the server specmon recorded still running? Read-only.
# exit 0: running and still named by PIDFILE; 3: gone (or its PID reused); 4: running but
# PIDFILE names another process now; 2: bad arguments.
pidfile=$(hostpath "$1") pid=$2 start=$3
say() { echo "specmon-alive $*"; }
if ! isnum "$pid" || ! isnum "$start"; then say result=refused reason=malformed; exit 2; fi
if ! alive "$pid" "$start"; then say result=gone pid="$pid"; exit 3; fi
fpid='' fstart=''
if [ -f "$pidfile" ] && [ ! -L "$pidfile" ] && [ -O "$pidfile" ]; then read -r fpid fstart _ < "$pidfile" || true; fi
if [ "$fpid" != "$pid" ] || [ "$fstart" != "$start" ]; then say result=running pid="$pid" reason=pidfile-differs; exit 4; fi
say result=running pid="$pid"
