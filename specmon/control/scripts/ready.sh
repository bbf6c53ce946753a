# shellcheck shell=sh
# specmon-ready PIDFILE LOG MARKER URL: exit 0 ready, 1 not yet, 3 the server is gone.
pidfile=$(hostpath "$1") log=$2 marker=$3 url=$4
say() { echo "specmon-ready $*"; }
exited() {
  say result=exited
  # Its last words name the cause (a command-line error, a traceback): the live tail of the
  # log may not have delivered them when the process is already gone, so send them here.
  # lines = the log's newlines, partial=1 when its last line has none; then its last 40 lines.
  if [ -n "$log" ] && [ -f "$log" ] && [ -r "$log" ]; then
    partial=0
    [ -n "$(tail -c 1 -- "$log" 2>/dev/null)" ] && partial=1
    say log-tail lines="$(wc -l < "$log" | tr -d ' ')" partial=$partial
    tail -n 40 -- "$log" 2>/dev/null | cut -c 1-2000
  fi
  exit 3
}
if [ -n "$pidfile" ]; then
  pid='' start=''
  if [ -f "$pidfile" ] && [ ! -L "$pidfile" ] && [ -O "$pidfile" ]; then read -r pid start _ < "$pidfile" || true; fi
  if ! isnum "$pid" || ! isnum "$start" || ! alive "$pid" "$start"; then exited; fi
fi
healthy() {
  if command -v curl >/dev/null 2>&1; then
    curl -fsS --noproxy '*' -m 5 -o /dev/null "$url" >/dev/null 2>&1
  elif command -v python3 >/dev/null 2>&1; then
    python3 -c 'import sys, urllib.request as u
u.build_opener(u.ProxyHandler({})).open(sys.argv[1], timeout=5)' "$url" >/dev/null 2>&1
  else
    say result=error reason=no-http-client; exit 4
  fi
}
if [ -n "$marker" ] && ! grep -F -q -e "$marker" "$log" 2>/dev/null; then
  # Healthy without the marker, for long, means a wrong ready_marker (or log): specmon says so.
  if [ -n "$url" ] && healthy; then say result=waiting reason=marker health=ok; exit 1; fi
  say result=waiting reason=marker; exit 1
fi
if [ -n "$url" ] && ! healthy; then say result=waiting reason=health; exit 1; fi
say result=ready
