/* Bare debezium-json payloads -> the typed columns Arrow's JSON reader gives for them, in one pass.
 *
 * Built with the package (setup.py: avro_registry_sink/formats/_debezium_scan*.so) and called through ctypes by
 * avro_registry_sink/formats/native_scan.py.
 * It takes only what it can read exactly as Arrow's reader (with the schema of
 * changelog_arrow._debezium_schema) reads it; any other message is marked declined (status 1) and is read by
 * Arrow's reader instead. Declined: not one JSON object on its line, a top-level key other than before, after,
 * op, ts_ms, source and a null transaction, a repeated key, a key with an escape, an unknown key in a row
 * image, a value of another JSON type than its column's (numbers for int64 columns: integers in int64's range;
 * for double columns: any number strtod reads without over- or underflow), a nested object or array in
 * source or a value of another type than _DEBEZIUM_SOURCE_FULL declares there (a number of an undeclared key:
 * one that over- or underflows a double), a lone UTF-16 surrogate in an escape, a raw control character in a
 * string. So what it reads, Arrow's reader reads alike (a message alone).
 *
 * A crash in the scan of a message (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT: a bug of this parser, met on
 * untrusted bytes) does not take the process down: a handler installed for the scan's time jumps back out of
 * that message (sigsetjmp/siglongjmp, the jump buffer thread-local), which is marked crashed (status 2) and
 * dead-lettered by the caller, and the scan goes on with the next. The handlers of before are restored when
 * the last scan running in the process ends; a crash in another thread meanwhile goes to them.
 *
 * Strings are written as Arrow string views: into the input itself when the string has no escape (buffer 0),
 * else unescaped into the scratch buffer (buffer 1, as large as the input: a string never grows unescaped).
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { T_INT = 0, T_DOUBLE = 1, T_STRING = 2, T_BOOL = 3 };

typedef struct {
    int64_t n;                 /* messages */
    const uint8_t *data;       /* the messages' bytes */
    const int64_t *offsets;    /* n + 1, into data */
    int32_t ncols;
    const int32_t *types;      /* ncols, T_* */
    const uint8_t *names;      /* the column names, back to back */
    const int32_t *name_offsets; /* ncols + 1 */
    uint8_t *scratch;          /* unescaped strings, as large as data */
    /* per image (0 before, 1 after): object present; per column (col * n + row): valid, value / view */
    uint8_t *image_valid[2];
    uint8_t *valid[2];
    int64_t *value[2];         /* int64, double's bits, bool as 0/1 */
    uint8_t *view[2];          /* 16 bytes each */
    uint8_t *op_valid, *op_view;
    uint8_t *ts_valid; int64_t *ts;
    uint8_t *source_valid;
    uint8_t *db_valid, *db_view, *table_valid, *table_view;
    uint8_t *commit_valid; int64_t *commit;
    uint8_t *source_ts_valid; int64_t *source_ts;
    uint8_t *meta;             /* col * n + row: a source key named like the column: 1 a value, 2 null */
    uint8_t *status;           /* n: 0 read, 1 declined, 2 crashed */
    int32_t crash_signal;      /* out: the signal of the last crash (0: none) */
    /* Tests only (NULL otherwise): n flags, the messages whose scan crashes on purpose, with fault_signal
     * (0: a read of an unmapped address) */
    const uint8_t *crash_at;
    int32_t fault_signal;
} Scan;

typedef struct {
    const uint8_t *p, *end, *data;
    uint8_t *scratch;
    int64_t used;
} Cur;

#define FAIL (-1)

#ifndef DEBEZIUM_SCAN_DIGEST
#define DEBEZIUM_SCAN_DIGEST ""
#endif

/* The digest of the source this library was built from (setup.py): the loader uses no library of another. */
const char *debezium_scan_digest(void) { return DEBEZIUM_SCAN_DIGEST; }

static inline void ws(Cur *c) {
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t')) c->p++;
}

static inline int peek(Cur *c) { return c->p < c->end ? *c->p : -1; }

static int literal(Cur *c, const char *word, size_t len) {
    if ((size_t)(c->end - c->p) < len || memcmp(c->p, word, len) != 0) return FAIL;
    c->p += len;
    return 0;
}

