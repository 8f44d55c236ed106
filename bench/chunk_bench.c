/*
 * chunk_bench - the client's per-event user-space work on one core: SSE
 * framing and OpenAI chunk decoding of a recorded stream.
 *
 *   chunk_bench STREAM_FILE [SECONDS]
 *
 * STREAM_FILE is a streamed response body as it came off the wire (e.g.
 * `curl -sN` of a chat completion against `tokenstorm sim`; see
 * bench/README.md). Its events are decoded again and again for SECONDS
 * (default 2) each way: the SSE parser alone; the parser and the chunk
 * decoder's fast path; the parser, the stream's memo and the fast path
 * (what `tokenstorm run` does per event: llm/openai_memo.h); the parser
 * and the full (jansson) decoder. It prints nanoseconds per event for each
 * and how many chunks the fast path and the memo took. For A/B comparisons of the decode
 * path, where a whole-client benchmark's noise (±5%) hides a few percent;
 * the kernel's share is measured by bench/perf_ab.sh. Build: ninja -C
 * build tests/unit/chunk_bench.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/buf.h"
#include "base/clock.h"
#include "base/file.h"
#include "llm/openai_chunk.h"
#include "llm/openai_memo.h"
#include "net/sse.h"

enum mode { M_SSE, M_FAST, M_MEMO, M_FULL };

struct ctx {
    struct openai_decoder d;
    struct openai_memo *memo; /* the stream's, made again for each pass */
    enum mode mode;
    unsigned long events, failed;
};

static int on_event(void *arg, const struct sse_event *ev)
{
    struct ctx *c = arg;
    c->events++;
    if (c->mode == M_SSE)
        return 0;
    struct openai_chunk out;
    int rc = c->mode == M_FAST ? openai_decode_chunk(&c->d, ev->data, ev->data_len, &out)
             : c->mode == M_MEMO
                 ? openai_decode_chunk_memo(&c->d, &c->memo, ev->data, ev->data_len, &out)
                 : openai_decode_chunk_full(&c->d, ev->data, ev->data_len, &out);
    if (rc)
        c->failed++;
    return 0;
}

/* The stream's reads: one event each (up to and including its blank line,
 * at most RX_MAX bytes), as a paced stream arrives. */
#define RX_MAX 4096

/* The reads' end offsets into ends (size_t each); 0 or -ENOMEM. */
static int cut_reads(const char *text, size_t len, struct buf *ends)
{
    for (size_t off = 0; off < len;) {
        const char *blank = memmem(text + off, len - off, "\n\n", 2);
        size_t k = blank ? (size_t)(blank + 2 - (text + off)) : len - off;
        off += k < RX_MAX ? k : RX_MAX;
        if (buf_append(ends, &off, sizeof(off)))
            return -ENOMEM;
    }
    return 0;
}

/* Feeds the stream read by read, each copied to a receive buffer and parsed
 * there in place, as the client does, until seconds have passed; returns ns
 * per event. */
static double run(struct ctx *c, const char *text, const size_t *ends, size_t nreads,
                  double seconds)
{
    struct sse_parser p;
    static char rx[RX_MAX];
    uint64_t start = ts_now_ns(), end = start + (uint64_t)(seconds * 1e9);
    c->events = c->failed = 0;
    do {
        sse_parser_init(&p, 0, on_event, c);
        for (size_t i = 0, off = 0; i < nreads; off = ends[i++]) {
            memcpy(rx, text + off, ends[i] - off);
            if (sse_parser_feed_inplace(&p, rx, ends[i] - off, 0))
                break;
        }
        (void)sse_parser_finish(&p, NULL);
        sse_parser_release(&p);
        openai_memo_free(c->memo);
        c->memo = NULL;
    } while (ts_now_ns() < end);
    return c->events ? (double)(ts_now_ns() - start) / (double)c->events : 0;
}

int main(int argc, char **argv)
{
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: chunk_bench STREAM_FILE [SECONDS]\n");
        return 2;
    }
    double seconds = argc == 3 ? atof(argv[2]) : 2.0;
    if (!(seconds > 0 && seconds <= 60)) {
        fprintf(stderr, "chunk_bench: SECONDS must be in (0, 60]\n");
        return 2;
    }
    char *text = NULL;
    size_t len = 0;
    char err[512];
    if (file_read_all(argv[1], 64u << 20, &text, &len, err, sizeof(err))) {
        fprintf(stderr, "chunk_bench: %s\n", err);
        return 2;
    }
    struct buf cuts;
    buf_init(&cuts, len * sizeof(size_t) + sizeof(size_t));
    if (cut_reads(text, len, &cuts)) {
        fprintf(stderr, "chunk_bench: out of memory\n");
        return 2;
    }
    const size_t *ends = (const size_t *)(const void *)cuts.data;
    size_t nreads = cuts.len / sizeof(size_t);
    struct ctx c;
    openai_decoder_init(&c.d);
    c.memo = NULL;
    static const char *const names[] = {"sse only", "sse + fast decode", "sse + memo + fast",
                                        "sse + full decode"};
    int rc = 0;
    for (int m = M_SSE; m <= M_FULL; m++) {
        c.mode = (enum mode)m;
        double ns = run(&c, text, ends, nreads, seconds);
        printf("%-18s %8.1f ns/event  (%lu events, %lu refused)\n", names[m], ns, c.events,
               c.failed);
        if (!c.events)
            rc = 1;
    }
    printf("fast path took %llu chunks, handed %llu to jansson; memos gave %llu\n",
           (unsigned long long)c.d.n_fast, (unsigned long long)c.d.n_fallback,
           (unsigned long long)c.d.n_memo);
    openai_decoder_release(&c.d);
    buf_release(&cuts);
    ts_free(text);
    return rc;
}
