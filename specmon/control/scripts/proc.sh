# shellcheck shell=sh
# Shared by stop.sh, start.sh and ready.sh (prepended to each).
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