static void put_view(uint8_t *out, const uint8_t *bytes, int64_t len, int32_t buffer, int64_t offset) {
    int32_t size = (int32_t)len;
    memset(out, 0, 16);
    memcpy(out, &size, 4);
    if (len <= 12) {
        memcpy(out + 4, bytes, (size_t)len);
    } else {
        int32_t off = (int32_t)offset;
        memcpy(out + 4, bytes, 4);
        memcpy(out + 8, &buffer, 4);
        memcpy(out + 12, &off, 4);
    }
}

static int hex4(const uint8_t *p, uint32_t *out) {
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) {
        uint8_t ch = p[i];
        v <<= 4;
        if (ch >= '0' && ch <= '9') v |= (uint32_t)(ch - '0');
        else if (ch >= 'a' && ch <= 'f') v |= (uint32_t)(ch - 'a' + 10);
        else if (ch >= 'A' && ch <= 'F') v |= (uint32_t)(ch - 'A' + 10);
        else return FAIL;
    }
    *out = v;
    return 0;
}

/* A string at c->p (its opening quote). view != NULL: written as a view; raw_key != NULL: the raw bytes of a
 * key, which must hold no escape. */
static int string(Cur *c, uint8_t *view, const uint8_t **raw, int64_t *raw_len) {
    c->p++;
    const uint8_t *start = c->p;
    while (c->p < c->end) {
        uint8_t ch = *c->p;
        if (ch == '"') break;
        if (ch == '\\') goto escaped;
        if (ch < 0x20) return FAIL;
        c->p++;
    }
    if (c->p >= c->end) return FAIL;
    if (raw) { *raw = start; *raw_len = c->p - start; }
    if (view) put_view(view, start, c->p - start, 0, start - c->data);
    c->p++;
    return 0;
escaped:
    if (!view) return FAIL; /* keys (and skipped values) with escapes: declined / validated below */
    {
        uint8_t *out = c->scratch + c->used;
        uint8_t *w = out;
        memcpy(w, start, (size_t)(c->p - start));
        w += c->p - start;
        while (c->p < c->end) {
            uint8_t ch = *c->p;
            if (ch == '"') break;
            if (ch < 0x20) return FAIL;
            if (ch != '\\') { *w++ = ch; c->p++; continue; }
            if (c->end - c->p < 2) return FAIL;
            uint8_t e = c->p[1];
            c->p += 2;
            switch (e) {
            case '"': *w++ = '"'; break;
            case '\\': *w++ = '\\'; break;
            case '/': *w++ = '/'; break;
            case 'b': *w++ = '\b'; break;
            case 'f': *w++ = '\f'; break;
            case 'n': *w++ = '\n'; break;
            case 'r': *w++ = '\r'; break;
            case 't': *w++ = '\t'; break;
            case 'u': {
                uint32_t cp;
                if (c->end - c->p < 4 || hex4(c->p, &cp) != 0) return FAIL;
                c->p += 4;
                if (cp >= 0xDC00 && cp <= 0xDFFF) return FAIL;
                if (cp >= 0xD800 && cp <= 0xDBFF) {
                    uint32_t low;
                    if (c->end - c->p < 6 || c->p[0] != '\\' || c->p[1] != 'u' || hex4(c->p + 2, &low) != 0
                        || low < 0xDC00 || low > 0xDFFF) return FAIL;
                    c->p += 6;
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
                }
                if (cp < 0x80) *w++ = (uint8_t)cp;
                else if (cp < 0x800) { *w++ = (uint8_t)(0xC0 | (cp >> 6)); *w++ = (uint8_t)(0x80 | (cp & 0x3F)); }
                else if (cp < 0x10000) {
                    *w++ = (uint8_t)(0xE0 | (cp >> 12)); *w++ = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
                    *w++ = (uint8_t)(0x80 | (cp & 0x3F));
                } else {
                    *w++ = (uint8_t)(0xF0 | (cp >> 18)); *w++ = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
                    *w++ = (uint8_t)(0x80 | ((cp >> 6) & 0x3F)); *w++ = (uint8_t)(0x80 | (cp & 0x3F));
                }
                break;
            }
            default: return FAIL;
            }
        }
        if (c->p >= c->end) return FAIL;
        c->p++;
        int64_t len = w - out;
        put_view(view, out, len, 1, c->used);
        c->used += len;
        return 0;
    }
}

