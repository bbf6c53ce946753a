# specmon remote tail helper: follow one log by file identity and byte offset.
#
# Run by specmon over SSH as:
#   exec sh -c "<this script>" specmon-tail PATH DEV INO OFFSET POLL [AFTER [SEEN [BIRTH]]]
# (every argument quoted by the client). DEV/INO empty = start reading PATH at OFFSET;
# otherwise resume the file whose identity is DEV:INO at OFFSET: PATH itself, or the
# file it was rotated to (looked up by inode next to PATH), and only then PATH.
# AFTER (with DEV/INO empty) = the client had finished a rotated file (an R frame whose
# mtime was AFTER) but had not yet been told which file comes next when the connection
# dropped: carry on along the rotation chain from there, not from PATH (which would skip
# every file rotated in between). With DEV/INO: that file's mtime when it was opened (A),
# used only when it no longer exists (G): the files rotated after it come next. SEEN = the dev:ino of files already read to their end,
# space-separated: never read again, even when their mtime ties (file times have the
# kernel's coarse clock tick, ~4 ms, so a rotated file and the next one can share one).
#
# Everything goes to stdout as frames, in the order it happened, so the reader can
# never attribute bytes to the wrong file or offset. It starts with "\nS specmon-tail 1\n";
# then header lines are ASCII:
#   O dev ino offset namelen\n<name>  now reading the file dev:ino from offset
#   D start n\n<n bytes>              bytes [start, start+n) of that file; start <= offset:
#                                     the first (offset - start) bytes were sent before and
#                                     let the reader check the file is still the same
#   K k\n                             of those n bytes the first k are real (k < n only when
#                                     the file shrank during the read; the rest is padding)
#   T size\n                          the file shrank below the offset: reading it from 0
#   A mlen\n<mtime>[ <birth>]          follows every O: the file's mtime when it was opened (find's
#                                     %T@), and its birth time where stat can tell (%W); the
#                                     client passes them back as AFTER and BIRTH when it resumes
#                                     this file: a file gone (G) by then, or whose inode number a
#                                     new file reuses (another birth time), goes on along the chain
#   R dev ino offset mlen\n<mtime>     the path names another file now; this one was read
#                                     to its end (offset); mtime (find's %T@) orders the
#                                     rotation chain and is what the client passes as AFTER
#   G dev ino offset\n                the file to resume no longer exists anywhere we look
#   M\n                               PATH does not exist (said once until it exists again)
#   U\n                               PATH exists but cannot be opened (said once, likewise)
#   X kind\n                          fatal, then exit 3: kind is directory or notregular
#   H\n                               heartbeat while idle: a closed channel kills us on write
# Needs GNU stat (-c), GNU dd (iflag=skip_bytes,count_bytes), head -c, GNU find (-inum,
# -printf), sort, awk, sleep N.N.

set -u
LC_ALL=C
export LC_ALL
path=$1 want_dev=$2 want_ino=$3 off=$4 poll=$5 chain_after=${6-} seen=" ${7-}" want_birth=${8-}
overlap=64
chunk=1048576
cdev='' cino='' said_missing=0 idle=0
exec 4>&1
# First, a marker: anything a login script printed before it is not ours.
printf '\nS specmon-tail 1\n'

frame_open() {  # $1 = the name the file was opened by
    printf 'O %s %s %s %s\n%s' "$cdev" "$cino" "$off" "${#1}" "$1"
    m=$(find -L /dev/fd/3 -maxdepth 0 -printf '%T@' 2>/dev/null)
    birth
    [ -n "$m" ] && [ -n "$b" ] && m="$m $b"
    printf 'A %s\n%s' "${#m}" "$m"
}

birth() {  # the open file's birth time (statx) into b, to the ns where stat can; empty if unknown
    # Nanoseconds: a deleted file's inode number is often reused within the same second.
    b=$(stat -L -c '%.9W' -- /dev/fd/3 2>/dev/null)
    case $b in ''|0|0.0*|*[!0-9.]*) b=$(stat -L -c '%W' -- /dev/fd/3 2>/dev/null) ;; esac
    case $b in ''|0|*[!0-9.]*) b='' ;; esac
}

