/* relay: one HTTP generation, from its api/http.h job to the coordinator's
 * request protocol (coordinator/intake.h: GEN_REQ with the prompt's token
 * ids, long-polled GEN_TOKENs) and back, on a thread of its own.
 *
 * The API process tokenizes (the chat template included), so it knows the
 * prompt's length for usage and refuses prompts that do not fit the
 * context itself. Stop strings are cut here, and each token's logprobs go out
 * with the first byte of its text. When the coordinator dies, the intake
 * client re-submits with the tokens already streamed (resume[]): the
 * restarted coordinator replays them and the stream continues with exactly
 * the tokens an uninterrupted run gives. A client that leaves cancels the
 * request (GEN_CANCEL) at the next token or poll. */
#ifndef UNICORN_RELAY_H
#define UNICORN_RELAY_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

struct http;
struct http_job;
struct tok;

struct relay_ctx {
	struct http *h;
	const struct tok *tok;
	const char *rundir;
	uint32_t n_ctx;              /* the model's context (prompt + generated) */
	uint32_t request_timeout_s;  /* the coordinator's limit (bounds the client's patience) */
	const struct vision_config *vision; /* the model's projector (--mmproj); NULL: images refused */
	bool allow_image_urls;       /* --allow-image-urls: fetch http(s) image_url parts (api/image_fetch.h) */
	/* below: relay's own */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	uint32_t running;
	bool stopping;
};

int relay_init(struct relay_ctx *rc);
/* Run generation job j on a new thread (the relay releases j when done). On
 * failure to start, j is failed (503) and released; returns ERR_*. */
int relay_start(struct relay_ctx *rc, struct http_job *j);
/* Stop: running relays cancel their requests and end their jobs; waits up
 * to ms for them. */
void relay_stop_all(struct relay_ctx *rc, int ms);
uint32_t relay_running(struct relay_ctx *rc);

#endif