/* A JSON number at c->p: its grammar checked; *is_int: no fraction, no exponent. */
static int number(Cur *c, const uint8_t **start, int *is_int) {
    const uint8_t *p = c->p, *end = c->end;
    *start = p;
    *is_int = 1;
    if (p < end && *p == '-') p++;
    if (p >= end) return FAIL;
    if (*p == '0') p++;
    else if (*p >= '1' && *p <= '9') { while (p < end && *p >= '0' && *p <= '9') p++; }
    else return FAIL;
    if (p < end && *p == '.') {
        *is_int = 0;
        p++;
        if (p >= end || *p < '0' || *p > '9') return FAIL;
        while (p < end && *p >= '0' && *p <= '9') p++;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        *is_int = 0;
        p++;
        if (p < end && (*p == '+' || *p == '-')) p++;
        if (p >= end || *p < '0' || *p > '9') return FAIL;
        while (p < end && *p >= '0' && *p <= '9') p++;
    }
    c->p = p;
    return 0;
}

static int int_value(Cur *c, int64_t *out) {
    const uint8_t *s;
    int is_int;
    if (number(c, &s, &is_int) != 0 || !is_int) return FAIL;
    int negative = *s == '-';
    const uint8_t *d = s + negative;
    if (c->p - d > 19) return FAIL;
    uint64_t v = 0;
    for (; d < c->p; d++) v = v * 10 + (uint64_t)(*d - '0');  /* 19 digits fit in uint64 */
    if (negative) {
        if (v > (uint64_t)INT64_MAX + 1) return FAIL;
        *out = (int64_t)(0 - v);
    } else {
        if (v > (uint64_t)INT64_MAX) return FAIL;
        *out = (int64_t)v;
    }
    return 0;
}

static int double_value(Cur *c, double *out) {
    const uint8_t *s;
    int is_int;
    char buf[64];
    if (number(c, &s, &is_int) != 0) return FAIL;
    size_t len = (size_t)(c->p - s);
    if (len >= sizeof buf) return FAIL;
    memcpy(buf, s, len);
    buf[len] = 0;
    char *stop;
    errno = 0;
    double v = strtod(buf, &stop);
    if (stop != buf + len || errno != 0) return FAIL;  /* another locale's decimal point; over- or underflow */
    *out = v;
    return 0;
}

/* A scalar value skipped (validated): a string, a number, true, false or null. */
static int skip_scalar(Cur *c) {
    int ch = peek(c);
    if (ch == '"') {
        const uint8_t *raw;
        int64_t len;
        uint8_t view[16];
        const uint8_t *p = c->p;
        if (string(c, NULL, &raw, &len) == 0) return 0;
        c->p = p;  /* with an escape: unescaped into scratch only to validate it */
        int64_t used = c->used;
        int r = string(c, view, NULL, NULL);
        c->used = used;
        return r;
    }
    if (ch == 't') return literal(c, "true", 4);
    if (ch == 'f') return literal(c, "false", 5);
    if (ch == 'n') return literal(c, "null", 4);
    const uint8_t *s;
    int is_int;
    return number(c, &s, &is_int);
}

static int key(Cur *c, const uint8_t **raw, int64_t *len) {
    if (peek(c) != '"' || string(c, NULL, raw, len) != 0) return FAIL;
    ws(c);
    if (peek(c) != ':') return FAIL;
    c->p++;
    ws(c);
    return 0;
}

static inline int is(const uint8_t *raw, int64_t len, const char *word) {
    size_t n = strlen(word);
    return (size_t)len == n && memcmp(raw, word, n) == 0;
}

static int column_of(const Scan *s, const uint8_t *raw, int64_t len, int32_t hint) {
    if (hint >= 0 && hint < s->ncols) {
        int32_t a = s->name_offsets[hint], b = s->name_offsets[hint + 1];
        if (b - a == len && memcmp(s->names + a, raw, (size_t)len) == 0) return hint;
    }
    for (int32_t j = 0; j < s->ncols; j++) {
        int32_t a = s->name_offsets[j], b = s->name_offsets[j + 1];
        if (b - a == len && memcmp(s->names + a, raw, (size_t)len) == 0) return j;
    }
    return -1;
}

