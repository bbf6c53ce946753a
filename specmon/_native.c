/* specmon's C extension: the bulk path's template pass (below, with Scanner), and the loops the
 * feeding and reading processes ran per value in Python (gap_average, digit_run, at the end),
 * and the workers' malloc setting (keep_freed_memory).
 * It sits at the package's top, beside no layer: the parse (ingest), the session (model) and the
 * recording reader (output) all use it, each with a Python fallback for a build without it.
 *
 * The template pass: re.split of "\n(?:T1|T2|...)(?=\n)" over a piece, made columns.
 *
 * Why C: Python's re reads a 180-byte SGLang decode line through its template in about
 * 1.2 us (17.9 ms for a 4 MB piece of 14,600 such lines, measured), and that pass is the
 * largest part of summarize's time; pcre2 (PyPI) and polars' str.extract were measured
 * slower or no faster (specmon/ingest/scan.py says by how much).
 *
 * A program is built by specmon/ingest/scan.py from a template's regex text, for the
 * closed subset of regex syntax the grammar writes (literals, classes with counts,
 * groups with alternatives, ? and * on groups, a negative look-ahead of one class).
 * Matching backtracks as re does, in the same order (see match()), so a line is read
 * with the groups re gives it.
 *
 * Safety invariants (the input is bytes from remote hosts; .ci/sanitize runs every test that
 * drives this file, and a hostile-bytes corpus with 100 MB lines, NULs, cut UTF-8 and deep
 * nesting, under AddressSanitizer and UndefinedBehaviorSanitizer in CI):
 * - Input is read only through (pointer, length) pairs taken from bytes objects the caller
 *   holds for the call; nothing scans for a NUL, and every index is checked against its end
 *   before the byte at it is read (MAY_START, the loops' `p < end` tests).
 * - Backtracking recursion is bounded: past MAX_DEPTH nested trials a line is left unread
 *   (overflow) and the Python path reads it; the C stack never grows with the input.
 * - Every buffer that output is written to is sized before the write (Py_ssize_t arithmetic
 *   on lengths that fit the input) and grown with PyMem_Realloc / _PyBytes_Resize whose
 *   failure ends the call with MemoryError; nothing is written past its size.
 * - Lists of captured values are bounded (MAX_ITEMS) and the shape table has a fixed number
 *   of slots (SKEL_SLOTS); a line past either bound is left to Python.
 * - A refcount is taken for every object kept or returned, and released on every error path.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h> /* memmem: pyconfig.h sets _GNU_SOURCE on glibc */
#include <limits.h>
#include <stdint.h>
#ifdef __SSE2__
#include <emmintrin.h> /* count_byte */
#endif
#ifdef __GLIBC__
#include <malloc.h> /* mallopt: keep_freed_memory */
#endif

#define IN(set, c) ((set)[(c) >> 3] & (1u << ((c) & 7)))

enum { N_LIT = 0, N_RUN = 1, N_ALT = 2, N_REP = 3, N_NLA = 4, N_END = 5, N_NOT = 6, N_GRP = 7, N_OPT = 8 };
/* N_GRP and N_OPT hold a sequence that matches one way only (scan.py's _det: literals, counts
 * that never give back, and such groups and options inside): a capture group, and an optional
 * part that what follows cannot begin like. Matched in place, without a frame or a nested trial:
 * a match that fails past them goes back to a choice point before them, as it would anyway. */

typedef struct Seq Seq;

typedef struct {
    int type;
    unsigned char *lit; /* N_LIT */
    Py_ssize_t len;
    unsigned char set[32]; /* N_RUN, N_NLA: a bit per byte value */
    unsigned char tab[256]; /* N_RUN: the same set, a byte per byte value (one load a character) */
    Py_ssize_t min, max;   /* N_RUN, N_REP: max < 0 is unbounded */
    int back;              /* N_RUN: gives characters back to what follows it in its sequence */
    int cap;               /* N_ALT: the group it captures, -1 for none */
    int cap_lo, cap_hi;    /* N_ALT, N_REP: the groups inside, reset when it fails */
    int nseq;
    Seq *seqs; /* N_ALT, N_NOT: the alternatives; N_REP: one body */
} Node;

struct Seq {
    int n;
    Node *nodes;
    int any;               /* 0: a match starts with a byte of first (and needs one) */
    unsigned char first[32];
};

static void free_seq(Seq *q);

static void free_node(Node *nd) {
    PyMem_Free(nd->lit);
    if (nd->seqs != NULL) {
        for (int i = 0; i < nd->nseq; i++) free_seq(&nd->seqs[i]);
        PyMem_Free(nd->seqs);
    }
}

static void free_seq(Seq *q) {
    if (q->nodes != NULL) {
        for (int i = 0; i < q->n; i++) free_node(&q->nodes[i]);
        PyMem_Free(q->nodes);
    }
    q->nodes = NULL;
    q->n = 0;
}

static int build_seq(PyObject *list, Seq *out, int ngroups);

static int set_from(PyObject *obj, unsigned char set[32]) {
    if (!PyBytes_Check(obj) || PyBytes_GET_SIZE(obj) != 32) {
        PyErr_SetString(PyExc_ValueError, "a class is 32 bytes");
        return -1;
    }
    memcpy(set, PyBytes_AS_STRING(obj), 32);
    return 0;
}

static int check_caps(int lo, int hi, int cap, int ngroups) {
    if (lo < 0 || hi < lo || hi > ngroups || cap < -1 || cap >= ngroups) {
        PyErr_SetString(PyExc_ValueError, "group number out of range");
        return -1;
    }
    return 0;
}

