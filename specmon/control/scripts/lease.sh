# shellcheck shell=sh
# specmon-lease PIDFILE INFO: hold the lease on the server PIDFILE names while stdin stays open.
# One controller per server: a lock file beside the pidfile (PIDFILE.lock), flock'ed by this
# shell for as long as specmon keeps the channel open; closing it (the action ended) or losing
# the connection (sshd ends the session) releases it, and nothing is left behind to go stale.
# INFO (pid=... host=... since=... action=..., made of plain characters by specmon) is written
# into the lock file for the next instance to show. Prints one result line:
#   result=acquired; result=held <holder's INFO> (exit 3); result=refused reason=... (exit 2);
#   result=unsupported reason=no-flock (exit 4: the host has no flock; the client lease stands).
raw=$1 info=$2
pidfile=$(hostpath "$raw")
lock="$pidfile.lock"
say() { echo "specmon-lease $*"; }
if ! command -v flock >/dev/null 2>&1; then say result=unsupported reason=no-flock; exit 4; fi
if ! pidfile_safe "$pidfile" "$raw"; then say result=refused reason="$why"; exit 2; fi
if [ -L "$lock" ] || { [ -e "$lock" ] && { [ ! -f "$lock" ] || [ ! -O "$lock" ]; }; }; then
  say result=refused reason=lock-not-owned; exit 2
fi
umask 077  # the lock file names who holds it: for no one else
if ! exec 9>>"$lock"; then say result=refused reason=lock-not-writable; exit 2; fi
if ! flock -n 9; then
  holder=$(head -n 1 -- "$lock" 2>/dev/null | cut -c 1-300 | tr -cd 'A-Za-z0-9=._:@ -')
  say result=held "$holder"
  exit 3
fi
printf '%s\n' "$info" > "$lock"
say result=acquired
# Held until specmon closes stdin (or the connection goes).
cat > /dev/null
: > "$lock"
