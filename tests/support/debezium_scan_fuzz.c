/* A mutation fuzzer of the debezium-json scanner (avro_registry_sink/formats/native/debezium_scan.c), built by
 * tests/unit/test_native_fuzz.py with AddressSanitizer and UndefinedBehaviorSanitizer (no recovery: the first
 * report ends the run with a failure). Where no libFuzzer is at hand (gcc): a hand-written loop.
 *
 *   debezium_scan_fuzz SEEDS SECONDS RANDOM_SEED
 *
 * SEEDS: groups of messages, each opened by a line "#shape name:type,..." (type: 0 int64, 1 double, 2 string,
 * 3 bool, as the scanner's T_*) and followed by one message a line. Each round mutates seeds of one group (bit
 * flips, bytes, JSON tokens and the group's keys inserted, ranges deleted or repeated, splices of two seeds) and
 * scans them: most often one message in a buffer of its exact size (a read past it is a report), else a batch.
 * The scanner's own crash guard is left out (scan_rows is called, not debezium_scan): here a fault must be a
 * report. After each scan the outputs are checked: every status 0 or 1, a declined message's row all null, every
 * string view inside its buffer. Prints the counts at the end; exits 0 when nothing was found.
 */
#include "debezium_scan.c"

#include <stdio.h>
#include <time.h>

typedef struct {
    int32_t ncols;
    int32_t *types, *name_offsets;
    uint8_t *names;
    uint8_t **messages;
    size_t *lens;
    int count;
} Group;

static uint64_t rng_state;

static uint64_t next_random(void) {  /* xorshift64* */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 2685821657736338717ULL;
}

static size_t below(size_t n) { return n ? (size_t)(next_random() % n) : 0; }

static void fail(const char *what) {
    fprintf(stderr, "debezium_scan_fuzz: %s\n", what);
    abort();
}

static void *must(void *p) {
    if (!p) fail("out of memory");
    return p;
}

static const char *const tokens[] = {
    "null", "true", "false", "\"", "\\", "\\u", "\\u00e9", "\\ud83d", "\\ude00", "\\ud83d\\ude00", "\\\"", "{", "}",
    "[", "]", ",", ":", "{}", "[]", "1e400", "-1e400", "1e-400", "9223372036854775807", "9223372036854775808",
    "-9223372036854775808", "-9223372036854775809", "0", "-0", "01", "1.", ".5", "1e", "-", "0.0e+5",
    "12345678901234567890123456789012345678901234567890123456789012345678901234567890", "\"op\":\"u\"", "\"op\":",
    "\"before\":", "\"after\":", "\"source\":", "\"source\":{}", "\"transaction\":null", "\"ts_ms\":1",
    "\"db\":\"d\"", "\"table\":\"t\"", "\"commit_ts\":1", "\"seq\":1", "\"name\":\"x\"", "\"pos\":1", ",\"x\":1",
    " ", "\t", "\n", "\x01", "\xc3\xa9", "\xff",
};
enum { TOKENS = sizeof tokens / sizeof *tokens, MAX_LEN = 1 << 16 };

static size_t insert(uint8_t *buf, size_t len, size_t at, const uint8_t *piece, size_t n) {
    if (len + n > MAX_LEN) return len;
    memmove(buf + at + n, buf + at, len - at);
    memcpy(buf + at, piece, n);
    return len + n;
}

