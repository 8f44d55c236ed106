/*
 * target.h - where the load goes: URL resolution and model discovery.
 */
#ifndef TS_LOAD_TARGET_H
#define TS_LOAD_TARGET_H

#include <stdbool.h>
#include <stddef.h>

#include "base/err.h"
#include "workload/workload.h"

#define TARGET_URL_MAX 2048

/*
 * Resolves --target for an endpoint: a server root ("http://h:8000"), an
 * OpenAI-style base URL ending in /v1 ("https://api.openai.com/v1"), or a
 * full endpoint URL (left as it is). endpoint_url gets the URL to POST to,
 * models_url the /v1/models URL next to it. Returns 0 or -EINVAL (not
 * http(s), too long) with a message.
 */
/*
 * The ws:// URL of the OpenAI Realtime endpoint next to a chat completions
 * URL (".../v1/chat/completions" -> "ws://.../v1/realtime?model=MODEL",
 * https:// -> wss://, the model percent-encoded). Returns 0, or -EINVAL
 * with err (not a chat URL; too long).
 */
TS_MUST_CHECK int target_realtime_url(const char *chat_url, const char *model,
                                      char out[TARGET_URL_MAX], char *err, size_t errlen);

TS_MUST_CHECK int target_resolve(const char *target, enum workload_endpoint ep,
                                 char endpoint_url[TARGET_URL_MAX], char models_url[TARGET_URL_MAX],
                                 char *err, size_t errlen);

/*
 * Asks models_url for the served models (a blocking GET, for startup only,
 * 15 s at most, a body of 4 MiB at most) and writes the first model id into
 * model (n bytes). headers as for the load ("Authorization: Bearer ...").
 * Returns 0, or -EIO (no answer, or an HTTP error status), TS_PARSE (an
 * answer that is no OpenAI model list) or TS_TOOBIG (an id of n bytes or
 * more), with a message that names the URL, says what happened (nothing
 * listening, TLS against plain HTTP or the reverse, the status and the
 * server's error message, not JSON, no data[]) and what to check; never a
 * header.
 */
TS_MUST_CHECK int target_discover_model(const char *models_url, const char *const *headers,
                                        size_t n_headers, bool insecure, char *model, size_t n,
                                        char *err, size_t errlen);

#endif
