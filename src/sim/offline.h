/*
 * offline.h - the engine model run on a whole workload in virtual time.
 *
 * No clock, no sockets, no threads: arrivals and steps advance one virtual
 * clock, so a run of thousands of requests takes milliseconds and the same
 * profile, load and seed always give the same numbers. It is what the
 * presets are tested with against published benchmarks
 * (tests/unit/test_offline.c) and what `tokenstorm sim calibrate` fits with.
 *
 * Loads (struct sim_offline_load):
 *  - SIM_LOAD_POISSON: `requests` arrivals at `rate` per second (seeded);
 *  - SIM_LOAD_BURST: all `requests` at time 0 (vLLM's --request-rate inf);
 *  - SIM_LOAD_CLOSED: `concurrency` users, each sending its next request when
 *    its last token of the previous one was delivered, `requests` in all.
 * Lengths: prompt and output tokens lognormal(mean, sigma) rounded (sigma 0:
 * fixed), redrawn while prompt > in_max or prompt + output > total_max (0 =
 * no bound; vLLM's ShareGPT sampling drops prompts over 1024 and pairs over
 * 2048), and at most the profile's max_model_len.
 *
 * Numbers (struct sim_offline_result): a request's TTFT is the delivery of its
 * first token (the API server's queue included, engine.h on_token_at) minus
 * its arrival; E2E the delivery of its last; TPOT (E2E - TTFT) / (output - 1)
 * for output > 1 (what vLLM's benchmark and genai-perf's ITL compute per
 * request). Medians and means are over the measured requests: all of them
 * for Poisson and burst loads; for a closed loop those that arrived in the
 * steady window, from the end of the first wave (every user's first request
 * finished) to the first user's last send, so neither the start nor the
 * drain tail counts. Throughput: Poisson and burst, completed requests and
 * output tokens over the time from the first arrival to the last delivery;
 * closed loop, tokens delivered in the steady window over its length.
 */
#ifndef TS_SIM_OFFLINE_H
#define TS_SIM_OFFLINE_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "sim/profile.h"

#define SIM_OFFLINE_REQUESTS_MAX 200000u /* bound of `requests` */

enum sim_load_mode {
    SIM_LOAD_POISSON = 0,
    SIM_LOAD_BURST = 1,
    SIM_LOAD_CLOSED = 2,
};

struct sim_offline_load {
    enum sim_load_mode mode;
    double rate;          /* requests/s, Poisson */
    uint32_t concurrency; /* users, closed loop */
    uint32_t requests;    /* 1 .. SIM_OFFLINE_REQUESTS_MAX */
    double in_mean, in_sigma;
    double out_mean, out_sigma;
    uint32_t in_max, total_max; /* 0 = unbounded */
    uint64_t seed;
};

struct sim_offline_result {
    uint32_t measured; /* requests the latencies are over */
    double ttft_med_ms, tpot_med_ms, e2e_med_ms;
    double ttft_mean_ms, tpot_mean_ms, e2e_mean_ms;
    double req_per_s, out_tok_per_s;
    double duration_s;    /* virtual time of the whole run */
    uint64_t preemptions; /* engine preemptions in the run */
    uint32_t max_running; /* most seqs running at once */
};

/*
 * Runs the load on an engine built from *p (sim_profile_validate must pass).
 * Returns 0; -EINVAL with a message in err for a bad profile or load; -E2BIG
 * when a request can never fit (err names it); -ENOMEM.
 */
TS_MUST_CHECK int sim_offline_run(const struct sim_profile *p, const struct sim_offline_load *l,
                                  struct sim_offline_result *out, char *err, size_t errlen);

#endif