/* ',' then another member, or '}': 1 another, 0 the end. */
static int next_member(Cur *c) {
    ws(c);
    int ch = peek(c);
    if (ch == ',') { c->p++; ws(c); return 1; }
    if (ch == '}') { c->p++; return 0; }
    return FAIL;
}

static int image(const Scan *s, Cur *c, int which, int64_t row, uint8_t *seen) {
    int64_t n = s->n;
    c->p++;  /* '{' */
    ws(c);
    s->image_valid[which][row] = 1;
    if (peek(c) == '}') { c->p++; return 0; }
    memset(seen, 0, (size_t)s->ncols);
    int32_t hint = 0;
    for (;;) {
        const uint8_t *raw;
        int64_t len;
        if (key(c, &raw, &len) != 0) return FAIL;
        int32_t j = column_of(s, raw, len, hint);
        if (j < 0 || seen[j]) return FAIL;
        seen[j] = 1;
        hint = j + 1;
        int64_t at = (int64_t)j * n + row;
        int ch = peek(c);
        if (ch == 'n') {
            if (literal(c, "null", 4) != 0) return FAIL;
        } else {
            switch (s->types[j]) {
            case T_INT:
                if (int_value(c, &s->value[which][at]) != 0) return FAIL;
                break;
            case T_DOUBLE: {
                double v;
                if (double_value(c, &v) != 0) return FAIL;
                memcpy(&s->value[which][at], &v, 8);
                break;
            }
            case T_STRING:
                if (ch != '"' || string(c, s->view[which] + at * 16, NULL, NULL) != 0) return FAIL;
                break;
            case T_BOOL:
                if (ch == 't') { if (literal(c, "true", 4) != 0) return FAIL; s->value[which][at] = 1; }
                else if (ch == 'f') { if (literal(c, "false", 5) != 0) return FAIL; s->value[which][at] = 0; }
                else return FAIL;
                break;
            default:
                return FAIL;
            }
            s->valid[which][at] = 1;
        }
        int more = next_member(c);
        if (more < 0) return FAIL;
        if (!more) return 0;
    }
}

/* The other keys of source that changelog_arrow._DEBEZIUM_SOURCE_FULL declares: strings, then integers. */
static const char *const declared_keys[] = {"version", "connector", "name", "snapshot", "gtid", "file", "query",
                                            "cluster_id", "server_id", "pos", "row", "thread"};
enum { DECLARED_STRINGS = 8, DECLARED = 12, UNDECLARED_MAX = 16 };

/* The index of a declared key in declared_keys (-1: none). */
static int declared_key(const uint8_t *raw, int64_t len) {
    for (int i = 0; i < DECLARED; i++) if (is(raw, len, declared_keys[i])) return i;
    return -1;
}

/* An undeclared key's number: Arrow's reader infers int64 for an integer in its range, else double, and refuses
 * one that overflows a double; an underflow, which it reads as 0, is declined too (read by Arrow's reader). */
static int undeclared_number(Cur *c) {
    const uint8_t *start = c->p, *s;
    int is_int;
    if (number(c, &s, &is_int) != 0) return FAIL;
    if (is_int && c->p - s - (*s == '-') <= 18) return 0;
    c->p = start;
    double ignored;
    return double_value(c, &ignored);
}

