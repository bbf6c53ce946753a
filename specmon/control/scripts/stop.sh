# shellcheck shell=sh
# specmon-stop PIDFILE GRACE SIGNAL [PID START [LOG CWD COMMAND]]: stop the recorded (or adopted)
# server by PID and start time. LOG, CWD and COMMAND are what the start that follows needs: checked
# first, so a start that would be refused never follows a stop (the server would be left down).
raw=$1 grace=$2 sig=$3 pid=$4 start=$5 log=${6-} cwd=${7-} cmd=${8-}
pidfile=$(hostpath "$raw")
say() { echo "specmon-stop $*"; }
group_alive() {
  for d in /proc/[0-9]*; do
    procinfo "${d#/proc/}" || continue
    if [ "$pg" = "$1" ] && [ "$st" != Z ]; then return 0; fi
  done
  return 1
}
# Checked before anything is stopped, also for an adopted server: the start that follows
# writes this pidfile, and a stop followed by a refused start leaves the server down.
if ! pidfile_safe "$pidfile" "$raw"; then say result=refused reason=$why; exit 2; fi
if [ -n "$log" ] && ! log_safe "$log"; then say result=refused reason=$why; exit 2; fi
if [ -n "$cwd" ] && [ ! -d "$cwd" ]; then say result=refused reason=cwd-missing; exit 2; fi
if [ -n "$cmd" ] && ! ( if [ -n "$cwd" ]; then cd "$cwd" || exit 1; fi; command -v "$cmd" >/dev/null 2>&1 ); then
  say result=refused reason=command-not-found; exit 2
fi
if [ -z "$pid" ]; then
  if [ ! -e "$pidfile" ]; then say result=not-running reason=no-pidfile; exit 0; fi
  read -r pid start _ < "$pidfile" || true
  from=pidfile
else
  from=adopted
fi
if ! isnum "$pid" || ! isnum "$start"; then say result=refused reason=pidfile-malformed; exit 2; fi
if ! alive "$pid" "$start"; then
  reason=exited
  if procinfo "$pid" && [ "$stt" != "$start" ]; then reason='pid-reused'; fi
  if [ "$from" = pidfile ]; then rm -f -- "$pidfile"; fi
  say result=not-running reason=$reason pid=$pid
  exit 0
fi
# Our pidfile names a process of ours: one of another user is not the server specmon started.
if [ "$from" = pidfile ] && [ ! -O "/proc/$pid" ]; then say result=refused reason=not-our-process pid=$pid; exit 2; fi
procinfo "$pid"
group=
if [ "$pg" = "$pid" ]; then group=1; fi
# A server started from a non-interactive shell with `&` inherits SIGINT
# ignored and cannot un-ignore it; send TERM instead of waiting for nothing.
if [ "$sig" = INT ]; then
  mask=$(sed -n 's/^SigIgn:[[:space:]]*//p' "/proc/$pid/status" 2>/dev/null)
  case $mask in *[!0-9a-fA-F]*|'') ;; *) if [ $(( 0x$mask & 2 )) -ne 0 ]; then sig=TERM; fi;; esac
fi
if ! kill -s "$sig" "$pid" 2>/dev/null; then say result=failed reason=signal-denied pid=$pid; exit 1; fi
gone() {
  alive "$pid" "$start" && return 1
  if [ -n "$group" ] && [ -z "$group_empty" ]; then
    if group_alive "$pid"; then return 1; fi
    group_empty=1
  fi
  return 0
}
group_empty=
result=stopped
# In twentieths of a second: looked at every 0.05 s for the first second (the demo's server is
# gone 0.1 s after its signal; a 0.2 s tick was most of a closed terminal's second), then 0.2 s.
i=0
ticks=$((grace * 20))
while ! gone; do
  if [ "$i" -ge "$ticks" ]; then
    result=killed
    if [ -n "$group" ] && [ -z "$group_empty" ]; then kill -s KILL -- "-$pid" 2>/dev/null
    else kill -s KILL "$pid" 2>/dev/null; fi
    j=0
    while ! gone && [ "$j" -lt 50 ]; do sleep 0.2; j=$((j + 1)); done
    if ! gone; then say result=failed reason=still-alive pid=$pid signal=KILL; exit 1; fi
    break
  fi
  if [ "$i" -lt 20 ]; then sleep 0.05; i=$((i + 1)); else sleep 0.2; i=$((i + 4)); fi
done
if [ "$from" = pidfile ]; then rm -f -- "$pidfile"; fi
say result=$result pid=$pid signal=$sig