open_file() {  # open $1 on fd 3; identity into cdev/cino; non-zero when impossible
    { command exec 3<"$1"; } 2>/dev/null || return 1
    set -- $(stat -L -c '%d %i %f' -- /dev/fd/3 2>/dev/null)
    [ $# -eq 3 ] || return 1
    case $(( 0x$3 & 61440 )) in
        16384) printf 'X directory\n'; exit 3 ;;
        32768) ;;
        *) printf 'X notregular\n'; exit 3 ;;
    esac
    cdev=$1 cino=$2
}

send() {  # $1 = size of the open file (>= off): send up to one chunk after off
    n=$(( $1 - off ))
    [ "$n" -gt "$chunk" ] && n=$chunk
    ov=$off
    [ "$ov" -gt "$overlap" ] && ov=$overlap
    start=$(( off - ov ))
    total=$(( n + ov ))
    printf 'D %s %s\n' "$start" "$total"
    # Exactly $total bytes go out whatever happens to the file (padded with NULs when it
    # shrank mid-read); dd's own count of the real ones is sent after them.
    err=$( { { dd if=/dev/fd/3 bs=65536 iflag=skip_bytes,count_bytes skip="$start" count="$total" 2>&5
               head -c "$total" /dev/zero; } | head -c "$total" >&4; } 5>&1 )
    k=${err##*records out}
    k=${k#?}
    k=${k%% *}
    case $k in ''|*[!0-9]*) k=0 ;; esac
    printf 'K %s\n' "$k"
    if [ "$k" -ge "$ov" ]; then off=$(( start + k )); fi
}

open_path() {  # start on PATH (after a rotation, a loss, or at first)
    if [ -e "$path" ] && open_file "$path"; then
        said_missing=0
        frame_open "$path"
        return 0
    fi
    cdev='' cino=''
    if [ "$said_missing" = 0 ]; then
        if [ -e "$path" ]; then printf 'U\n'; else printf 'M\n'; fi
        said_missing=1
    fi
    return 1
}

next_in_chain() {  # $1 = mtime of the file just finished: "dev:ino name" of the next one
    # The oldest file next to PATH (PATH included) whose name starts with PATH's name,
    # modified no earlier than $1 and not read yet (compressed rotations are skipped).
    # ">=" and not ">": the next file's last write can fall in the same clock tick as the
    # finished one's; the finished file itself (and every earlier one) is in $seen. Ties
    # are broken by inode number (new files mostly get higher ones).
    find "$dir" -maxdepth 1 -type f -printf '%T@ %D %i %f\n' 2>/dev/null | sort -k1,1n -k3,3n |
        after="$1" seen="$seen" base="$base" awk '
            { id = $2 ":" $3; t = $1; name = $0; sub(/^[^ ]+ [^ ]+ [^ ]+ /, "", name) }
            t >= ENVIRON["after"] + 0 && index(name, ENVIRON["base"]) == 1 &&
            index(ENVIRON["seen"] " ", " " id " ") == 0 && name !~ /[.](gz|bz2|xz|zst|lz4|Z)$/ {
                print id " " name; exit
            }'
}

advance() {  # $1 = mtime of the file just finished: open the file written after it
    tries=0
    [ -n "$1" ] || tries=5  # no mtime to order by: PATH is all we can take
    while [ "$tries" -lt 5 ]; do
        next=$(next_in_chain "$1")
        [ -n "$next" ] || break
        name=${next#* }
        # Rotated again between the listing and the open: look again.
        if open_file "$dir/$name" && [ "$cdev:$cino" = "${next%% *}" ]; then
            if [ "$name" = "$base" ]; then frame_open "$path"; else frame_open "$dir/$name"; fi
            return 0
        fi
        exec 3<&-
        cdev='' cino=''
        tries=$(( tries + 1 ))
    done
    open_path || :
}

dir=$(dirname -- "$path")
case $dir in -*) dir=./$dir ;; esac
base=$(basename -- "$path")

# -- where to start --------------------------------------------------------------
if [ -n "$want_ino" ]; then
    # Open first, then check the identity on the descriptor: a rotation between looking a
    # name up and opening it would otherwise open the new file (or nothing) and report the
    # old one lost. Candidates: PATH, then every file next to it with that inode number;
    # when a candidate turned out to be another file (renamed meanwhile), look again.
    found='' tries=0
    saved_ifs=$IFS
    while [ -z "$found" ] && [ "$tries" -lt 5 ]; do
        tries=$(( tries + 1 ))
        IFS='
'
        for name in "$path" $(find "$dir" -maxdepth 1 -inum "$want_ino" -type f 2>/dev/null); do
            IFS=$saved_ifs  # the list is split already; open_file splits stat's output on spaces
            if open_file "$name" && [ "$cdev" = "$want_dev" ] && [ "$cino" = "$want_ino" ]; then
                # Same inode number, but born later: the file was deleted and the number
                # reused by a new one (WANT_BIRTH, from A): not the file to resume.
                birth
                if [ -z "$want_birth" ] || [ -z "$b" ] || [ "$b" = "$want_birth" ]; then
                    found=$name
                    break
                fi
            fi
            exec 3<&-
            cdev='' cino=''
        done
        # Nothing by that inode at all: it is gone, no need to look again.
        IFS=$saved_ifs
        [ -n "$(find "$dir" -maxdepth 1 -inum "$want_ino" -type f 2>/dev/null)" ] || break
    done
    if [ -n "$found" ]; then
        frame_open "$found"
        # Send the bytes before the offset at once, new data or not: the reader checks
        # them (an inode number reused by a new file has other bytes there).
        size=$(stat -L -c '%s' -- /dev/fd/3)
        if [ "$off" -gt 0 ] && [ "$size" -ge "$off" ]; then send "$size"; fi
    else
        printf 'G %s %s %s\n' "$want_dev" "$want_ino" "$off"
        off=0
        # The files rotated after it are still there: go on along the chain from the lost
        # file's mtime when it was opened (AFTER), not from PATH, which would skip them.
        advance "$chain_after"
    fi
elif [ -n "$chain_after" ]; then
    # Between two files of the chain when the connection dropped (see AFTER above).
    off=0
    advance "$chain_after"
else
    if open_path; then :; else off=0; fi
fi

# -- follow ----------------------------------------------------------------------
while :; do
    if [ -z "$cino" ]; then
        off=0
        open_path || { sleep "$poll"; idle=$(( idle + 1 )); [ $(( idle % 5 )) -eq 0 ] && printf 'H\n'; continue; }
    fi
    # One stat for both: the open file (by descriptor) and what the path names now.
    set -- $(stat -L -c '%s %d %i %f' -- /dev/fd/3 "$path" 2>/dev/null)
    if [ $# -lt 4 ]; then sleep "$poll"; continue; fi
    size=$1
    if [ "$size" -lt "$off" ]; then
        printf 'T %s\n' "$size"
        off=0
        continue
    fi
    if [ "$size" -gt "$off" ]; then
        idle=0
        send "$size"
        continue
    fi
    if [ $# -ge 8 ]; then
        said_missing=0
        if [ $(( 0x$8 & 61440 )) -eq 16384 ]; then printf 'X directory\n'; exit 3; fi
        if [ "$6" != "$cdev" ] || [ "$7" != "$cino" ]; then
            # The path names another file. Read what reached the old one up to now
            # (a stat taken after the switch was seen), then move on.
            size=$(stat -L -c '%s' -- /dev/fd/3)
            if [ "$size" -gt "$off" ]; then continue; fi
            mtime=$(find -L /dev/fd/3 -maxdepth 0 -printf '%T@' 2>/dev/null)
            printf 'R %s %s %s %s\n%s' "$cdev" "$cino" "$off" "${#mtime}" "$mtime"
            exec 3<&-
            seen="$seen $cdev:$cino"
            cdev='' cino='' off=0
            # Usually the next file is the new PATH; after more than one rotation since the
            # last look (a long disconnection) the rotated files in between come first,
            # oldest first.
            advance "$mtime"
            continue
        fi
    elif [ "$said_missing" = 0 ]; then
        printf 'M\n'
        said_missing=1
    fi
    sleep "$poll"
    idle=$(( idle + 1 ))
    [ $(( idle % 5 )) -eq 0 ] && printf 'H\n'
done