/* A seed of g mutated into buf (MAX_LEN bytes); returns its length. */
static size_t mutate(const Group *g, uint8_t *buf) {
    int k = (int)below((size_t)g->count);
    size_t len = g->lens[k];
    memcpy(buf, g->messages[k], len);
    int edits = 1 + (int)below(6);
    for (int e = 0; e < edits; e++) {
        size_t at = below(len + 1);
        switch (below(9)) {
        case 0:
            if (len) buf[below(len)] ^= (uint8_t)(1u << below(8));
            break;
        case 1:
            if (len) buf[below(len)] = (uint8_t)next_random();
            break;
        case 2: {
            const char *t = tokens[below(TOKENS)];
            len = insert(buf, len, at, (const uint8_t *)t, strlen(t));
            break;
        }
        case 3: {  /* a key of the group's shape */
            int32_t j = (int32_t)below((size_t)g->ncols);
            if (!g->ncols) break;
            uint8_t key[300];
            size_t n = (size_t)(g->name_offsets[j + 1] - g->name_offsets[j]);
            if (n > 290) break;
            key[0] = '"';
            memcpy(key + 1, g->names + g->name_offsets[j], n);
            key[n + 1] = '"';
            key[n + 2] = ':';
            len = insert(buf, len, at, key, n + 3);
            break;
        }
        case 4: {  /* a range deleted */
            size_t n = 1 + below(16);
            if (at + n > len) n = len - at;
            memmove(buf + at, buf + at + n, len - at - n);
            len -= n;
            break;
        }
        case 5: {  /* a range repeated */
            if (!len) break;
            size_t from = below(len), n = 1 + below(32);
            if (from + n > len) n = len - from;
            uint8_t piece[32];
            memcpy(piece, buf + from, n);
            len = insert(buf, len, at, piece, n);
            break;
        }
        case 6: {  /* the tail of another seed */
            int o = (int)below((size_t)g->count);
            size_t from = below(g->lens[o] + 1), n = g->lens[o] - from;
            if (at + n > MAX_LEN) break;
            memcpy(buf + at, g->messages[o] + from, n);
            len = at + n;
            break;
        }
        case 7:
            len = at;
            break;
        default: {  /* a digit run or a quote where a value is */
            static const char *const values[] = {"\"a\"", "1", "1.5", "-7", "true", "null", "\"\\u0000\""};
            const char *v = values[below(sizeof values / sizeof *values)];
            len = insert(buf, len, at, (const uint8_t *)v, strlen(v));
            break;
        }
        }
    }
    return len;
}

static void check_view(const uint8_t *view, int64_t data_len, int64_t scratch_used) {
    int32_t size, buffer, offset;
    memcpy(&size, view, 4);
    if (size < 0) fail("a string view of negative size");
    if (size <= 12) return;
    memcpy(&buffer, view + 8, 4);
    memcpy(&offset, view + 12, 4);
    if (offset < 0 || (buffer == 0 && (int64_t)offset + size > data_len) ||
        (buffer == 1 && (int64_t)offset + size > scratch_used) || (buffer != 0 && buffer != 1))
        fail("a string view outside its buffer");
}

static void *zeroed(size_t count, size_t size) { return must(calloc(count ? count : 1, size)); }

typedef struct {
    long long scans, messages, read, declined;
} Counts;