static int source(const Scan *s, Cur *c, int64_t row, uint8_t *seen) {
    int64_t n = s->n;
    c->p++;  /* '{' */
    ws(c);
    s->source_valid[row] = 1;
    if (peek(c) == '}') { c->p++; return 0; }
    memset(seen, 0, (size_t)s->ncols);
    unsigned special = 0, declared_seen = 0;
    /* the undeclared keys so far: Arrow's reader refuses a repeated key, any key */
    const uint8_t *other[UNDECLARED_MAX];
    int64_t other_len[UNDECLARED_MAX];
    int others = 0;
    for (;;) {
        const uint8_t *raw;
        int64_t len;
        if (key(c, &raw, &len) != 0) return FAIL;
        int ch = peek(c);
        int slot = is(raw, len, "db") ? 0 : is(raw, len, "table") ? 1 : is(raw, len, "commit_ts") ? 2
                 : is(raw, len, "ts_ms") ? 3 : -1;
        if (slot >= 0) {
            if (special & (1u << slot)) return FAIL;
            special |= 1u << slot;
            if (ch == 'n') {
                if (literal(c, "null", 4) != 0) return FAIL;
            } else if (slot < 2) {
                uint8_t *view = slot == 0 ? s->db_view + row * 16 : s->table_view + row * 16;
                if (ch != '"' || string(c, view, NULL, NULL) != 0) return FAIL;
                (slot == 0 ? s->db_valid : s->table_valid)[row] = 1;
            } else {
                if (int_value(c, slot == 2 ? &s->commit[row] : &s->source_ts[row]) != 0) return FAIL;
                (slot == 2 ? s->commit_valid : s->source_ts_valid)[row] = 1;
            }
        } else {
            int32_t j = column_of(s, raw, len, -1);
            if (j >= 0) {  /* a key named like a column: counted against the message text's keys */
                if (seen[j]) return FAIL;
                seen[j] = 1;
                s->meta[(int64_t)j * n + row] = ch == 'n' ? 2 : 1;
            }
            if (ch == '{' || ch == '[') return FAIL;
            int declared = declared_key(raw, len);
            if (declared >= 0) {
                if (declared_seen & (1u << declared)) return FAIL;
                declared_seen |= 1u << declared;
            } else {
                for (int k = 0; k < others; k++)
                    if (other_len[k] == len && memcmp(other[k], raw, (size_t)len) == 0) return FAIL;
                if (others == UNDECLARED_MAX) return FAIL;
                other[others] = raw;
                other_len[others++] = len;
            }
            if (ch == 'n' || (declared < 0 && ch != '-' && (ch < '0' || ch > '9'))) {
                if (skip_scalar(c) != 0) return FAIL;
            } else if (declared < 0) {
                if (undeclared_number(c) != 0) return FAIL;
            } else if (declared < DECLARED_STRINGS) {
                if (ch != '"' || skip_scalar(c) != 0) return FAIL;
            } else {
                int64_t ignored;
                if (int_value(c, &ignored) != 0) return FAIL;
            }
        }
        int more = next_member(c);
        if (more < 0) return FAIL;
        if (!more) return 0;
    }
}

static int message(const Scan *s, Cur *c, int64_t row, uint8_t *seen) {
    ws(c);
    if (peek(c) != '{') return FAIL;
    c->p++;
    ws(c);
    if (peek(c) == '}') return FAIL;
    unsigned got = 0;
    for (;;) {
        const uint8_t *raw;
        int64_t len;
        if (key(c, &raw, &len) != 0) return FAIL;
        int ch = peek(c);
        int slot = is(raw, len, "before") ? 0 : is(raw, len, "after") ? 1 : is(raw, len, "op") ? 2
                 : is(raw, len, "ts_ms") ? 3 : is(raw, len, "source") ? 4 : is(raw, len, "transaction") ? 5 : -1;
        if (slot < 0 || (got & (1u << slot))) return FAIL;
        got |= 1u << slot;
        if (ch == 'n') {
            if (literal(c, "null", 4) != 0) return FAIL;
        } else if (slot <= 1) {
            if (ch != '{' || image(s, c, slot, row, seen) != 0) return FAIL;
        } else if (slot == 2) {
            if (ch != '"' || string(c, s->op_view + row * 16, NULL, NULL) != 0) return FAIL;
            s->op_valid[row] = 1;
        } else if (slot == 3) {
            if (int_value(c, &s->ts[row]) != 0) return FAIL;
            s->ts_valid[row] = 1;
        } else if (slot == 4) {
            if (ch != '{' || source(s, c, row, seen) != 0) return FAIL;
        } else {
            return FAIL;  /* a transaction block: Arrow's reader */
        }
        int more = next_member(c);
        if (more < 0) return FAIL;
        if (!more) break;
    }
    ws(c);
    return c->p == c->end ? 0 : FAIL;
}

static void clear_row(const Scan *s, int64_t row) {
    int64_t n = s->n;
    for (int w = 0; w < 2; w++) {
        s->image_valid[w][row] = 0;
        for (int32_t j = 0; j < s->ncols; j++) s->valid[w][(int64_t)j * n + row] = 0;
    }
    s->op_valid[row] = s->ts_valid[row] = s->source_valid[row] = 0;
    s->db_valid[row] = s->table_valid[row] = s->commit_valid[row] = s->source_ts_valid[row] = 0;
    for (int32_t j = 0; j < s->ncols; j++) s->meta[(int64_t)j * n + row] = 0;
}

