/*
 * fuzz_recording.c - the recording reader (llm/recording.h) on arbitrary
 * bytes, each line an exchange: what it accepts must be well formed (a path
 * starting with '/', a 16-digit hash, events in bounds, NUL-terminated
 * strings of the lengths it says; a WebSocket session carries its offset
 * only); a rejection must leave a message.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "llm/recording.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t off = 0;
    char hash[17];
    recording_body_hash((const char *)data, size, hash);
    if (strlen(hash) != 16)
        __builtin_trap();
    while (off < size) {
        const uint8_t *end = memchr(data + off, '\n', size - off);
        size_t len = end ? (size_t)(end - (data + off)) : size - off;
        struct rec_exchange x;
        char err[256] = "";
        int rc = rec_exchange_parse((const char *)data + off, len, &x, err, sizeof err);
        if (rc == 0 && x.websocket) { /* a WebSocket session: its offset only */
            if (x.path || x.body || x.nev || x.resp_body)
                __builtin_trap();
            rec_exchange_release(&x);
        } else if (rc == 0) {
            if (!x.path || x.path[0] != '/' || strlen(x.body_hash) != 16 || !x.body ||
                strlen(x.body) > x.body_len || x.nev > RECORDING_EVENTS_MAX ||
                (x.status && (x.status < 100 || x.status > 999)))
                __builtin_trap();
            for (size_t i = 0; i < x.nev; i++)
                if (!x.ev[i].data || strlen(x.ev[i].data) > x.ev[i].len)
                    __builtin_trap();
            rec_exchange_release(&x);
        } else if (!err[0]) {
            __builtin_trap();
        }
        off += len + 1;
    }
    return 0;
}