/* The messages (each in a buffer of its own exact size when n == 1) scanned and checked. */
static void scan(const Group *g, uint8_t *const *texts, const size_t *lens, int64_t n, Counts *counts) {
    int64_t total = 0, k = g->ncols;
    for (int64_t i = 0; i < n; i++) total += (int64_t)lens[i];
    uint8_t *data = must(malloc(total ? (size_t)total : 1));
    int64_t *offsets = must(malloc(sizeof(int64_t) * (size_t)(n + 1)));
    offsets[0] = 0;
    for (int64_t i = 0; i < n; i++) {
        memcpy(data + offsets[i], texts[i], lens[i]);
        offsets[i + 1] = offsets[i] + (int64_t)lens[i];
    }
    Scan s;
    memset(&s, 0, sizeof s);
    s.n = n;
    s.data = data;
    s.offsets = offsets;
    s.ncols = g->ncols;
    s.types = g->types;
    s.names = g->names;
    s.name_offsets = g->name_offsets;
    s.scratch = must(malloc(total ? (size_t)total : 1));
    size_t nk = (size_t)(n * k);
    for (int w = 0; w < 2; w++) {
        s.image_valid[w] = zeroed((size_t)n, sizeof(uint8_t));
        s.valid[w] = zeroed(nk, sizeof(uint8_t));
        s.value[w] = zeroed(nk, sizeof(int64_t));
        s.view[w] = zeroed(nk * 16, sizeof(uint8_t));
    }
    s.op_valid = zeroed((size_t)n, sizeof(uint8_t));
    s.op_view = zeroed((size_t)n * 16, sizeof(uint8_t));
    s.ts_valid = zeroed((size_t)n, sizeof(uint8_t));
    s.ts = zeroed((size_t)n, sizeof(int64_t));
    s.source_valid = zeroed((size_t)n, sizeof(uint8_t));
    s.db_valid = zeroed((size_t)n, sizeof(uint8_t));
    s.db_view = zeroed((size_t)n * 16, sizeof(uint8_t));
    s.table_valid = zeroed((size_t)n, sizeof(uint8_t));
    s.table_view = zeroed((size_t)n * 16, sizeof(uint8_t));
    s.commit_valid = zeroed((size_t)n, sizeof(uint8_t));
    s.commit = zeroed((size_t)n, sizeof(int64_t));
    s.source_ts_valid = zeroed((size_t)n, sizeof(uint8_t));
    s.source_ts = zeroed((size_t)n, sizeof(int64_t));
    s.meta = zeroed(nk, sizeof(uint8_t));
    s.status = zeroed((size_t)n, sizeof(uint8_t));
    uint8_t *seen = zeroed((size_t)k, sizeof(uint8_t));
    volatile int64_t row = 0, used = 0;
    scan_rows(&s, &row, &used, seen);
    counts->scans++;
    for (int64_t r = 0; r < n; r++) {
        counts->messages++;
        if (s.status[r] > 1) fail("a status other than read or declined");
        if (s.status[r] == 1) {
            counts->declined++;
            int any = s.image_valid[0][r] | s.image_valid[1][r] | s.op_valid[r] | s.ts_valid[r] | s.source_valid[r] |
                      s.db_valid[r] | s.table_valid[r] | s.commit_valid[r] | s.source_ts_valid[r];
            for (int64_t j = 0; j < k; j++) any |= s.valid[0][j * n + r] | s.valid[1][j * n + r] | s.meta[j * n + r];
            if (any) fail("a declined message with values");
            continue;
        }
        counts->read++;
        if (s.op_valid[r]) check_view(s.op_view + r * 16, total, used);
        if (s.db_valid[r]) check_view(s.db_view + r * 16, total, used);
        if (s.table_valid[r]) check_view(s.table_view + r * 16, total, used);
        for (int64_t j = 0; j < k; j++)
            for (int w = 0; w < 2; w++)
                if (g->types[j] == T_STRING && s.valid[w][j * n + r]) check_view(s.view[w] + (j * n + r) * 16, total, used);
    }
    for (int w = 0; w < 2; w++) {
        free(s.image_valid[w]);
        free(s.valid[w]);
        free(s.value[w]);
        free(s.view[w]);
    }
    void *rest[] = {s.op_valid, s.op_view, s.ts_valid, s.ts, s.source_valid, s.db_valid, s.db_view, s.table_valid,
                    s.table_view, s.commit_valid, s.commit, s.source_ts_valid, s.source_ts, s.meta, s.status, seen,
                    s.scratch, offsets, data};
    for (size_t i = 0; i < sizeof rest / sizeof *rest; i++) free(rest[i]);
}