/* The alternatives of an ALT or NOT node: a non-empty list of sequences. */
static int build_alts(PyObject *alts, Node *nd, int ngroups) {
    if (!PyList_Check(alts) || PyList_GET_SIZE(alts) < 1) {
        PyErr_SetString(PyExc_ValueError, "alternatives are a non-empty list");
        return -1;
    }
    nd->nseq = (int)PyList_GET_SIZE(alts);
    nd->seqs = PyMem_Calloc(nd->nseq, sizeof(Seq));
    if (nd->seqs == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (int i = 0; i < nd->nseq; i++)
        if (build_seq(PyList_GET_ITEM(alts, i), &nd->seqs[i], ngroups) < 0) return -1;
    return 0;
}

/* The groups inside a node (t[at], t[at + 1]) and its one sequence (t[at + 2]): N_REP, N_OPT. */
static int build_body(PyObject *t, int at, Node *nd, int ngroups) {
    nd->cap_lo = (int)PyLong_AsLong(PyTuple_GET_ITEM(t, at));
    nd->cap_hi = (int)PyLong_AsLong(PyTuple_GET_ITEM(t, at + 1));
    if (PyErr_Occurred() || check_caps(nd->cap_lo, nd->cap_hi, -1, ngroups) < 0) return -1;
    nd->nseq = 1;
    nd->seqs = PyMem_Calloc(1, sizeof(Seq));
    if (nd->seqs == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    return build_seq(PyTuple_GET_ITEM(t, at + 2), &nd->seqs[0], ngroups);
}

/* One node from its tuple (see scan.py's _Compiler for the forms). */
static int build_node(PyObject *t, Node *nd, int ngroups) {
    memset(nd, 0, sizeof(*nd));
    nd->cap = -1;
    if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) < 2) {
        PyErr_SetString(PyExc_ValueError, "a node is a tuple");
        return -1;
    }
    long type = PyLong_AsLong(PyTuple_GET_ITEM(t, 0));
    if (type == -1 && PyErr_Occurred()) return -1;
    nd->type = (int)type;
    Py_ssize_t size = PyTuple_GET_SIZE(t);
    switch (type) {
    case N_LIT: {
        PyObject *b = PyTuple_GET_ITEM(t, 1);
        if (!PyBytes_Check(b)) {
            PyErr_SetString(PyExc_ValueError, "a literal is bytes");
            return -1;
        }
        nd->len = PyBytes_GET_SIZE(b);
        nd->lit = PyMem_Malloc(nd->len ? nd->len : 1);
        if (nd->lit == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        memcpy(nd->lit, PyBytes_AS_STRING(b), nd->len);
        return 0;
    }
    case N_RUN:
        if (size != 5) break;
        if (set_from(PyTuple_GET_ITEM(t, 1), nd->set) < 0) return -1;
        for (int c = 0; c < 256; c++) nd->tab[c] = IN(nd->set, c) ? 1 : 0;
        nd->min = PyLong_AsSsize_t(PyTuple_GET_ITEM(t, 2));
        nd->max = PyLong_AsSsize_t(PyTuple_GET_ITEM(t, 3));
        nd->back = PyObject_IsTrue(PyTuple_GET_ITEM(t, 4));
        return PyErr_Occurred() ? -1 : 0;
    case N_END:
        return 0;
    case N_NOT: {
        if (size != 2) break;
        return build_alts(PyTuple_GET_ITEM(t, 1), nd, ngroups);
    }
    case N_NLA:
        if (size != 2) break;
        return set_from(PyTuple_GET_ITEM(t, 1), nd->set);
    case N_ALT: {
        if (size != 5) break;
        nd->cap = (int)PyLong_AsLong(PyTuple_GET_ITEM(t, 1));
        nd->cap_lo = (int)PyLong_AsLong(PyTuple_GET_ITEM(t, 2));
        nd->cap_hi = (int)PyLong_AsLong(PyTuple_GET_ITEM(t, 3));
        if (PyErr_Occurred() || check_caps(nd->cap_lo, nd->cap_hi, nd->cap, ngroups) < 0) return -1;
        return build_alts(PyTuple_GET_ITEM(t, 4), nd, ngroups);
    }
    case N_GRP:
    case N_OPT: {
        if (size != (type == N_GRP ? 5 : 4)) break;
        if (type == N_GRP) {
            nd->cap = (int)PyLong_AsLong(PyTuple_GET_ITEM(t, 1));
            nd->cap_lo = (int)PyLong_AsLong(PyTuple_GET_ITEM(t, 2));
            nd->cap_hi = (int)PyLong_AsLong(PyTuple_GET_ITEM(t, 3));
            if (PyErr_Occurred() || check_caps(nd->cap_lo, nd->cap_hi, nd->cap, ngroups) < 0) return -1;
            if (build_alts(PyTuple_GET_ITEM(t, 4), nd, ngroups) < 0) return -1;
        } else {
            if (build_body(t, 1, nd, ngroups) < 0) return -1;
        }
        for (int b = 0; b < nd->nseq; b++) {
            /* Alternatives told apart by their first byte, which each must read, and none of
             * them shares: at most one may start anywhere, so trying it is trying them all. */
            if (nd->nseq > 1) {
                if (nd->seqs[b].any) {
                    PyErr_SetString(PyExc_ValueError, "an alternative of a one-way group without a first byte");
                    return -1;
                }
                for (int o = 0; o < b; o++)
                    for (int w = 0; w < 32; w++)
                        if (nd->seqs[b].first[w] & nd->seqs[o].first[w]) {
                            PyErr_SetString(PyExc_ValueError, "alternatives of a one-way group start alike");
                            return -1;
                        }
            }
            /* Only nodes that match one way: anything else would need the frames. */
            for (int k = 0; k < nd->seqs[b].n; k++) {
                const Node *in = &nd->seqs[b].nodes[k];
                if (!(in->type == N_LIT || in->type == N_NLA || in->type == N_END || in->type == N_GRP ||
                      in->type == N_OPT || (in->type == N_RUN && !in->back))) {
                    PyErr_SetString(PyExc_ValueError, "a node that may match two ways in a one-way group");
                    return -1;
                }
            }
        }
        return 0;
    }
    case N_REP:
        if (size != 6) break;
        nd->min = PyLong_AsSsize_t(PyTuple_GET_ITEM(t, 1));
        nd->max = PyLong_AsSsize_t(PyTuple_GET_ITEM(t, 2));
        return PyErr_Occurred() ? -1 : build_body(t, 3, nd, ngroups);
    default:
        break;
    }
    PyErr_SetString(PyExc_ValueError, "unknown node");
    return -1;
}

static int build_seq(PyObject *list, Seq *out, int ngroups) {
    if (!PyList_Check(list)) {
        PyErr_SetString(PyExc_ValueError, "a sequence is a list");
        return -1;
    }
    out->n = (int)PyList_GET_SIZE(list);
    out->nodes = PyMem_Calloc(out->n ? out->n : 1, sizeof(Node));
    if (out->nodes == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (int i = 0; i < out->n; i++) {
        if (build_node(PyList_GET_ITEM(list, i), &out->nodes[i], ngroups) < 0) {
            out->n = i + 1; /* free what was built, this node included */
            return -1;
        }
    }
    /* The bytes a match can start with, when the first node reads one for sure: an alternative
     * (or a template) that cannot start here is passed over without a trial. */
    out->any = 1;
    memset(out->first, 0, 32);
    if (out->n > 0) {
        const Node *nd = &out->nodes[0];
        if (nd->type == N_LIT && nd->len > 0) {
            out->first[nd->lit[0] >> 3] |= (unsigned char)(1u << (nd->lit[0] & 7));
            out->any = 0;
        } else if (nd->type == N_RUN && nd->min >= 1) {
            memcpy(out->first, nd->set, 32);
            out->any = 0;
        } else if (nd->type == N_GRP) {
            out->any = 0;
            for (int b = 0; b < nd->nseq; b++) {
                out->any |= nd->seqs[b].any;
                for (int w = 0; w < 32; w++) out->first[w] |= nd->seqs[b].first[w];
            }
            if (out->any) memset(out->first, 0, 32);
        }
    }
    return 0;
}

/* Whether seq q may match from p (its first byte, when it needs one). */
#define MAY_START(q, s, p, end) ((q)->any || ((p) < (end) && IN((q)->first, (s)[p])))

static void reset(Py_ssize_t *caps, int lo, int hi) {
    for (int i = lo; i < hi; i++) caps[2 * i] = caps[2 * i + 1] = -1;
}

/* What to do when a sequence ends: close a group (ALT) or an iteration (REP), then go on
 * with the sequence that holds it, from its node i. The frames live on the C stack. */
typedef struct Frame {
    const Node *nd;
    const Seq *q;
    int i;
    Py_ssize_t start; /* where the group or the iteration began */
    Py_ssize_t count; /* REP: iterations done before this one */
    const struct Frame *up;
} Frame;

typedef struct {
    const unsigned char *s;
    Py_ssize_t end;
    Py_ssize_t *caps;
    int depth;    /* nested trials (C stack frames) */
    int overflow; /* set past MAX_DEPTH: the line is left unread (the Python path reads it) */
} Ctx;

/* A line whose match would nest deeper (a repeat of thousands of items) is not read here:
 * about 200 bytes of C stack per level keeps this under 1 MB. */
#define MAX_DEPTH 4000

/* Whether s[0:n] is lit[0:n], a word to a compare: a byte at a time was an eighth of a piece's
 * instructions (the literal texts between a line's fields are most of its bytes, and most are a
 * few bytes: ", ", ": "). A length that is not a word's is read as two overlapping words. */
static inline uint64_t load8(const unsigned char *p) { uint64_t v; memcpy(&v, p, 8); return v; }
static inline uint32_t load4(const unsigned char *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static inline uint16_t load2(const unsigned char *p) { uint16_t v; memcpy(&v, p, 2); return v; }

static inline int same_text(const unsigned char *s, const unsigned char *lit, Py_ssize_t n) {
    if (n >= 8) {
        if (n > 64) return memcmp(s, lit, n) == 0;
        for (Py_ssize_t k = 0; k + 8 < n; k += 8)
            if (load8(s + k) != load8(lit + k)) return 0;
        return load8(s + n - 8) == load8(lit + n - 8);
    }
    if (n >= 4) return load4(s) == load4(lit) && load4(s + n - 4) == load4(lit + n - 4);
    if (n >= 2) return load2(s) == load2(lit) && load2(s + n - 2) == load2(lit + n - 2);
    return n == 0 || s[0] == lit[0];
}

static Py_ssize_t match(const Seq *q, int i, Py_ssize_t p, const Frame *k, Ctx *c);

/* A one-way sequence (N_GRP, N_OPT) from p: where it ends, or -1. An option that fails leaves
 * its groups unset, as re does. */
static Py_ssize_t one_way(const Seq *q, Py_ssize_t p, Ctx *c);

/* A one-way group (N_GRP) from p: the one alternative that may start there; its end or -1.
 * A group that fails unsets the groups inside it: a path tried later may not pass them. */
static Py_ssize_t one_group(const Node *nd, Py_ssize_t p, Ctx *c) {
    for (int b = 0; b < nd->nseq; b++) {
        if (!MAY_START(&nd->seqs[b], c->s, p, c->end)) continue;
        Py_ssize_t e = one_way(&nd->seqs[b], p, c);
        if (e < 0) break;
        if (nd->cap >= 0) c->caps[2 * nd->cap] = p, c->caps[2 * nd->cap + 1] = e;
        return e;
    }
    reset(c->caps, nd->cap_lo, nd->cap_hi);
    return -1;
}

/* An option (N_OPT) from p: where it ends, or p when it does not match (its groups unset). */
static Py_ssize_t one_opt(const Node *nd, Py_ssize_t p, Ctx *c) {
    Py_ssize_t e = one_way(&nd->seqs[0], p, c);
    if (e >= 0) return e;
    reset(c->caps, nd->cap_lo, nd->cap_hi);
    return p;
}

static Py_ssize_t one_way(const Seq *q, Py_ssize_t p, Ctx *c) {
    const unsigned char *s = c->s;
    for (int i = 0; i < q->n; i++) {
        const Node *nd = &q->nodes[i];
        switch (nd->type) {
        case N_LIT:
            if (c->end - p < nd->len || !same_text(s + p, nd->lit, nd->len)) return -1;
            p += nd->len;
            break;
        case N_RUN: {
            Py_ssize_t n = 0, room = c->end - p;
            if (nd->max >= 0 && nd->max < room) room = nd->max;
            while (n < room && nd->tab[s[p + n]]) n++;
            if (n < nd->min) return -1;
            p += n;
            break;
        }
        case N_NLA:
            if (p < c->end ? IN(nd->set, s[p]) : IN(nd->set, '\n')) return -1;
            break;
        case N_END:
            if (p != c->end) return -1;
            break;
        case N_GRP:
            p = one_group(nd, p, c);
            if (p < 0) return -1;
            break;
        case N_OPT:
            p = one_opt(nd, p, c);
            break;
        default:
            return -1; /* (refused when built) */
        }
    }
    return p;
}

static Py_ssize_t deeper(const Seq *q, int i, Py_ssize_t p, const Frame *k, Ctx *c) {
    if (c->overflow || c->depth >= MAX_DEPTH) {
        c->overflow = 1;
        return -1;
    }
    c->depth++;
    Py_ssize_t r = match(q, i, p, k, c);
    c->depth--;
    return r;
}

/* Match sequence q from node i at p, then whatever the frames say; the end position or -1.
 * The order of trials is the regex's (greedy counts longest first, alternatives in order,
 * one more iteration before leaving a repeat), so the first match found is the one re finds,
 * with the same groups; captures are put back when a trial fails. */
static Py_ssize_t match(const Seq *q, int i, Py_ssize_t p, const Frame *k, Ctx *c) {
    const unsigned char *s = c->s;
    for (;;) {
        if (i == q->n) {
            if (k == NULL) return p;
            const Node *nd = k->nd;
            if (nd->type == N_ALT) {
                if (nd->cap < 0) {
                    q = k->q, i = k->i, k = k->up;
                    continue;
                }
                Py_ssize_t *cap = c->caps + 2 * nd->cap;
                Py_ssize_t a = cap[0], b = cap[1];
                cap[0] = k->start, cap[1] = p;
                Py_ssize_t r = deeper(k->q, k->i, p, k->up, c);
                if (r < 0) cap[0] = a, cap[1] = b;
                return r;
            }
            /* N_REP: one more iteration first (not after an empty one), then what follows. */
            Py_ssize_t count = k->count + 1;
            if ((nd->max < 0 || count < nd->max) && p != k->start) {
                Frame f = {nd, k->q, k->i, p, count, k->up};
                Py_ssize_t r = deeper(&nd->seqs[0], 0, p, &f, c);
                if (r >= 0) return r;
            }
            if (count < nd->min) return -1;
            q = k->q, i = k->i, k = k->up;
            continue;
        }
        const Node *nd = &q->nodes[i];
        switch (nd->type) {
        case N_LIT:
            if (c->end - p < nd->len || !same_text(s + p, nd->lit, nd->len)) return -1;
            p += nd->len;
            i++;
            continue;
        case N_NLA:
            /* At the line's end the next character is its newline, as re sees it. */
            if (p < c->end ? IN(nd->set, s[p]) : IN(nd->set, '\n')) return -1;
            i++;
            continue;
        case N_NOT:
            /* None of the alternatives may match here (they read no newline: scan.py checks). */
            for (int b = 0; b < nd->nseq; b++)
                if (deeper(&nd->seqs[b], 0, p, NULL, c) >= 0 || c->overflow) return -1;
            i++;
            continue;
        case N_END:
            if (p != c->end) return -1;
            i++;
            continue;
        case N_GRP:
            p = one_group(nd, p, c);
            if (p < 0) return -1;
            i++;
            continue;
        case N_OPT:
            p = one_opt(nd, p, c);
            i++;
            continue;
        case N_RUN: {
            Py_ssize_t n = 0, room = c->end - p;
            if (nd->max >= 0 && nd->max < room) room = nd->max;
            while (n < room && nd->tab[s[p + n]]) n++;
            if (n < nd->min) return -1;
            if (!nd->back || n == nd->min) {
                p += n;
                i++;
                continue;
            }
            for (; n >= nd->min; n--) {
                Py_ssize_t r = deeper(q, i + 1, p + n, k, c);
                if (r >= 0) return r;
            }
            return -1;
        }
        case N_ALT: {
            Frame f = {nd, q, i + 1, p, 0, k};
            for (int b = 0; b < nd->nseq; b++) {
                if (!MAY_START(&nd->seqs[b], s, p, c->end)) continue;
                Py_ssize_t r = deeper(&nd->seqs[b], 0, p, &f, c);
                if (r >= 0) return r;
            }
            return -1;
        }
        case N_REP: {
            if (nd->max != 0) {
                Frame f = {nd, q, i + 1, p, 0, k};
                Py_ssize_t r = deeper(&nd->seqs[0], 0, p, &f, c);
                if (r >= 0) return r;
            }
            if (nd->min > 0) return -1;
            i++;
            continue;
        }
        default:
            return -1;
        }
    }
}

static Py_ssize_t match_seq(const Seq *q, const unsigned char *s, Py_ssize_t p, Py_ssize_t end, Py_ssize_t *caps) {
    Ctx c = {s, end, caps, 0, 0};
    Py_ssize_t r = match(q, 0, p, NULL, &c);
    return c.overflow ? -1 : r;
}

/* A text looked for again and again in one call (a needle): Boyer-Moore-Horspool, its shift
 * table made once. glibc's memmem makes its own at every call, and count_text, line_run and
 * drop_lines called it once a line: about 600 instructions of set-up a decode line. */
typedef struct {
    const unsigned char *text;
    Py_ssize_t len; /* > 0 */
    /* How far the text may move on past each byte found under its last place. */
    Py_ssize_t shift[256];
} Horspool;

static void horspool_init(Horspool *h, const unsigned char *text, Py_ssize_t len) {
    h->text = text;
    h->len = len;
    for (int b = 0; b < 256; b++) h->shift[b] = len;
    for (Py_ssize_t i = 0; i + 1 < len; i++) h->shift[text[i]] = len - 1 - i;
}

/* The first place of the text in s[0:n], or NULL. */
static const unsigned char *horspool_find(const Horspool *h, const unsigned char *s, Py_ssize_t n) {
    Py_ssize_t k = h->len;
    unsigned char last = h->text[k - 1];
    for (Py_ssize_t i = 0; i + k <= n; i += h->shift[s[i + k - 1]]) {
        if (s[i + k - 1] == last && memcmp(s + i, h->text, k - 1) == 0) return s + i;
    }
    return NULL;
}

typedef struct {
    PyObject_HEAD
    int ntemplates;
    Seq *templates;
    int *ngroups; /* per template */
    int *base;    /* the first output group of each template */
    int groups;   /* in all */
    int maxgroups;
    unsigned char *needle; /* a text every template's lines hold (scan.py finds it), or none */
    Py_ssize_t nlen;
    Horspool seek; /* the needle's search (when nlen > 0) */
} Scanner;

static void Scanner_dealloc(Scanner *self) {
    if (self->templates != NULL) {
        for (int i = 0; i < self->ntemplates; i++) free_seq(&self->templates[i]);
        PyMem_Free(self->templates);
    }
    PyMem_Free(self->ngroups);
    PyMem_Free(self->base);
    PyMem_Free(self->needle);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int Scanner_init(Scanner *self, PyObject *args, PyObject *kwds) {
    PyObject *templates;
    Py_buffer needle = {0};
    static char *kwlist[] = {"templates", "needle", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O!|y*", kwlist, &PyList_Type, &templates, &needle)) return -1;
    if (needle.buf != NULL) {
        int bad = memchr(needle.buf, '\n', needle.len) != NULL;
        if (!bad && needle.len > 0) {
            self->needle = PyMem_Malloc(needle.len);
            if (self->needle != NULL) memcpy(self->needle, needle.buf, needle.len);
            self->nlen = needle.len;
            if (self->needle != NULL) horspool_init(&self->seek, self->needle, needle.len);
        }
        PyBuffer_Release(&needle);
        if (bad) {
            PyErr_SetString(PyExc_ValueError, "a needle holds no newline");
            return -1;
        }
        if (self->nlen > 0 && self->needle == NULL) {
            PyErr_NoMemory();
            return -1;
        }
    }
    if (self->templates != NULL) {
        PyErr_SetString(PyExc_TypeError, "a Scanner is built once");
        return -1;
    }
    int n = (int)PyList_GET_SIZE(templates);
    if (n < 1) {
        PyErr_SetString(PyExc_ValueError, "no template");
        return -1;
    }
    self->templates = PyMem_Calloc(n, sizeof(Seq));
    self->ngroups = PyMem_Calloc(n, sizeof(int));
    self->base = PyMem_Calloc(n, sizeof(int));
    if (self->templates == NULL || self->ngroups == NULL || self->base == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    self->ntemplates = n;
    int base = 0;
    for (int i = 0; i < n; i++) {
        PyObject *item = PyList_GET_ITEM(templates, i);
        if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 2) {
            PyErr_SetString(PyExc_ValueError, "a template is (groups, sequence)");
            return -1;
        }
        long g = PyLong_AsLong(PyTuple_GET_ITEM(item, 0));
        if (g < 0 || g > 1000) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "bad group count");
            return -1;
        }
        self->ngroups[i] = (int)g;
        self->base[i] = base;
        base += (int)g;
        if (g > self->maxgroups) self->maxgroups = (int)g;
        if (build_seq(PyTuple_GET_ITEM(item, 1), &self->templates[i], (int)g) < 0) return -1;
    }
    self->groups = base;
    return 0;
}

/* The first place of needle in s[0:n], or NULL. */
static const unsigned char *find(const unsigned char *s, Py_ssize_t n, const unsigned char *needle, Py_ssize_t k) {
#if defined(__GLIBC__) || defined(__APPLE__) || defined(__FreeBSD__)
    return memmem(s, (size_t)n, needle, (size_t)k);
#else
    const unsigned char *end = s + n - k + 1;
    while (s < end) {
        const unsigned char *c = memchr(s, needle[0], end - s);
        if (c == NULL) return NULL;
        if (memcmp(c, needle, k) == 0) return c;
        s = c + 1;
    }
    return NULL;
#endif
}

/* The last newline before hit, from nl (a newline) on: memrchr's vectors where there is one (a
 * byte at a time back from a needle in the middle of a line cost 200 instructions a line). */
static const unsigned char *last_newline(const unsigned char *nl, const unsigned char *hit) {
#ifdef __GLIBC__
    const unsigned char *back = memrchr(nl + 1, '\n', (size_t)(hit - nl - 1));
    return back != NULL ? back : nl;
#else
    while (*(hit - 1) != '\n') hit--; /* *nl is a newline, so this stops there at the latest */
    return hit - 1;
#endif
}

/* The first template that reads the whole line s[a:end], its groups in caps; -1 for none. */
static int first_template(const Scanner *self, const unsigned char *s, Py_ssize_t a, Py_ssize_t end,
                          Py_ssize_t *caps) {
    for (int t = 0; t < self->ntemplates; t++) {
        if (!MAY_START(&self->templates[t], s, a, end)) continue;
        reset(caps, 0, self->ngroups[t]);
        if (match_seq(&self->templates[t], s, a, end, caps) == end) return t;
    }
    return -1;
}

static int append_new(PyObject *list, PyObject *item) {
    if (item == NULL) return -1;
    int r = PyList_Append(list, item);
    Py_DECREF(item);
    return r;
}

static const double POW10[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                                1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

/* What a column holds (one code per group; scan.py has the same names). */
enum { AS_BYTES = 0, AS_FLOAT = 1, AS_INT = 2, AS_STR = 3, AS_HMS = 4, AS_DAY = 5, AS_FRAC = 6,
       AS_FLOATS_CS = 7, AS_FLOATS_C = 8 };
/* A flag on a number's code: its column comes back as an array ('d', or 'I' for AS_INT) when
 * every line gives a value that fits, written as it is read with no Python object per value.
 * On a list of floats (AS_FLOATS_CS, AS_FLOATS_C): (width, array('d')) when every line gives
 * that many, row after row (the feeding process sums them a position at a time). */
#define PACKED 0x80

static int digits_at(const unsigned char *s, Py_ssize_t n, long *out) {
    long v = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return 0;
        v = v * 10 + (s[i] - '0');
    }
    *out = v;
    return 1;
}

/* Days from 1970-01-01 to y-m-01 in the proleptic Gregorian calendar (date.toordinal's). */
static long days_from_civil(long y, long m) {
    y -= m <= 2;
    long era = (y >= 0 ? y : y - 399) / 400;
    long yoe = y - era * 400;
    long doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5;
    long doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

/* The fast form of a value, or NULL with no error set when the text is not in that form
 * (then the group's Python converter reads it). Each form gives what the converter gives:
 *   AS_FLOAT: digits with at most one '.', at most 15 digits: m / 10^k, both exact in a double,
 *     and IEEE division rounds that quotient correctly, as float() does (Clinger's fast path);
 *   AS_INT: at most 18 digits;  AS_STR: ASCII (bytes.decode);
 *   AS_HMS: "HH:MM:SS" -> float seconds, None past 23:59:60 (parsing.common.parse_hms);
 *   AS_DAY: "YYYY-MM-DD" -> float epoch seconds of its midnight, None for month or day out of
 *     range or year 0; a day past the month's end runs on, as calendar.timegm does (_day_start);
 *   AS_FRAC: "." or "," and 1-9 digits -> int / 10.0 ** n; "" -> 0.0 (parse_fraction);
 *   AS_FLOATS_CS, AS_FLOATS_C: a tuple of such floats (grammar.items_converter(float, sep)). */
static PyObject *fast_value(const unsigned char *s, Py_ssize_t n, int kind);

/* The floats of a list separated by ", " (AS_FLOATS_CS) or "," with spaces about the items, which
 * float() strips (AS_FLOATS_C), into out[0:max]: how many, or 0 when an item is not in AS_FLOAT's
 * fast form or there are more than max (the converter reads the text then). */
static int fast_number(const unsigned char *s, Py_ssize_t n, int kind, double *d, unsigned long long *u);

static Py_ssize_t floats_into(const unsigned char *s, Py_ssize_t n, int comma_space, double *out, Py_ssize_t max) {
    Py_ssize_t items = 1;
    for (Py_ssize_t i = 0; i < n; i++) items += s[i] == ',';
    if (items > max) return 0;
    Py_ssize_t a = 0;
    for (Py_ssize_t k = 0; k < items; k++) {
        Py_ssize_t b = a;
        while (b < n && s[b] != ',') b++;
        Py_ssize_t x = a, y = b;
        if (comma_space) {
            if (k > 0) {
                if (x >= y || s[x] != ' ') return 0; /* "a,b": split(b", ") keeps one item */
                x++;
            }
        } else {
            while (x < y && s[x] == ' ') x++;
            while (y > x && s[y - 1] == ' ') y--;
        }
        unsigned long long u;
        if (fast_number(s + x, y - x, AS_FLOAT, &out[k], &u) != 1) return 0;
        a = b + 1;
    }
    return items;
}

/* Items a list of floats may have to be read here (per-position rates: one per draft step). */
#define MAX_ITEMS 256

/* That list as a tuple of floats, else NULL with no error set. */
static PyObject *fast_floats(const unsigned char *s, Py_ssize_t n, int comma_space) {
    double v[MAX_ITEMS];
    Py_ssize_t items = floats_into(s, n, comma_space, v, MAX_ITEMS);
    if (items == 0) return NULL;
    PyObject *out = PyTuple_New(items);
    if (out == NULL) return NULL;
    for (Py_ssize_t k = 0; k < items; k++) {
        PyObject *f = PyFloat_FromDouble(v[k]);
        if (f == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyTuple_SET_ITEM(out, k, f);
    }
    return out;
}

/* The fast form of a number (AS_FLOAT, AS_INT, AS_HMS, AS_DAY, AS_FRAC, as fast_value says):
 * 1 with the value in *d (or *u for AS_INT), -1 for None, 0 when the text is not in that form. */
static int fast_number(const unsigned char *s, Py_ssize_t n, int kind, double *d, unsigned long long *u) {
    long a, b, c;
    switch (kind) {
    case AS_FLOAT: {
        unsigned long long m = 0;
        int digits = 0, frac = -1;
        for (Py_ssize_t i = 0; i < n; i++) {
            unsigned char ch = s[i];
            if (ch >= '0' && ch <= '9') {
                m = m * 10 + (ch - '0');
                digits++;
                if (frac >= 0) frac++;
            } else if (ch == '.' && frac < 0) {
                frac = 0;
            } else {
                return 0;
            }
        }
        if (digits == 0 || digits > 15 || frac == 0) return 0;
        *d = (double)m / POW10[frac < 0 ? 0 : frac];
        return 1;
    }
    case AS_INT: {
        unsigned long long m = 0;
        if (n == 0 || n > 18) return 0;
        for (Py_ssize_t i = 0; i < n; i++) {
            if (s[i] < '0' || s[i] > '9') return 0;
            m = m * 10 + (s[i] - '0');
        }
        *u = m;
        return 1;
    }
    case AS_HMS:
        if (n != 8 || s[2] != ':' || s[5] != ':' || !digits_at(s, 2, &a) || !digits_at(s + 3, 2, &b) ||
            !digits_at(s + 6, 2, &c))
            return 0;
        if (a > 23 || b > 59 || c > 60) return -1;
        *d = (double)(a * 3600 + b * 60 + c);
        return 1;
    case AS_DAY:
        if (n != 10 || s[4] != '-' || s[7] != '-' || !digits_at(s, 4, &a) || !digits_at(s + 5, 2, &b) ||
            !digits_at(s + 8, 2, &c))
            return 0;
        if (b < 1 || b > 12 || c < 1 || c > 31 || a == 0) return -1;
        *d = (double)((days_from_civil(a, b) + c - 1) * 86400);
        return 1;
    case AS_FRAC:
        if (n == 0) {
            *d = 0.0;
            return 1;
        }
        if (n < 2 || n > 10 || (s[0] != '.' && s[0] != ',') || !digits_at(s + 1, n - 1, &a)) return 0;
        *d = (double)a / POW10[n - 1];
        return 1;
    }
    return 0;
}

static PyObject *fast_value(const unsigned char *s, Py_ssize_t n, int kind) {
    double d;
    unsigned long long u;
    switch (kind) {
    case AS_STR:
        for (Py_ssize_t i = 0; i < n; i++)
            if (s[i] >= 0x80) return NULL;
        return PyUnicode_DecodeASCII((const char *)s, n, NULL);
    case AS_FLOATS_CS:
    case AS_FLOATS_C:
        return fast_floats(s, n, kind == AS_FLOATS_CS);
    }
    switch (fast_number(s, n, kind, &d, &u)) {
    case 1:
        return kind == AS_INT ? PyLong_FromUnsignedLongLong(u) : PyFloat_FromDouble(d);
    case -1:
        Py_RETURN_NONE;
    }
    return NULL;
}

/* A group's value: the fast form, else the converter on its bytes, else the bytes. */
static PyObject *value(const unsigned char *s, Py_ssize_t a, Py_ssize_t b, int kind, PyObject *conv) {
    if (kind != AS_BYTES) {
        PyObject *v = fast_value(s + a, b - a, kind);
        if (v != NULL || PyErr_Occurred()) return v;
    }
    PyObject *raw = PyBytes_FromStringAndSize((const char *)s + a, b - a);
    if (raw == NULL || conv == Py_None) return raw;
    PyObject *v = PyObject_CallOneArg(conv, raw);
    Py_DECREF(raw);
    return v;
}

/* The last value of a column and its text: a line whose text is the same gets the same object
 * (values are immutable and a pure function of the text; ranks, days and seconds repeat). */
typedef struct {
    PyObject *obj; /* borrowed from the column list */
    const unsigned char *text;
    Py_ssize_t len;
} Last;

/* Distinct texts a text column remembers (see Scanner_scan). */
#define RECENT 16

/* array.array, fetched when the module is loaded: the type a packed column comes back in. */
static PyObject *array_type;

/* A packed column being written: its values so far (doubles, or unsigned ints for AS_INT),
 * until a line gives a value that is not one (None, or a count past 32 bits): then they move
 * to the column's list as objects and the column goes on as a list. */
typedef struct {
    int on;       /* still packed */
    int ints;     /* unsigned int, not double */
    int rows;     /* lists of floats: width doubles per line */
    Py_ssize_t width; /* rows: the first line's count (0 before it) */
    char *buf;
    Py_ssize_t n, cap;
} Packed;

static int pack_one(Packed *pk, double d, unsigned long long u) {
    Py_ssize_t size = pk->ints ? (Py_ssize_t)sizeof(unsigned int) : (Py_ssize_t)sizeof(double);
    if (pk->n == pk->cap) {
        Py_ssize_t want = pk->cap ? 2 * pk->cap : 4096;
        char *grown = PyMem_Realloc(pk->buf, want * size);
        if (grown == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        pk->buf = grown, pk->cap = want;
    }
    if (pk->ints)
        ((unsigned int *)pk->buf)[pk->n++] = (unsigned int)u;
    else
        ((double *)pk->buf)[pk->n++] = d;
    return 0;
}

/* The packed values so far into the (empty) list col, as objects; the column is a list from here. */
static int unpack(Packed *pk, PyObject *col) {
    const double *d = (const double *)pk->buf;
    for (Py_ssize_t i = 0; pk->rows && i < pk->n; i += pk->width) {
        PyObject *row = PyTuple_New(pk->width);
        if (row == NULL) return -1;
        for (Py_ssize_t k = 0; k < pk->width; k++) {
            PyObject *f = PyFloat_FromDouble(d[i + k]);
            if (f == NULL) {
                Py_DECREF(row);
                return -1;
            }
            PyTuple_SET_ITEM(row, k, f);
        }
        if (append_new(col, row) < 0) return -1;
    }
    for (Py_ssize_t i = 0; !pk->rows && i < pk->n; i++) {
        PyObject *v = pk->ints ? PyLong_FromUnsignedLong(((unsigned int *)pk->buf)[i])
                               : PyFloat_FromDouble(((double *)pk->buf)[i]);
        if (append_new(col, v) < 0) return -1;
    }
    pk->on = 0;
    PyMem_Free(pk->buf);
    pk->buf = NULL;
    pk->n = pk->cap = 0;
    return 0;
}

/* A value of a packed column: its number, packed; 0 when it is not one that fits (the caller unpacks). */
static int pack_object(Packed *pk, PyObject *v) {
    if (pk->ints) {
        if (!PyLong_CheckExact(v)) return 0;
        int overflow;
        long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
        if (overflow || x < 0 || (unsigned long long)x > UINT_MAX) return 0;
        return pack_one(pk, 0.0, (unsigned long long)x) < 0 ? -1 : 1;
    }
    if (!PyFloat_CheckExact(v)) return 0;
    return pack_one(pk, PyFloat_AS_DOUBLE(v), 0) < 0 ? -1 : 1;
}

/* A packed column's values as array(typecode, bytes); rows as (width, array('d')), none as []. */
static PyObject *packed_array(const Packed *pk) {
    if (pk->rows && pk->n == 0) return PyList_New(0);
    Py_ssize_t size = pk->ints ? (Py_ssize_t)sizeof(unsigned int) : (Py_ssize_t)sizeof(double);
    PyObject *raw = PyBytes_FromStringAndSize(pk->buf, pk->n * size);
    if (raw == NULL) return NULL;
    PyObject *arr = PyObject_CallFunction(array_type, "sO", pk->ints ? "I" : "d", raw);
    Py_DECREF(raw);
    if (arr == NULL || !pk->rows) return arr;
    return Py_BuildValue("(nN)", pk->width, arr);
}

/* A value that came as an object, v (a reference this takes): packed when ``packed`` (what
 * pack_object or pack_tuple made of it) says so, else the column is unpacked and v appended.
 * -1 on error. */
static int pack_or_append(Packed *pk, PyObject *col, PyObject *v, int packed) {
    if (packed != 0) {
        Py_DECREF(v);
        return packed < 0 ? -1 : 0;
    }
    if (unpack(pk, col) < 0) {
        Py_DECREF(v);
        return -1;
    }
    return append_new(col, v);
}

/* A line's list of floats onto a packed rows column: 1 done, 0 not a row of its width (the
 * caller unpacks), -1 error. */
static int pack_row(Packed *pk, const unsigned char *s, Py_ssize_t n, int comma_space) {
    double v[MAX_ITEMS];
    Py_ssize_t items = floats_into(s, n, comma_space, v, MAX_ITEMS);
    if (items == 0 || (pk->width && items != pk->width)) return 0;
    pk->width = items;
    for (Py_ssize_t k = 0; k < items; k++)
        if (pack_one(pk, v[k], 0) < 0) return -1;
    return 1;
}

/* A converter's value onto a packed rows column when it is a row: a non-empty tuple of floats
 * of the column's width; 1 done, 0 not one (the caller unpacks), -1 error. */
static int pack_tuple(Packed *pk, PyObject *v) {
    if (!PyTuple_CheckExact(v)) return 0;
    Py_ssize_t items = PyTuple_GET_SIZE(v);
    if (items == 0 || (pk->width && items != pk->width)) return 0;
    for (Py_ssize_t k = 0; k < items; k++)
        if (!PyFloat_CheckExact(PyTuple_GET_ITEM(v, k))) return 0;
    pk->width = items;
    for (Py_ssize_t k = 0; k < items; k++)
        if (pack_one(pk, PyFloat_AS_DOUBLE(PyTuple_GET_ITEM(v, k)), 0) < 0) return -1;
    return 1;
}

/* The text a pass hands back: every line it read replaced by "\n" + token. Written straight
 * into a bytes object made at the first line read (none read: the text itself is the rest) and
 * cut to its length at the end: no copy of a whole piece per pass. */
typedef struct {
    PyObject *buf;
    char *out;
    Py_ssize_t o, cap, last; /* written so far; room; the text's offset copied up to */
} Rest;

/* The text from the last line read up to the newline at ``at``, then the token for the line
 * that ends at ``end``; -1 on error (buf is NULL then). */
static int rest_token(Rest *r, const unsigned char *s, Py_ssize_t size, Py_ssize_t at, Py_ssize_t end,
                      const Py_buffer *tok) {
    if (r->buf == NULL) {
        r->cap = size + 64; /* no longer than the text unless a read line is shorter than the token */
        r->buf = PyBytes_FromStringAndSize(NULL, r->cap);
        if (r->buf == NULL) return -1;
        r->out = PyBytes_AS_STRING(r->buf);
    }
    if (r->o + (at - r->last) + 1 + tok->len > r->cap) {
        Py_ssize_t want = 2 * r->cap + (at - r->last) + 1 + tok->len;
        if (_PyBytes_Resize(&r->buf, want) < 0) return -1;
        r->out = PyBytes_AS_STRING(r->buf);
        r->cap = want;
    }
    memcpy(r->out + r->o, s + r->last, at - r->last);
    r->o += at - r->last;
    r->out[r->o++] = '\n';
    memcpy(r->out + r->o, tok->buf, tok->len);
    r->o += tok->len;
    r->last = end;
    return 0;
}

/* The rest, a new reference (the text after the last line read appended), or NULL. */
static PyObject *rest_finish(Rest *r, PyObject *text, const unsigned char *s, Py_ssize_t size) {
    if (r->buf == NULL)
        return PyBytes_CheckExact(text) ? Py_NewRef(text) : PyBytes_FromStringAndSize((const char *)s, size);
    if (r->o + (size - r->last) > r->cap) {
        if (_PyBytes_Resize(&r->buf, r->o + (size - r->last)) < 0) return NULL;
        r->out = PyBytes_AS_STRING(r->buf);
    }
    memcpy(r->out + r->o, s + r->last, size - r->last);
    r->o += size - r->last;
    if (_PyBytes_Resize(&r->buf, r->o) < 0) return NULL;
    PyObject *rest = r->buf;
    r->buf = NULL;
    return rest;
}

/* The pass as bulk.py uses it: the text with every line read replaced by "\n" + token
 * (what (b"\n" + token).join of split's texts gives), how many lines were read, one list per
 * group of their values (None where another template read the line), each as ``kinds`` says
 * with ``convs`` (a callable or None per group) for texts outside the fast forms, and how many
 * lines each template read. */
static PyObject *Scanner_scan(Scanner *self, PyObject *args) {
    Py_buffer view, tok, kinds;
    PyObject *convs, *text;
    if (!PyArg_ParseTuple(args, "Oy*y*O!", &text, &tok, &kinds, &PyTuple_Type, &convs)) return NULL;
    if (PyObject_GetBuffer(text, &view, PyBUF_SIMPLE) < 0) {
        PyBuffer_Release(&tok);
        PyBuffer_Release(&kinds);
        return NULL;
    }
    PyObject *result = NULL, *cols = NULL, *rest = NULL, *per = NULL;
    Py_ssize_t *caps = NULL, *hits = NULL;
    Last *last_v = NULL;
    Packed *pk = NULL;
    Rest r = {NULL, NULL, 0, 0, 0};
    if (kinds.len != self->groups || PyTuple_GET_SIZE(convs) != self->groups) {
        PyErr_SetString(PyExc_ValueError, "kinds and convs: one per group");
        goto done;
    }
    const unsigned char *s = view.buf;
    const unsigned char *kind = kinds.buf;
    Py_ssize_t size = view.len, count = 0;
    caps = PyMem_Malloc(sizeof(Py_ssize_t) * 2 * (self->maxgroups + 1));
    hits = PyMem_Calloc(self->ntemplates, sizeof(Py_ssize_t));
    last_v = PyMem_Calloc((self->groups + 1) * RECENT, sizeof(Last));
    pk = PyMem_Calloc(self->groups + 1, sizeof(Packed));
    cols = PyList_New(self->groups);
    if (caps == NULL || hits == NULL || last_v == NULL || pk == NULL || cols == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (int g = 0; g < self->groups; g++) {
        int base = kind[g] & ~PACKED;
        if (!(kind[g] & PACKED)) continue;
        if (base != AS_FLOAT && base != AS_INT && base != AS_HMS && base != AS_DAY && base != AS_FRAC &&
            base != AS_FLOATS_CS && base != AS_FLOATS_C) {
            PyErr_SetString(PyExc_ValueError, "only numbers and lists of floats are packed");
            goto done;
        }
        pk[g].on = 1;
        pk[g].ints = base == AS_INT;
        pk[g].rows = base == AS_FLOATS_CS || base == AS_FLOATS_C;
    }
    for (int g = 0; g < self->groups; g++) {
        PyObject *col = PyList_New(0);
        if (col == NULL) goto done;
        PyList_SET_ITEM(cols, g, col);
    }
    const unsigned char *nl = memchr(s, '\n', size);
    while (nl != NULL) {
        Py_ssize_t at = nl - s;
        if (self->nlen > 0) {
            /* Only a line that holds the needle can be read: jump to the next one (lines between
             * are passed over at memmem's speed, not tried one by one). */
            const unsigned char *hit = horspool_find(&self->seek, nl + 1, size - at - 1);
            if (hit == NULL) break;
            nl = last_newline(nl, hit); /* the hit's line begins after it */
            at = nl - s;
        }
        const unsigned char *next = memchr(nl + 1, '\n', size - at - 1);
        if (next == NULL) break;
        Py_ssize_t end = next - s;
        int hit = first_template(self, s, at + 1, end, caps);
        if (hit >= 0) {
            if (rest_token(&r, s, size, at, end, &tok) < 0) goto done;
            count++;
            hits[hit]++;
            for (int t = 0; t < self->ntemplates; t++) {
                for (int g = 0; g < self->ngroups[t]; g++) {
                    int j = self->base[t] + g;
                    PyObject *col = PyList_GET_ITEM(cols, j);
                    if (t != hit || caps[2 * g] < 0) {
                        if (pk[j].on && unpack(&pk[j], col) < 0) goto done;
                        if (PyList_Append(col, Py_None) < 0) goto done;
                        continue;
                    }
                    const unsigned char *text = s + caps[2 * g];
                    Py_ssize_t len = caps[2 * g + 1] - caps[2 * g];
                    int as = kind[j] & ~PACKED;
                    PyObject *v;
                    if (pk[j].on && pk[j].rows) {
                        int packed = pack_row(&pk[j], text, len, as == AS_FLOATS_CS);
                        if (packed < 0) goto done;
                        if (packed) continue;
                        v = value(s, caps[2 * g], caps[2 * g + 1], as, PyTuple_GET_ITEM(convs, j));
                        if (v == NULL) goto done;
                        /* (the converter's floats, of the width) */
                        if (pack_or_append(&pk[j], col, v, pack_tuple(&pk[j], v)) < 0) goto done;
                        continue;
                    }
                    if (pk[j].on) {
                        double d = 0.0;
                        unsigned long long u = 0;
                        int form = fast_number(text, len, as, &d, &u);
                        if (form == 1 && (!pk[j].ints || u <= UINT_MAX)) {
                            if (pack_one(&pk[j], d, u) < 0) goto done;
                            continue;
                        }
                        if (form == 1)
                            v = PyLong_FromUnsignedLongLong(u); /* a count past 32 bits */
                        else if (form == -1)
                            v = Py_NewRef(Py_None);
                        else
                            v = value(s, caps[2 * g], caps[2 * g + 1], as, PyTuple_GET_ITEM(convs, j));
                        if (v == NULL) goto done;
                        if (pack_or_append(&pk[j], col, v, form == 0 ? pack_object(&pk[j], v) : 0) < 0) goto done;
                        continue;
                    }
                    /* Texts (ranks) keep the last RECENT distinct ones: DP ranks print in turn, and a
                     * text object per line was made, pickled and unpickled line by line; other
                     * columns the last one (a number seldom repeats but for its line's neighbour). */
                    Last *lv = &last_v[j * RECENT];
                    int keep = as == AS_STR ? RECENT : 1, found = 0;
                    for (int r = 0; r < keep && lv[r].obj != NULL; r++) {
                        if (lv[r].len == len && memcmp(lv[r].text, text, len) == 0) {
                            if (PyList_Append(col, lv[r].obj) < 0) goto done;
                            found = 1;
                            break;
                        }
                    }
                    if (found) continue;
                    v = value(s, caps[2 * g], caps[2 * g + 1], as, PyTuple_GET_ITEM(convs, j));
                    if (append_new(col, v) < 0) goto done;
                    if (keep > 1) memmove(lv + 1, lv, (keep - 1) * sizeof(Last)); /* newest first */
                    lv->obj = v; /* the list holds it */
                    lv->text = text;
                    lv->len = len;
                }
            }
        }
        nl = next;
    }
    rest = rest_finish(&r, text, s, size);
    if (rest == NULL) goto done;
    for (int g = 0; g < self->groups; g++) {
        if (!pk[g].on) continue;
        PyObject *arr = packed_array(&pk[g]);
        if (arr == NULL || PyList_SetItem(cols, g, arr) < 0) goto done;
    }
    per = PyList_New(self->ntemplates);
    if (rest == NULL || per == NULL) goto done;
    for (int t = 0; t < self->ntemplates; t++) {
        PyObject *h = PyLong_FromSsize_t(hits[t]);
        if (h == NULL) goto done;
        PyList_SET_ITEM(per, t, h);
    }
    result = Py_BuildValue("(OnOO)", rest, count, cols, per);
done:
    Py_XDECREF(rest);
    Py_XDECREF(cols);
    Py_XDECREF(per);
    PyMem_Free(caps);
    PyMem_Free(hits);
    PyMem_Free(last_v);
    if (pk != NULL)
        for (int g = 0; g < self->groups; g++) PyMem_Free(pk[g].buf);
    PyMem_Free(pk);
    Py_XDECREF(r.buf);
    PyBuffer_Release(&view);
    PyBuffer_Release(&tok);
    PyBuffer_Release(&kinds);
    return result;
}

/* Whether a template reads this one line (no newline in it): the walk's test of a shape it just learned. */
static PyObject *Scanner_reads(Scanner *self, PyObject *arg) {
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) return NULL;
    Py_ssize_t *caps = PyMem_Malloc(sizeof(Py_ssize_t) * 2 * (self->maxgroups + 1));
    if (caps == NULL) {
        PyBuffer_Release(&view);
        return PyErr_NoMemory();
    }
    int hit = memchr(view.buf, '\n', view.len) == NULL ? first_template(self, view.buf, 0, view.len, caps) : -1;
    PyMem_Free(caps);
    PyBuffer_Release(&view);
    return PyBool_FromLong(hit >= 0);
}

static PyObject *Scanner_get_groups(Scanner *self, void *closure) {
    (void)closure;
    return PyLong_FromLong(self->groups);
}

static PyMethodDef Scanner_methods[] = {
    {"scan", (PyCFunction)Scanner_scan, METH_VARARGS,
     "scan(text, token, kinds, convs) -> (rest, lines, columns, per_template): see Scanner_scan."},
    {"reads", (PyCFunction)Scanner_reads, METH_O, "reads(line) -> whether a template reads the whole line."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Scanner_getset[] = {
    {"groups", (getter)Scanner_get_groups, NULL, "groups of all templates, as re.Pattern.groups", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject ScannerType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "specmon._native.Scanner",
    .tp_basicsize = sizeof(Scanner),
    .tp_dealloc = (destructor)Scanner_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Scanner(templates, needle=b''): templates are (groups, sequence) pairs built by specmon.ingest.scan; needle, a text every line they read holds.",
    .tp_methods = Scanner_methods,
    .tp_getset = Scanner_getset,
    .tp_init = (initproc)Scanner_init,
    .tp_new = PyType_GenericNew,
};

/* gap_average(times, last, ema, floor, factor) -> (ema, last, idle positions): the session's
 * average gap between a rank's samples over a column of times (see session._gap_average, the
 * same rules in Python), and where a sample came after an idle gap (longer than
 * max(floor, factor * the average so far)), as Session._add_sample finds them one at a time. The
 * feeding process ran that loop at ~60 ns a sample, the largest part of its time on a piece. The
 * arithmetic is Python's float arithmetic, operation for operation (built with -ffp-contract=off:
 * no fused multiply-add). */
typedef struct {
    int has_last, has_ema;
    double last, ema, floor_s, factor;
    PyObject *idle; /* a list of positions */
} Gaps;

static int gap_step(Gaps *g, double t, Py_ssize_t at) {
    if (g->has_last) {
        double gap = t - g->last;
        double limit = g->has_ema ? g->factor * g->ema : 0.0;
        if (!(limit > g->floor_s)) limit = g->floor_s; /* max(floor, factor * (ema or 0)), as Python's max */
        if (gap > limit) {
            PyObject *pos = PyLong_FromSsize_t(at);
            int failed = pos == NULL || PyList_Append(g->idle, pos) < 0;
            Py_XDECREF(pos);
            if (failed) return -1;
        }
        if (gap >= 0) {
            if (!g->has_ema) {
                g->ema = gap;
                g->has_ema = 1;
            } else if (gap <= limit) {
                g->ema = 0.9 * g->ema + 0.1 * gap;
            }
        }
    }
    g->last = t;
    g->has_last = 1;
    return 0;
}

static PyObject *gap_average(PyObject *mod, PyObject *args) {
    PyObject *times, *last_o, *ema_o;
    Gaps g = {0};
    if (!PyArg_ParseTuple(args, "OOOdd", &times, &last_o, &ema_o, &g.floor_s, &g.factor)) return NULL;
    g.has_last = last_o != Py_None;
    g.has_ema = ema_o != Py_None;
    if (g.has_last) g.last = PyFloat_AsDouble(last_o);
    if (g.has_ema) g.ema = PyFloat_AsDouble(ema_o);
    if (PyErr_Occurred()) return NULL;
    g.idle = PyList_New(0);
    if (g.idle == NULL) return NULL;
    int failed = 0;
    Py_buffer view;
    if (PyObject_CheckBuffer(times) && PyObject_GetBuffer(times, &view, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) == 0) {
        /* An array("d") column (bulk._packed): the doubles themselves, no object each. */
        int doubles = view.format != NULL && strcmp(view.format, "d") == 0 && view.itemsize == sizeof(double);
        if (doubles) {
            const double *d = view.buf;
            for (Py_ssize_t i = 0; i < view.len / (Py_ssize_t)sizeof(double) && !failed; i++)
                failed = gap_step(&g, d[i], i) < 0;
        } else {
            PyErr_SetString(PyExc_TypeError, "times: a list or an array of doubles");
            failed = 1;
        }
        PyBuffer_Release(&view);
    } else {
        PyErr_Clear();
        PyObject *seq = PySequence_Fast(times, "times: a sequence");
        if (seq == NULL) {
            Py_DECREF(g.idle);
            return NULL;
        }
        Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
        PyObject **items = PySequence_Fast_ITEMS(seq);
        for (Py_ssize_t i = 0; i < n && !failed; i++) {
            PyObject *o = items[i];
            if (o == Py_None) continue;
            double t = PyFloat_AsDouble(o);
            failed = (t == -1.0 && PyErr_Occurred()) || gap_step(&g, t, i) < 0;
        }
        Py_DECREF(seq);
    }
    if (failed) {
        Py_DECREF(g.idle);
        return NULL;
    }
    PyObject *e = g.has_ema ? PyFloat_FromDouble(g.ema) : Py_NewRef(Py_None);
    PyObject *l = g.has_last ? PyFloat_FromDouble(g.last) : Py_NewRef(Py_None);
    PyObject *r = (e && l) ? PyTuple_Pack(3, e, l, g.idle) : NULL;
    Py_XDECREF(e);
    Py_XDECREF(l);
    Py_DECREF(g.idle);
    return r;
}

/* digit_run(data, n) -> whether data holds n ASCII digits in a row (report's test before orjson,
 * which reads an integer past 64 bits as a float): one pass, where translate + find made a copy. */
static PyObject *digit_run(PyObject *mod, PyObject *args) {
    Py_buffer view;
    Py_ssize_t want;
    if (!PyArg_ParseTuple(args, "y*n", &view, &want)) return NULL;
    const unsigned char *s = view.buf;
    Py_ssize_t run = 0;
    int found = want <= 0;
    for (Py_ssize_t i = 0; i < view.len && !found; i++) {
        run = (s[i] >= '0' && s[i] <= '9') ? run + 1 : 0;
        found = run >= want;
    }
    PyBuffer_Release(&view);
    return PyBool_FromLong(found);
}

/* count_byte(data, byte) -> how many times the byte occurs in data. bulk.py counts a piece's lines
 * (twice a piece); numpy's "== 10" then count_nonzero wrote a 4 MB array of booleans each time
 * (0.65 ms a piece of 4 MB), bytes.count took 1.3 ms. Here 16 bytes at a time with SSE2 (every
 * x86-64 has it), the counts kept in byte lanes and summed every 255 steps; a plain loop elsewhere. */
/* holds(data, text) -> whether text occurs in data: ``text in data`` by memmem, which reads a
 * piece 3-4 times as fast as CPython's search (4 MB without it: 0.3 ms against 1.0-1.4), and
 * bulk.py asks it of each kind's marker, often of most of a piece. */
static PyObject *holds(PyObject *mod, PyObject *args) {
    Py_buffer view, text;
    if (!PyArg_ParseTuple(args, "y*y*", &view, &text)) return NULL;
    int found = text.len == 0 || (text.len <= view.len && find(view.buf, view.len, text.buf, text.len) != NULL);
    PyBuffer_Release(&view);
    PyBuffer_Release(&text);
    return PyBool_FromLong(found);
}

/* count_text(data, text) -> ``data.count(text)`` (non-overlapping, text not empty) by memmem:
 * report's replay counts SGLang's decode marker in every block it reads (60 ms of bytes.count). */
static PyObject *count_text(PyObject *mod, PyObject *args) {
    Py_buffer view, text;
    if (!PyArg_ParseTuple(args, "y*y*", &view, &text)) return NULL;
    if (text.len == 0) {
        PyBuffer_Release(&view);
        PyBuffer_Release(&text);
        PyErr_SetString(PyExc_ValueError, "count_text: an empty text");
        return NULL;
    }
    const unsigned char *p = view.buf, *end = p + view.len;
    Py_ssize_t count = 0;
    Horspool h;
    horspool_init(&h, text.buf, text.len);
    while (end - p >= text.len) {
        const unsigned char *hit = horspool_find(&h, p, end - p);
        if (hit == NULL) break;
        count++;
        p = hit + text.len;
    }
    PyBuffer_Release(&view);
    PyBuffer_Release(&text);
    return PyLong_FromSsize_t(count);
}

static PyObject *count_byte(PyObject *mod, PyObject *args) {
    Py_buffer view;
    int byte;
    if (!PyArg_ParseTuple(args, "y*i", &view, &byte)) return NULL;
    if (byte < 0 || byte > 255) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "count_byte: a byte is 0..255");
        return NULL;
    }
    const unsigned char *p = view.buf;
    Py_ssize_t n = view.len, i = 0, count = 0;
#ifdef __SSE2__
    const __m128i want = _mm_set1_epi8((char)byte);
    while (n - i >= 16) {
        __m128i lanes = _mm_setzero_si128();
        Py_ssize_t steps = (n - i) / 16;
        if (steps > 255) steps = 255;
        for (Py_ssize_t k = 0; k < steps; k++, i += 16) {
            __m128i eq = _mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(p + i)), want);
            lanes = _mm_sub_epi8(lanes, eq); /* a match is 0xff: minus one adds one */
        }
        /* the 16 byte lanes summed: sum of absolute differences against zero, two 64-bit halves */
        __m128i sums = _mm_sad_epu8(lanes, _mm_setzero_si128());
        count += _mm_cvtsi128_si32(sums) + _mm_cvtsi128_si32(_mm_srli_si128(sums, 8));
    }
#endif
    for (; i < n; i++) count += p[i] == byte;
    PyBuffer_Release(&view);
    return PyLong_FromSsize_t(count);
}

/* drop_lines(text, a, b) -> text with the characters of every line that holds both a and b
 * removed (its newline kept), as re.sub(rb"\n(?=[^\n]*A)(?=[^\n]*B)[^\n]*(?=\n)", b"\n", text)
 * with A and B escaped: only lines between two newlines. bulk.py drops uvicorn's access lines
 * this way; the regex tried both look-aheads at each of 14,600 lines a piece (1.4 ms), here
 * memmem jumps from one b to the next (b the rarer text) and each line it falls in is tested. */
static PyObject *drop_lines(PyObject *mod, PyObject *args) {
    Py_buffer view, a, b;
    PyObject *text;
    if (!PyArg_ParseTuple(args, "Oy*y*", &text, &a, &b)) return NULL;
    if (PyObject_GetBuffer(text, &view, PyBUF_SIMPLE) < 0) {
        PyBuffer_Release(&a);
        PyBuffer_Release(&b);
        return NULL;
    }
    PyObject *out = NULL;
    const unsigned char *s = view.buf;
    Py_ssize_t size = view.len, o = 0, last = 0, from = 0;
    char *w = NULL;
    if (a.len == 0 || b.len == 0 || memchr(a.buf, '\n', a.len) || memchr(b.buf, '\n', b.len)) {
        PyErr_SetString(PyExc_ValueError, "drop_lines: texts of one line, not empty");
        goto done;
    }
    Horspool seek_a, seek_b;
    horspool_init(&seek_a, a.buf, a.len);
    horspool_init(&seek_b, b.buf, b.len);
    while (from < size) {
        const unsigned char *hit = horspool_find(&seek_b, s + from, size - from);
        if (hit == NULL) break;
        Py_ssize_t at = hit - s, start = at, end;
#ifdef __GLIBC__
        /* (s[from] is the last line's newline, or from is 0: the line begins after the last
         * newline of s[from:at], or at from) */
        const unsigned char *back = memrchr(s + from, '\n', (size_t)(at - from));
        start = back != NULL ? back - s + 1 : from;
#else
        while (start > 0 && s[start - 1] != '\n') start--;
#endif
        const unsigned char *nl = memchr(hit + b.len, '\n', size - at - b.len);
        end = nl == NULL ? size : nl - s;
        from = end;
        /* a line between two newlines (the first has none before it) that holds a as well */
        if (start == 0 || nl == NULL || horspool_find(&seek_a, s + start, end - start) == NULL) continue;
        if (out == NULL) {
            out = PyBytes_FromStringAndSize(NULL, size);
            if (out == NULL) goto done;
            w = PyBytes_AS_STRING(out);
        }
        memcpy(w + o, s + last, start - last);
        o += start - last;
        last = end;
    }
    if (out == NULL) { /* none: the text itself */
        out = PyBytes_CheckExact(text) ? Py_NewRef(text) : PyBytes_FromStringAndSize((const char *)s, size);
    } else {
        memcpy(w + o, s + last, size - last);
        o += size - last;
        if (_PyBytes_Resize(&out, o) < 0) out = NULL;
    }
done:
    PyBuffer_Release(&view);
    PyBuffer_Release(&a);
    PyBuffer_Release(&b);
    return out;
}

/* keep_freed_memory(largest) -> whether glibc's malloc now keeps freed blocks of up to ``largest``
 * bytes for reuse. A worker makes and drops several blocks of 4 MB per piece (its text, each
 * pass's rest); by default glibc hands each back to the kernel (munmap, or trimming the heap's
 * top), and the next one costs a page fault per 4 KiB page as it is first written: 157,000 faults
 * and 10% of the CPU time of summarize on a 346 MB log, 32,000 faults when kept. Other C
 * libraries: no change (False). */
static PyObject *keep_freed_memory(PyObject *mod, PyObject *arg) {
    Py_ssize_t largest = PyLong_AsSsize_t(arg);
    if (largest == -1 && PyErr_Occurred()) return NULL;
#ifdef __GLIBC__
    if (largest < 0 || largest > INT_MAX / 4) {
        PyErr_SetString(PyExc_ValueError, "keep_freed_memory: 0 <= largest <= INT_MAX / 4");
        return NULL;
    }
    /* Blocks up to ``largest`` from the heap, and the heap's top trimmed only past four of them. */
    int ok = mallopt(M_MMAP_THRESHOLD, (int)largest) && mallopt(M_TRIM_THRESHOLD, (int)largest * 4);
    return PyBool_FromLong(ok);
#else
    Py_RETURN_FALSE;
#endif
}

/* --------------------------------------------------------------------------------------------
 * line_run: report's reading of a recording's raw lines without a dict per line.
 *
 * The Recorder writes each raw line as {"type":"line","src":S,"n":N,"text":T,"t":X} (json.dumps,
 * ensure_ascii=False, no spaces). orjson made five objects and a dict of each (2.2 s of the
 * reading process's 5.4 on a 2M-line recording) only for the fields to be taken apart again and
 * the texts joined and encoded back. Here a line in exactly that shape is read in place: its
 * text unescaped into one newline-joined block, its number and receive time made. Any other line
 * (another key order, a text holding a newline or a lone surrogate, invalid UTF-8 or JSON, a
 * number past 18 digits) is left to the JSON decoder, so what this accepts is what it reads alike.
 */
static const char LR_HEAD[] = "{\"type\":\"line\",\"src\":\"";
static const char LR_N[] = "\",\"n\":";
static const char LR_TEXT[] = ",\"text\":\"";
static const char LR_T[] = "\",\"t\":";
#define LR_LEN(k) ((Py_ssize_t)sizeof(k) - 1)

typedef struct {
    Py_ssize_t src_a, src_b;   /* the source name's bytes (no escape in it) */
    Py_ssize_t n_a, n_b;       /* the line number's digits */
    Py_ssize_t text_a, text_b; /* the text as written (escapes included) */
    Py_ssize_t t_a, t_b;       /* the receive time: null or a JSON number */
    Py_ssize_t next;           /* the start of the next line */
    int escaped, t_float;
} LineShape;

/* The length of the valid UTF-8 sequence at s[p] (a non-ASCII lead byte), or 0: the checks of
 * Python's strict decoder (no overlong form, no surrogate, nothing past U+10FFFF). */
static int utf8_len(const unsigned char *s, Py_ssize_t p, Py_ssize_t end) {
    unsigned c = s[p];
    unsigned lo = 0x80, hi = 0xBF;
    int n;
    if (c < 0xC2) return 0;
    if (c < 0xE0) n = 2;
    else if (c < 0xF0) { n = 3; if (c == 0xE0) lo = 0xA0; if (c == 0xED) hi = 0x9F; }
    else if (c < 0xF5) { n = 4; if (c == 0xF0) lo = 0x90; if (c == 0xF4) hi = 0x8F; }
    else return 0;
    if (p + n > end) return 0;
    if (s[p + 1] < lo || s[p + 1] > hi) return 0;
    for (int i = 2; i < n; i++)
        if (s[p + i] < 0x80 || s[p + i] > 0xBF) return 0;
    return n;
}

static int hex4(const unsigned char *s, Py_ssize_t p, Py_ssize_t end, unsigned *out) {
    if (p + 4 > end) return 0;
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        unsigned c = s[p + i], d;
        if (c >= '0' && c <= '9') d = c - '0';
        else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
        else return 0;
        v = v * 16 + d;
    }
    *out = v;
    return 1;
}

/* A \u escape at s[p] (on the backslash): the code point and the escape's length (6, or 12 for a
 * surrogate pair), or 0 for one this reader leaves to the decoder (a lone surrogate, a newline). */
static int unicode_escape(const unsigned char *s, Py_ssize_t p, Py_ssize_t end, unsigned *cp) {
    unsigned u, v;
    if (!hex4(s, p + 2, end, &u)) return 0;
    if (u >= 0xDC00 && u <= 0xDFFF) return 0;
    if (u >= 0xD800 && u <= 0xDBFF) {
        if (p + 12 > end || s[p + 6] != '\\' || s[p + 7] != 'u' || !hex4(s, p + 8, end, &v)) return 0;
        if (v < 0xDC00 || v > 0xDFFF) return 0;
        *cp = 0x10000 + ((u - 0xD800) << 10) + (v - 0xDC00);
        return 12;
    }
    if (u == '\n') return 0;
    *cp = u;
    return 6;
}

/* The end of the JSON string whose characters start at s[p] (on its closing quote), or -1 when
 * it is not one this reader takes; *escaped says whether it holds a backslash. With allow_escapes
 * 0 (the source name) a backslash is refused too. */
static Py_ssize_t json_string_end(const unsigned char *s, Py_ssize_t p, Py_ssize_t end, int allow_escapes,
                                  int *escaped) {
    const uint64_t ones = 0x0101010101010101ull, highs = 0x8080808080808080ull;
    while (p < end) {
        /* eight plain characters at a time: none a quote, a backslash, a control or non-ASCII byte
         * (the byte loop alone took 3 ns a byte, most of a 2 MB chunk's 6.6 ms) */
        while (end - p >= 8) {
            uint64_t x, q, b;
            memcpy(&x, s + p, 8);
            q = x ^ (ones * '"');
            b = x ^ (ones * '\\');
            if ((((x - ones * 0x20) & ~x) | ((q - ones) & ~q) | ((b - ones) & ~b) | x) & highs) break;
            p += 8;
        }
        if (p >= end) break;
        unsigned c = s[p];
        if (c == '"') return p;
        if (c < 0x20) return -1;
        if (c < 0x80 && c != '\\') { p++; continue; }
        if (c >= 0x80) {
            int n = utf8_len(s, p, end);
            if (!n) return -1;
            p += n;
            continue;
        }
        if (!allow_escapes || p + 1 >= end) return -1;
        *escaped = 1;
        switch (s[p + 1]) {
        case '"': case '\\': case '/': case 'b': case 'f': case 'r': case 't': p += 2; break;
        case 'u': {
            unsigned cp;
            int n = unicode_escape(s, p, end, &cp);
            if (!n) return -1;
            p += n;
            break;
        }
        default: return -1; /* \n (a newline in the text), or not JSON */
        }
    }
    return -1;
}

/* The end of a JSON number at s[p], or -1; *is_float for a fraction or an exponent. */
static Py_ssize_t json_number_end(const unsigned char *s, Py_ssize_t p, Py_ssize_t end, int *is_float) {
    Py_ssize_t q = p;
    *is_float = 0;
    if (q < end && s[q] == '-') q++;
    if (q >= end || s[q] < '0' || s[q] > '9') return -1;
    if (s[q] == '0') q++;
    else while (q < end && s[q] >= '0' && s[q] <= '9') q++;
    if (q < end && s[q] == '.') {
        q++;
        if (q >= end || s[q] < '0' || s[q] > '9') return -1;
        while (q < end && s[q] >= '0' && s[q] <= '9') q++;
        *is_float = 1;
    }
    if (q < end && (s[q] == 'e' || s[q] == 'E')) {
        q++;
        if (q < end && (s[q] == '+' || s[q] == '-')) q++;
        if (q >= end || s[q] < '0' || s[q] > '9') return -1;
        while (q < end && s[q] >= '0' && s[q] <= '9') q++;
        *is_float = 1;
    }
    return q;
}

/* Whether the line at s[a] (up to end) is a raw line in the Recorder's shape, ended by '\n'. */
static int line_shape(const unsigned char *s, Py_ssize_t a, Py_ssize_t end, LineShape *ls) {
    Py_ssize_t p = a;
    int dummy = 0;
    if (end - p < LR_LEN(LR_HEAD) || memcmp(s + p, LR_HEAD, LR_LEN(LR_HEAD)) != 0) return 0;
    p += LR_LEN(LR_HEAD);
    ls->src_a = p;
    p = json_string_end(s, p, end, 0, &dummy);
    if (p < 0) return 0;
    ls->src_b = p;
    if (end - p < LR_LEN(LR_N) || memcmp(s + p, LR_N, LR_LEN(LR_N)) != 0) return 0;
    p += LR_LEN(LR_N);
    ls->n_a = p;
    if (p < end && s[p] == '0') p++;
    else while (p < end && s[p] >= '0' && s[p] <= '9') p++;
    ls->n_b = p;
    if (ls->n_b == ls->n_a || ls->n_b - ls->n_a > 18) return 0;
    if (end - p < LR_LEN(LR_TEXT) || memcmp(s + p, LR_TEXT, LR_LEN(LR_TEXT)) != 0) return 0;
    p += LR_LEN(LR_TEXT);
    ls->text_a = p;
    ls->escaped = 0;
    p = json_string_end(s, p, end, 1, &ls->escaped);
    if (p < 0) return 0;
    ls->text_b = p;
    if (end - p < LR_LEN(LR_T) || memcmp(s + p, LR_T, LR_LEN(LR_T)) != 0) return 0;
    p += LR_LEN(LR_T);
    ls->t_a = p;
    if (end - p >= 4 && memcmp(s + p, "null", 4) == 0) {
        p += 4;
        ls->t_float = -1;
    } else {
        p = json_number_end(s, p, end, &ls->t_float);
        if (p < 0 || p - ls->t_a > 40) return 0;
    }
    ls->t_b = p;
    if (end - p < 2 || s[p] != '}' || s[p + 1] != '\n') return 0;
    ls->next = p + 2;
    return 1;
}

/* The text's characters, unescaped (line_shape checked every escape), UTF-8 encoded at w. */
static Py_ssize_t unescape(const unsigned char *s, Py_ssize_t p, Py_ssize_t end, char *w) {
    Py_ssize_t o = 0;
    while (p < end) {
        const unsigned char *bs = memchr(s + p, '\\', end - p);
        Py_ssize_t stop = bs == NULL ? end : bs - s;
        memcpy(w + o, s + p, stop - p);
        o += stop - p;
        p = stop;
        if (p >= end) break;
        unsigned char c = s[p + 1];
        if (c == 'u') {
            unsigned cp = 0;
            p += unicode_escape(s, p, end, &cp);
            if (cp < 0x80) w[o++] = (char)cp;
            else if (cp < 0x800) { w[o++] = (char)(0xC0 | cp >> 6); w[o++] = (char)(0x80 | (cp & 0x3F)); }
            else if (cp < 0x10000) {
                w[o++] = (char)(0xE0 | cp >> 12); w[o++] = (char)(0x80 | (cp >> 6 & 0x3F));
                w[o++] = (char)(0x80 | (cp & 0x3F));
            } else {
                w[o++] = (char)(0xF0 | cp >> 18); w[o++] = (char)(0x80 | (cp >> 12 & 0x3F));
                w[o++] = (char)(0x80 | (cp >> 6 & 0x3F)); w[o++] = (char)(0x80 | (cp & 0x3F));
            }
            continue;
        }
        w[o++] = c == 'b' ? '\b' : c == 'f' ? '\f' : c == 'r' ? '\r' : c == 't' ? '\t' : (char)c;
        p += 2;
    }
    return o;
}

/* A number's text as Python's json makes it: int for an integer, float (correctly rounded) else. */
static PyObject *json_number(const unsigned char *s, Py_ssize_t a, Py_ssize_t b, int is_float) {
    char buf[48];
    memcpy(buf, s + a, b - a);
    buf[b - a] = '\0';
    if (!is_float) return PyLong_FromString(buf, NULL, 10);
    double d = PyOS_string_to_double(buf, NULL, NULL);
    if (d == -1.0 && PyErr_Occurred()) return NULL;
    return PyFloat_FromDouble(d);
}

/* line_run(buf, pos, src, room, cap) -> (count, end, src, ns, ts, data, recv).
 *
 * From the line starting at buf[pos]: when it is a raw line in the Recorder's shape, up to ``room``
 * such lines (``cap`` when its source is not ``src`` or room is 0) of its source, in a row: their
 * numbers, receive times, texts (UTF-8, joined by newlines) and the receive times of the texts
 * holding "Decode batch", ending at ``end``. Otherwise count is 0 and ``end`` is where the next line
 * in that shape starts (or the buffer's end): the lines before it are for the JSON decoder. */
static PyObject *line_run(PyObject *mod, PyObject *args) {
    Py_buffer view;
    Py_ssize_t pos, room, cap;
    PyObject *want;
    if (!PyArg_ParseTuple(args, "y*nOnn", &view, &pos, &want, &room, &cap)) return NULL;
    const unsigned char *s = view.buf;
    Py_ssize_t end = view.len;
    PyObject *result = NULL, *src = NULL, *ns = NULL, *ts = NULL, *recv = NULL, *data = NULL, *last_t = NULL;
    Py_ssize_t last_ta = 0, last_tn = -1;
    LineShape ls;
    if (pos < 0 || pos > end || cap < 1) {
        PyErr_SetString(PyExc_ValueError, "line_run: 0 <= pos <= len(buf), cap >= 1");
        goto done;
    }
    if (pos >= end || !line_shape(s, pos, end, &ls)) {
        Py_ssize_t p = pos;
        while (p < end) {
            const unsigned char *nl = memchr(s + p, '\n', end - p);
            p = nl == NULL ? end : nl - s + 1;
            if (p < end && line_shape(s, p, end, &ls)) break;
        }
        result = Py_BuildValue("(nnOOOOO)", (Py_ssize_t)0, p, Py_None, Py_None, Py_None, Py_None, Py_None);
        goto done;
    }
    /* its source: the one asked for when the bytes agree, else a new name */
    Py_ssize_t src_len = ls.src_b - ls.src_a, want_len = -1;
    const char *want_s = NULL;
    if (PyUnicode_Check(want)) {
        want_s = PyUnicode_AsUTF8AndSize(want, &want_len);
        if (want_s == NULL) PyErr_Clear(); /* a lone surrogate: no recorded line names it */
    }
    Py_ssize_t limit = cap;
    if (want_s != NULL && want_len == src_len && memcmp(want_s, s + ls.src_a, src_len) == 0) {
        src = Py_NewRef(want);
        if (room > 0) limit = room < cap ? room : cap;
    } else {
        src = PyUnicode_DecodeUTF8((const char *)s + ls.src_a, src_len, "strict");
        if (src == NULL) goto done;
    }
    ns = PyList_New(0);
    ts = PyList_New(0);
    recv = PyList_New(0);
    data = PyBytes_FromStringAndSize(NULL, end - pos);
    if (ns == NULL || ts == NULL || recv == NULL || data == NULL) goto done;
    char *w = PyBytes_AS_STRING(data);
    Py_ssize_t o = 0, count = 0, p = pos;
    const Py_ssize_t key_len = LR_LEN("Decode batch");
    Horspool key;
    horspool_init(&key, (const unsigned char *)"Decode batch", key_len);
    while (count < limit && p < end) {
        if (count > 0 && (!line_shape(s, p, end, &ls) || ls.src_b - ls.src_a != src_len
                          || memcmp(s + ls.src_a, s + pos + LR_LEN(LR_HEAD), src_len) != 0)) break;
        if (count > 0) w[o++] = '\n';
        Py_ssize_t line_at = o;
        if (ls.escaped) o += unescape(s, ls.text_a, ls.text_b, w + o);
        else {
            memcpy(w + o, s + ls.text_a, ls.text_b - ls.text_a);
            o += ls.text_b - ls.text_a;
        }
        long long nv = 0; /* at most 18 digits: no overflow */
        for (Py_ssize_t i = ls.n_a; i < ls.n_b; i++) nv = nv * 10 + (s[i] - '0');
        PyObject *n = PyLong_FromLongLong(nv);
        if (n == NULL || PyList_Append(ns, n) < 0) { Py_XDECREF(n); goto done; }
        Py_DECREF(n);
        /* receive times repeat for a whole batch of lines: the same object again */
        Py_ssize_t tn = ls.t_b - ls.t_a;
        if (last_t == NULL || tn != last_tn || memcmp(s + ls.t_a, s + last_ta, tn) != 0) {
            Py_XDECREF(last_t);
            last_t = ls.t_float < 0 ? Py_NewRef(Py_None) : json_number(s, ls.t_a, ls.t_b, ls.t_float);
            if (last_t == NULL) goto done;
            last_ta = ls.t_a;
            last_tn = tn;
        }
        if (PyList_Append(ts, last_t) < 0) goto done;
        if (o - line_at >= key_len && horspool_find(&key, (const unsigned char *)w + line_at, o - line_at) != NULL
            && PyList_Append(recv, last_t) < 0) goto done;
        count++;
        p = ls.next;
    }
    if (_PyBytes_Resize(&data, o) < 0) goto done;
    result = Py_BuildValue("(nnOOOOO)", count, p, src, ns, ts, data, recv);
done:
    Py_XDECREF(src);
    Py_XDECREF(ns);
    Py_XDECREF(ts);
    Py_XDECREF(recv);
    Py_XDECREF(data);
    Py_XDECREF(last_t);
    PyBuffer_Release(&view);
    return result;
}

/* --------------------------------------------------------------------------------------------
 * quiet_lines(text, shapes, token) -> (rest, count): the quiet pass (bulk.py) by shape, not by regex.
 *
 * A quiet shape is a line with every run of ASCII digits free (\d+) and every run of spaces
 * free ( +): a line has that shape when its skeleton, each digit run written "\0d", each space
 * run "\0s" and a NUL byte "\0\0", is the shape's (bulk.py writes the shapes' skeletons the
 * same way). That is the regex's language: the texts between the runs hold no digit and no
 * space, so each \d+ and " +" takes a whole run. The regex pass tried each line through the
 * shapes' trie by backtracking (180 ns a llama.cpp line); this reads it once and looks it up.
 * Every line of text (lines between newlines; text starts with one) whose skeleton is a
 * shape becomes "\n" + token in rest, as Scanner.scan writes a line it reads.
 */
#define SKEL_SLOTS 256 /* open addressing, a power of two above twice the shapes kept */

/* A skeleton's slot: its length and a few of its bytes, not a hash of every byte (a multiply per
 * byte was the loop's cost); equal keys are told apart by memcmp. */
static uint64_t skel_hash(const unsigned char *s, Py_ssize_t n) {
    uint64_t h = (uint64_t)n * 0x9E3779B97F4A7C15ULL;
    if (n > 0) h ^= ((uint64_t)s[n - 1] << 8 | s[n / 2] << 16 | s[n / 3]) * 0xC2B2AE3D27D4EB4FULL;
    return h ^ (h >> 29);
}

/* What a byte is in a skeleton: itself (0), a NUL (1), or a run's letter ('d' digits, 's' spaces). */
static const unsigned char SKEL_CLASS[256] = {
    [0] = 1, [' '] = 's', ['0'] = 'd', ['1'] = 'd', ['2'] = 'd', ['3'] = 'd', ['4'] = 'd',
    ['5'] = 'd', ['6'] = 'd', ['7'] = 'd', ['8'] = 'd', ['9'] = 'd',
};

static PyObject *quiet_lines(PyObject *mod, PyObject *args) {
    Py_buffer view, tok;
    PyObject *text, *shapes;
    if (!PyArg_ParseTuple(args, "OO!y*", &text, &PyList_Type, &shapes, &tok)) return NULL;
    if (PyObject_GetBuffer(text, &view, PyBUF_SIMPLE) < 0) {
        PyBuffer_Release(&tok);
        return NULL;
    }
    PyObject *result = NULL;
    Rest r = {NULL, NULL, 0, 0, 0};
    unsigned char *skel = NULL;
    const unsigned char *slot_s[SKEL_SLOTS] = {0};
    Py_ssize_t slot_n[SKEL_SLOTS];
    uint64_t slot_h[SKEL_SLOTS];
    Py_ssize_t nshapes = PyList_GET_SIZE(shapes), longest = 0;
    if (nshapes > SKEL_SLOTS / 2) {
        PyErr_SetString(PyExc_ValueError, "too many shapes");
        goto done;
    }
    for (Py_ssize_t k = 0; k < nshapes; k++) {
        PyObject *b = PyList_GET_ITEM(shapes, k);
        if (!PyBytes_Check(b)) {
            PyErr_SetString(PyExc_TypeError, "a shape is bytes");
            goto done;
        }
        const unsigned char *bs = (const unsigned char *)PyBytes_AS_STRING(b);
        Py_ssize_t bn = PyBytes_GET_SIZE(b);
        uint64_t h = skel_hash(bs, bn);
        size_t at = (size_t)h & (SKEL_SLOTS - 1);
        while (slot_s[at] != NULL) at = (at + 1) & (SKEL_SLOTS - 1);
        slot_s[at] = bs, slot_n[at] = bn, slot_h[at] = h;
        if (bn > longest) longest = bn;
    }
    /* A skeleton past the longest shape is none of them: the line is not read further. */
    skel = PyMem_Malloc(longest + 2);
    if (skel == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    const unsigned char *s = view.buf;
    Py_ssize_t size = view.len, count = 0;
    const unsigned char *nl = nshapes ? memchr(s, '\n', size) : NULL;
    while (nl != NULL) {
        Py_ssize_t at = nl - s;
        const unsigned char *next = memchr(nl + 1, '\n', size - at - 1);
        if (next == NULL) break;
        Py_ssize_t end = next - s, n = 0;
        int prev = 0; /* 'd' after a digit, 's' after a space */
        for (Py_ssize_t i = at + 1; i < end && n <= longest; i++) {
            unsigned char c = s[i], k = SKEL_CLASS[c];
            if (k == 0) { /* most bytes: themselves (one table look, not three tests) */
                skel[n++] = c;
                prev = 0;
            } else if (k == 1) {
                skel[n++] = 0, skel[n++] = 0, prev = 0;
            } else if (prev != k) {
                skel[n++] = 0, skel[n++] = k, prev = k;
            }
        }
        int quiet = 0;
        if (n <= longest) {
            uint64_t h = skel_hash(skel, n);
            for (size_t k = (size_t)h & (SKEL_SLOTS - 1); slot_s[k] != NULL; k = (k + 1) & (SKEL_SLOTS - 1)) {
                if (slot_h[k] == h && slot_n[k] == n && memcmp(slot_s[k], skel, n) == 0) {
                    quiet = 1;
                    break;
                }
            }
        }
        if (quiet) {
            if (rest_token(&r, s, size, at, end, &tok) < 0) goto done;
            count++;
        }
        nl = next;
    }
    PyObject *rest = rest_finish(&r, text, s, size);
    if (rest != NULL) result = Py_BuildValue("(Nn)", rest, count);
done:
    Py_XDECREF(r.buf);
    PyMem_Free(skel);
    PyBuffer_Release(&view);
    PyBuffer_Release(&tok);
    return result;
}

static PyMethodDef module_methods[] = {
    {"drop_lines", drop_lines, METH_VARARGS, "drop_lines(text, a, b) -> text without the lines that hold a and b."},
    {"count_byte", count_byte, METH_VARARGS, "count_byte(data, byte) -> how many times byte occurs in data."},
    {"holds", holds, METH_VARARGS, "holds(data, text) -> whether text occurs in data (memmem)."},
    {"count_text", count_text, METH_VARARGS, "count_text(data, text) -> data.count(text) (memmem)."},
    {"quiet_lines", quiet_lines, METH_VARARGS,
     "quiet_lines(text, shapes, token) -> (rest, count): lines whose skeleton is a shape's, as token lines."},
    {"keep_freed_memory", keep_freed_memory, METH_O,
     "keep_freed_memory(largest) -> whether freed blocks up to largest bytes are kept for reuse (glibc)."},
    {"line_run", line_run, METH_VARARGS,
     "line_run(buf, pos, src, room, cap) -> (count, end, src, ns, ts, data, recv): raw lines of a recording."},
    {"digit_run", digit_run, METH_VARARGS, "digit_run(data, n) -> whether data holds n digits in a row."},
    {"gap_average", gap_average, METH_VARARGS,
     "gap_average(times, last, ema, floor, factor) -> (ema, last, idle positions): see session._gap_average."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef scan_module = {
    PyModuleDef_HEAD_INIT, "_native", "The bulk path's template pass (see specmon.ingest.scan) and the loops run per value in C.", -1,
    module_methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__native(void) {
    if (PyType_Ready(&ScannerType) < 0) return NULL;
    if (array_type == NULL) {
        PyObject *mod = PyImport_ImportModule("array");
        if (mod == NULL) return NULL;
        array_type = PyObject_GetAttrString(mod, "array");
        Py_DECREF(mod);
        if (array_type == NULL) return NULL;
    }
    PyObject *m = PyModule_Create(&scan_module);
    if (m == NULL) return NULL;
    Py_INCREF(&ScannerType);
    if (PyModule_AddObject(m, "Scanner", (PyObject *)&ScannerType) < 0) {
        Py_DECREF(&ScannerType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