static const int crash_signals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
enum { CRASH_SIGNALS = sizeof crash_signals / sizeof *crash_signals };
static pthread_mutex_t guard_lock = PTHREAD_MUTEX_INITIALIZER;
static int guard_users;                              /* scans running, in all threads */
static struct sigaction previous[CRASH_SIGNALS];     /* the handlers before the first of them */
static _Thread_local sigjmp_buf *volatile guard_jump; /* this thread's scan, while it runs */

static void on_crash(int sig, siginfo_t *info, void *context) {
    sigjmp_buf *jump = guard_jump;
    if (jump) {
        guard_jump = NULL;
        siglongjmp(*jump, sig);
    }
    /* not in a scan (another thread): what the handler before ours does */
    for (int i = 0; i < CRASH_SIGNALS; i++) {
        if (crash_signals[i] != sig) continue;
        const struct sigaction *prev = &previous[i];
        if (prev->sa_flags & SA_SIGINFO) { prev->sa_sigaction(sig, info, context); return; }
        if (prev->sa_handler == SIG_IGN) return;
        if (prev->sa_handler != SIG_DFL) { prev->sa_handler(sig); return; }
    }
    signal(sig, SIG_DFL);  /* the default action: raised again on return (a fault faults again) */
    raise(sig);
}

static void guard_enter(void) {
    pthread_mutex_lock(&guard_lock);
    if (guard_users++ == 0) {
        struct sigaction action;
        memset(&action, 0, sizeof action);
        action.sa_sigaction = on_crash;
        action.sa_flags = SA_SIGINFO | SA_ONSTACK;
        sigemptyset(&action.sa_mask);
        for (int i = 0; i < CRASH_SIGNALS; i++) sigaction(crash_signals[i], &action, &previous[i]);
    }
    pthread_mutex_unlock(&guard_lock);
}

static void guard_leave(void) {
    pthread_mutex_lock(&guard_lock);
    if (--guard_users == 0)
        for (int i = 0; i < CRASH_SIGNALS; i++) sigaction(crash_signals[i], &previous[i], NULL);
    pthread_mutex_unlock(&guard_lock);
}

static volatile uintptr_t unmapped = 8;  /* the tests' fault: an address no process maps */

static void crash_on_purpose(int sig) {
    if (sig == 0) (void)*(volatile const uint8_t *)unmapped;
    else raise(sig);
}

/* The messages from *row on; *row and *used (the scratch bytes taken) follow each message read, so that a crash
 * resumes after the message it happened in. */
static void scan_rows(const Scan *s, volatile int64_t *row, volatile int64_t *used, uint8_t *seen) {
    Cur c = {0};
    c.data = s->data;
    c.scratch = s->scratch;
    for (; *row < s->n; (*row)++) {
        int64_t r = *row;
        if (s->crash_at && s->crash_at[r]) crash_on_purpose(s->fault_signal);
        c.p = s->data + s->offsets[r];
        c.end = s->data + s->offsets[r + 1];
        c.used = *used;
        if (message(s, &c, r, seen) != 0) {
            clear_row(s, r);
            s->status[r] = 1;
        } else {
            *used = c.used;
        }
    }
}

/* Reads every message; returns how many were declined or crashed (-1: out of memory). The outputs must come
 * zeroed. */
int64_t debezium_scan(Scan *s) {
    uint8_t *seen = malloc((size_t)(s->ncols > 0 ? s->ncols : 1));
    if (!seen) return -1;
    volatile int64_t row = 0, used = 0;
    sigjmp_buf jump;
    guard_enter();
    int sig = sigsetjmp(jump, 1);
    if (sig != 0) {  /* the scan of message `row` crashed: set aside, the next one follows */
        clear_row(s, row);
        s->status[row] = 2;
        s->crash_signal = sig;
        row++;
    }
    guard_jump = &jump;
    scan_rows(s, &row, &used, seen);
    guard_jump = NULL;
    guard_leave();
    free(seen);
    int64_t declined = 0;
    for (int64_t r = 0; r < s->n; r++) declined += s->status[r] != 0;
    return declined;
}
