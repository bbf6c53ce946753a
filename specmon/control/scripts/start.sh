# shellcheck shell=sh
# specmon-start PIDFILE LOG CWD NENV -- ARGV...: start a managed server detached.
# Run after proc.sh as `sh -c SCRIPT specmon-start ARGS...`; data arrives only as arguments,
# and the environment as NENV lines NAME=VALUE on stdin: never on a command line, which
# every user of the host can read in /proc/PID/cmdline.
raw=$1 log=$2 cwd=$3 nenv=$4
shift 4
pidfile=$(hostpath "$raw")
say() { echo "specmon-start $*"; }
# SIGTERM (specmon ending in the middle of a start): before the server is launched the start ends
# there (nothing started); once it is launched the start goes on to record and report its PID, so
# the stop that follows finds it rather than a pidfile that comes later.
launched=
trap 'if [ -z "$launched" ]; then exit 143; fi' TERM
if ! isnum "$nenv" || [ "${1-}" != -- ]; then say result=refused reason=malformed; exit 2; fi
shift
while [ "$nenv" -gt 0 ]; do
  kv=
  if ! IFS= read -r kv; then say result=refused reason=env-missing; exit 2; fi
  case $kv in [A-Za-z_]*=*) ;; *) say result=refused reason=env-malformed; exit 2;; esac
  name=${kv%%=*}
  case $name in *[!A-Za-z0-9_]*) say result=refused reason=env-malformed; exit 2;; esac
  # shellcheck disable=SC2163
  export "$kv"
  nenv=$((nenv - 1))
done
if ! pidfile_safe "$pidfile" "$raw"; then say result=refused reason=$why; exit 2; fi
if [ -e "$pidfile" ]; then
  read -r opid ostart _ < "$pidfile" || true
  if isnum "$opid" && isnum "$ostart" && alive "$opid" "$ostart"; then
    say result=refused reason=already-running pid=$opid; exit 2
  fi
  rm -f -- "$pidfile"
fi
if ! log_safe "$log"; then say result=refused reason=$why; exit 2; fi
if [ -n "$cwd" ] && ! cd "$cwd" 2>/dev/null; then say result=failed reason=cwd-missing; exit 2; fi
# A new log is for its owner only: a server may print its own arguments (an --api-key).
if ! ( umask 077; : >> "$log" ) 2>/dev/null; then say result=failed reason=log-not-writable; exit 2; fi
if ! command -v "$1" >/dev/null 2>&1; then say result=failed reason=command-not-found; exit 2; fi
if ! setsid -f true < /dev/null > /dev/null 2>&1; then say result=failed reason=setsid-without-fork-option; exit 2; fi
# Never destroy a log: a non-empty one is moved aside to LOG.<UTC time> (with
# .N when that name is taken), so the new run starts a new file from byte 0
# and the earlier run stays whole beside it.
if [ -s "$log" ]; then
  stamp=$(date -u +%Y%m%dT%H%M%SZ)
  kept="$log.$stamp" n=1
  while [ -e "$kept" ] || [ -L "$kept" ]; do kept="$log.$stamp.$n"; n=$((n + 1)); done
  if ! mv -- "$log" "$kept" 2>/dev/null; then say result=failed reason=log-not-movable; exit 2; fi
  echo "specmon-start-kept $kept"
fi
( umask 077; : >> "$log" ) 2>/dev/null  # the new file, after the old one was moved aside
# setsid -f forks in the foreground: a job started with `&` would get SIGINT
# ignored for good. The new process records its own PID and start time, then
# execs the server, so the recorded PID is the server's. Its own session: no
# terminal's hang-up reaches it (no nohup, whose SIGHUP ignore the server kept).
set -- sh -c '
  line=; read -r line < "/proc/$$/stat"; rest=${line##*) }
  # shellcheck disable=SC2086
  stt=$(set -f; set -- $rest; echo "${20}"); pidfile=$1; shift 2
  tmp=$(mktemp "$pidfile.XXXXXX") || exit 125
  echo "$$ $stt" > "$tmp" && mv -f -- "$tmp" "$pidfile" || exit 125
  exec "$@"' specmon-server "$pidfile" -- "$@"
# Default signal dispositions and an empty signal mask, whatever this shell inherited: under
# `nohup specmon sweep ... &` HUP, INT and QUIT arrive ignored, an ignored signal stays ignored
# across exec, and POSIX sh cannot undo an ignore it started with (`trap - INT` does not). So the
# recording shell is started through perl (essential on Debian) or python3, which reset both and
# exec it (the same PID); else coreutils' env --default-signal (8.31+: the dispositions only).
# Said in the result: signals=default, dispositions (the mask as inherited) or inherited.
# shellcheck disable=SC2016
perl_reset='use POSIX (); POSIX::sigaction($_, POSIX::SigAction->new("DEFAULT")) for 1 .. 64;
  POSIX::sigprocmask(POSIX::SIG_SETMASK(), POSIX::SigSet->new()) or exit 125;
  exec { $ARGV[0] } @ARGV or exit 125'
python_reset='import os, signal, sys
for s in range(1, signal.NSIG):
    try:
        signal.signal(s, signal.SIG_DFL)
    except (OSError, ValueError, RuntimeError):
        pass
signal.pthread_sigmask(signal.SIG_SETMASK, ())
os.execvp(sys.argv[1], sys.argv[1:])'
if command -v perl >/dev/null 2>&1 && perl -MPOSIX -e 1 >/dev/null 2>&1; then
  signals=default; set -- perl -e "$perl_reset" "$@"
elif command -v python3 >/dev/null 2>&1; then
  signals=default; set -- python3 -c "$python_reset" "$@"
elif env --default-signal true >/dev/null 2>&1; then
  signals=dispositions; set -- env --default-signal "$@"
else
  signals=inherited
fi
launched=1
setsid -f "$@" < /dev/null >> "$log" 2>&1
i=0
while [ ! -s "$pidfile" ] && [ "$i" -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
pid='' start=''
if [ -s "$pidfile" ]; then read -r pid start _ < "$pidfile" || true; fi
if ! isnum "$pid"; then say result=failed reason=no-pidfile; exit 1; fi
say result=started pid=$pid starttime=$start signals=$signals