static int read_groups(const char *path, Group **out) {
    FILE *f = fopen(path, "rb");
    if (!f) fail("cannot open the seeds");
    Group *groups = NULL;
    int ngroups = 0;
    char *line = NULL;
    size_t cap = 0;
    ssize_t got;
    while ((got = getline(&line, &cap, f)) > 0) {
        size_t len = (size_t)got;
        while (len && (line[len - 1] == '\n' || line[len - 1] == '\r')) len--;
        if (len >= 7 && memcmp(line, "#shape ", 7) == 0) {
            groups = must(realloc(groups, sizeof(Group) * (size_t)(ngroups + 1)));
            Group *g = &groups[ngroups++];
            memset(g, 0, sizeof *g);
            g->names = must(malloc(len + 1));
            g->types = must(malloc(sizeof(int32_t) * (len + 1)));
            g->name_offsets = must(malloc(sizeof(int32_t) * (len + 2)));
            g->name_offsets[0] = 0;
            size_t i = 7;
            int32_t at = 0;
            while (i < len) {
                size_t colon = i;
                while (colon < len && line[colon] != ':') colon++;
                if (colon + 1 >= len) fail("a shape's column without its type");
                memcpy(g->names + at, line + i, colon - i);
                at += (int32_t)(colon - i);
                g->types[g->ncols] = line[colon + 1] - '0';
                g->name_offsets[++g->ncols] = at;
                i = colon + 2;
                if (i < len && line[i] == ',') i++;
            }
            continue;
        }
        if (!ngroups) fail("a message before the first #shape line");
        Group *g = &groups[ngroups - 1];
        g->messages = must(realloc(g->messages, sizeof(uint8_t *) * (size_t)(g->count + 1)));
        g->lens = must(realloc(g->lens, sizeof(size_t) * (size_t)(g->count + 1)));
        g->messages[g->count] = must(malloc(len ? len : 1));
        memcpy(g->messages[g->count], line, len);
        g->lens[g->count++] = len > MAX_LEN ? MAX_LEN : len;
    }
    free(line);
    fclose(f);
    for (int i = 0; i < ngroups; i++) if (!groups[i].count) fail("a #shape line without messages");
    *out = groups;
    return ngroups;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s SEEDS SECONDS RANDOM_SEED\n", argv[0]);
        return 2;
    }
    Group *groups;
    int ngroups = read_groups(argv[1], &groups);
    double seconds = atof(argv[2]);
    rng_state = strtoull(argv[3], NULL, 10) * 2654435761ULL + 1;
    enum { BATCH = 16 };
    uint8_t *bufs[BATCH];
    size_t lens[BATCH];
    for (int i = 0; i < BATCH; i++) bufs[i] = must(malloc(MAX_LEN));
    Counts counts = {0, 0, 0, 0};
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (;;) {
        clock_gettime(CLOCK_MONOTONIC, &now);
        double elapsed = (double)(now.tv_sec - start.tv_sec) + (double)(now.tv_nsec - start.tv_nsec) / 1e9;
        if (elapsed >= seconds) {
            printf("%lld scans, %lld messages, %lld read, %lld declined in %.1f s\n", counts.scans, counts.messages,
                   counts.read, counts.declined, elapsed);
            break;
        }
        for (int round = 0; round < 64; round++) {
            const Group *g = &groups[below((size_t)ngroups)];
            int n = below(4) ? 1 : 2 + (int)below(BATCH - 1);
            for (int i = 0; i < n; i++) {
                /* a seed as it is now and then: the read path is checked too */
                if (below(8) == 0) {
                    int k = (int)below((size_t)g->count);
                    lens[i] = g->lens[k];
                    memcpy(bufs[i], g->messages[k], lens[i]);
                } else {
                    lens[i] = mutate(g, bufs[i]);
                }
            }
            scan(g, bufs, lens, n, &counts);
        }
    }
    for (int i = 0; i < BATCH; i++) free(bufs[i]);
    for (int i = 0; i < ngroups; i++) {
        for (int k = 0; k < groups[i].count; k++) free(groups[i].messages[k]);
        void *parts[] = {groups[i].messages, groups[i].lens, groups[i].names, groups[i].types, groups[i].name_offsets};
        for (size_t p = 0; p < sizeof parts / sizeof *parts; p++) free(parts[p]);
    }
    free(groups);
    return 0;
}
