# shellcheck shell=sh
# Shared by stop.sh, start.sh, ready.sh, alive.sh and lease.sh (prepended to each).
# procinfo PID: sets st (state), pg (process group) and stt (start time) from
# /proc/PID/stat; the comm field may hold spaces and ')' so split after the
# last ') '. alive PID START: the process exists, is not a zombie and has the
# recorded start time.
procinfo() {
  line=
  { read -r line < "/proc/$1/stat"; } 2>/dev/null
  [ -n "$line" ] || return 1
  rest=${line##*) }
  # Split the stat fields on purpose (globbing is off).
  # shellcheck disable=SC2086
  set -f; set -- $rest; set +f
  # pg is read by stop.sh only.
  # shellcheck disable=SC2034
  st=$1 pg=$3 stt=${20}
}
alive() { procinfo "$1" && [ "$st" != Z ] && [ "$st" != X ] && [ "$stt" = "$2" ]; }
isnum() { case $1 in ''|*[!0-9]*) return 1;; esac; }
# hostpath PATH: a path that starts with ~/ is in the user's home on this host (the client
# cannot know it); printed on stdout. Paths never hold a newline (specmon refuses them).
# shellcheck disable=SC2088
hostpath() { case $1 in '~/'*) printf '%s\n' "$HOME/${1#??}";; *) printf '%s\n' "$1";; esac; }
# pidfile_safe PIDFILE RAW: may specmon read and (re)write PIDFILE? Sets why when not.
# In the home (RAW starts with ~/, the default ~/.cache/specmon/run) its folder is made 0700
# and must be ours and closed to others; anywhere, the file must not be a symlink and, when it
# exists, must be a regular file owned by us: one planted by another user is never trusted.
# why is read by the script that calls it.
# shellcheck disable=SC2034,SC2088
pidfile_safe() {
  why=
  dir=$(dirname -- "$1")
  case $2 in
    '~/'*)
      if [ ! -e "$dir" ] && ! (umask 077 && mkdir -p -- "$dir") 2>/dev/null; then why='rundir-not-creatable'; return 1; fi
      if [ -L "$dir" ] || [ ! -d "$dir" ] || [ ! -O "$dir" ]; then why='rundir-not-owned'; return 1; fi
      case $(ls -ld -- "$dir" 2>/dev/null) in
        d???------*) ;;
        *) why='rundir-not-private'; return 1;;
      esac;;
  esac
  if [ -L "$1" ]; then why='pidfile-symlink'; return 1; fi
  if [ -e "$1" ] && { [ ! -f "$1" ] || [ ! -O "$1" ]; }; then why='pidfile-not-owned'; return 1; fi
  return 0
}
# log_safe LOG: may a start write LOG (and move an earlier one aside)? Sets why when not.
# Not a symlink; when it exists, a regular file of ours (one planted in a shared folder by
# another user is refused); its folder exists and is writable by us.
# shellcheck disable=SC2034
log_safe() {
  why=
  if [ -L "$1" ]; then why='log-symlink'; return 1; fi
  if [ -e "$1" ] && { [ ! -f "$1" ] || [ ! -O "$1" ]; }; then why='log-not-owned'; return 1; fi
  ldir=$(dirname -- "$1")
  if [ ! -d "$ldir" ] || [ ! -w "$ldir" ]; then why='log-not-writable'; return 1; fi
  return 0
}
