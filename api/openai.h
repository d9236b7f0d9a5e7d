/* openai: the OpenAI-compatible request/response formats (docs/http.md).
 *
 * Pure functions, no I/O: parse and validate a /v1/chat/completions or
 * /v1/completions body into struct oai_req (every refusal carries the HTTP
 * status, the OpenAI error type, the offending parameter and a sentence),
 * build the JSON answers (whole responses, stream chunks, SSE frames, error
 * objects) and cut generated text at user stop strings, also when a stop
 * string is spread over several streamed pieces. */
#ifndef UNICORN_OPENAI_H
#define UNICORN_OPENAI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* request body bytes: an image_url of IMAGE_MAX_BYTES (20 MiB) is 27 MiB of
 * base64; a prompt of OAI_MAX_PROMPT_BYTES with JSON's escapes fits too */
#define OAI_MAX_BODY (32u << 20)
#define OAI_MAX_STOP 4              /* stop strings */
#define OAI_MAX_STOP_LEN 256        /* bytes of one stop string */
#define OAI_MAX_MESSAGES 256
#define OAI_MAX_TOKENS_CAP 4096     /* = MSG_MAX_GEN */
#define OAI_DEFAULT_MAX_TOKENS 256
#define OAI_MAX_PROMPT_BYTES (4 << 20) /* prompt text (all messages together) = MSG_MAX_PROMPT_ALL */
#define OAI_MAX_TIMEOUT_S 1e7       /* "timeout" bound (keeps its nanoseconds in an int64) */

#define OAI_MAX_TOP_LOGPROBS 20     /* chat top_logprobs */
#define OAI_MAX_LOGPROBS_CMPL 5     /* completions logprobs (the legacy API's cap) */

enum oai_kind { OAI_CHAT = 1, OAI_COMPLETION = 2 };

/* A refusal: HTTP status + OpenAI error object fields. */
struct oai_err {
	int status;              /* 400, 401, 404, 405, 413, 429, 500, 503 */
	char type[40];           /* "invalid_request_error", ... */
	char param[40];          /* "" = null */
	char code[40];           /* "" = null */
	char message[256];
};

struct oai_msg {
	char *role;              /* system / user / assistant */
	char *content;
};

#define OAI_MAX_IMAGES 16           /* = MSG_MAX_IMAGES */
struct oai_req {
	int kind;                /* enum oai_kind */
	bool stream, include_usage;
	uint32_t max_tokens;
	float temperature;       /* 0..2 */
	float top_p;             /* (0, 1] */
	uint32_t top_k;          /* 0 = off .. 64 */
	float min_p;             /* [0, 1]; 0 = off */
	float repetition_penalty; /* (0, 100]; 1 = off */
	float presence_penalty;  /* [-2, 2] */
	float frequency_penalty; /* [-2, 2] */
	bool has_seed;
	uint64_t seed;
	bool logprobs;           /* chat logprobs: true; completions logprobs: N (not null) */
	uint32_t top_logprobs;   /* alternatives per token: chat top_logprobs 0..20,
				  * completions the logprobs integer 0..5 */
	double timeout;          /* Unicorn extension: seconds (0, OAI_MAX_TIMEOUT_S]; 0 = absent
	                          * (the server's --request-timeout); capped by it */
	char *stop[OAI_MAX_STOP];
	uint32_t n_stop;
	struct oai_msg *msgs;    /* chat */
	uint32_t n_msgs;
	char *prompt;            /* completions */
	/* structured output (response_format json_object / json_schema): the
	 * output is one JSON value valid against schema (NULL: any object);
	 * the schema compiled once here (constrain/) to refuse what the
	 * coordinator would */
	bool json;
	char *schema;            /* compact JSON text, <= OAI_MAX_SCHEMA bytes */
	size_t n_schema;
	/* n: choices, 1..OAI_MAX_N (each its own sequence, seed + index) */
	uint32_t n;
	/* tools (chat): the functions are rendered into the prompt
	 * (chat/template.h); required / a named function constrain the
	 * answer to {"name", "arguments"} of the function's parameter schema
	 * (schema above); auto parses a JSON call out of the answer */
	int tool_choice;         /* enum oai_tool_choice; OAI_TOOLS_OFF without tools */
	bool parallel_calls;     /* parallel_tool_calls (default true): several calls per
				  * reply; false, or a named function: at most one */
	uint32_t n_tools;
	char **tool_names;       /* [n_tools] */
	/* logit_bias: token id -> bias in [-100, 100] */
	uint32_t n_bias;
	uint32_t *bias_ids;
	float *bias;
	/* image_url content parts (user messages), in order: their URLs, each
	 * leaving CHAT_IMAGE_MARK in its message's content (docs/vision.md) */
	uint32_t n_images;
	char *image_urls[OAI_MAX_IMAGES];
};
#define OAI_MAX_SCHEMA 32768        /* = MSG_MAX_SCHEMA */
#define OAI_MAX_N 8                 /* choices per request */
#define OAI_MAX_TOOLS 64
enum oai_tool_choice { OAI_TOOLS_OFF = 0, OAI_TOOLS_NONE, OAI_TOOLS_AUTO, OAI_TOOLS_REQUIRED, OAI_TOOLS_NAMED };
#define OAI_MAX_BIAS 300            /* = MSG_MAX_BIAS */

/* Parse body[len] (kind chat or completion). 0, or -1 with *e filled. */
int oai_parse(int kind, const char *body, size_t len, struct oai_req *out, struct oai_err *e);
void oai_req_free(struct oai_req *r);

/* /tokenize {"text"|"prompt": string, "add_special": bool (default true)} */
int oai_parse_tokenize(const char *body, size_t len, char **text, bool *add_special,
		       struct oai_err *e);
/* /detokenize {"tokens": [ints]}; *ids malloc'ed. n_vocab bounds the ids. */
int oai_parse_detokenize(const char *body, size_t len, uint32_t n_vocab, int32_t **ids,
			 size_t *n, struct oai_err *e);

/* Fill e (status, type, param or NULL, code or NULL, printf message). Returns -1. */
int oai_err_set(struct oai_err *e, int status, const char *type, const char *param,
		const char *code, const char *fmt, ...) __attribute__((format(printf, 6, 7)));
/* {"error": {"message", "type", "param", "code"}} as a malloc'ed string. */
char *oai_error_json(const struct oai_err *e);

/* "stop" / "length" (context counts as length) / "cancelled" / "timeout" /
 * "image" / "error". "timeout" and "image" never reach a client as a
 * finish_reason: the HTTP server answers 408 / 503 (or an SSE error event)
 * instead. */
const char *oai_finish_reason(uint32_t msg_end_reason);

/* One generated token's logprobs (docs/http.md "Logprobs"). bytes are its raw
 * text (any bytes: a token may hold part of a UTF-8 character). */
struct oai_lp_alt {
	char *bytes;
	size_t len;
	float logprob;
};
struct oai_lp_tok {
	char *bytes;
	size_t len;
	float logprob;
	uint32_t text_offset;    /* completions: byte offset of its text in the completion */
	uint32_t n_top;
	struct oai_lp_alt top[OAI_MAX_TOP_LOGPROBS]; /* most likely first */
};
void oai_lp_tok_free(struct oai_lp_tok *t);
/* The choice's "logprobs" object of n tokens: chat {"content": [{token,
 * logprob, bytes, top_logprobs: [{token, logprob, bytes}]}]}; completions
 * {tokens, token_logprobs, top_logprobs: [{text: logprob} incl. the sampled
 * token], text_offset}. A token whose bytes are not valid UTF-8 is spelled
 * "bytes:\\xNN..." (its "bytes" array has the real ones). NULL on no memory. */
char *oai_logprobs_json(int kind, const struct oai_lp_tok *t, uint32_t n);

/* Whole answer (object "chat.completion" or "text_completion"). */
char *oai_response_json(int kind, const char *id, int64_t created, const char *model,
			const char *text, size_t text_len, const char *finish,
			uint32_t prompt_tokens, uint32_t completion_tokens);
/* The same with "logprobs" (want_lp: the object of lp[0..n_lp), else null). */
char *oai_response_json_lp(int kind, const char *id, int64_t created, const char *model,
			   const char *text, size_t text_len, const char *finish,
			   uint32_t prompt_tokens, uint32_t completion_tokens, bool want_lp,
			   const struct oai_lp_tok *lp, uint32_t n_lp);
/* One stream chunk: text (may be NULL = no content), finish (NULL = null),
 * role_first: the chat's first chunk that carries delta.role. */
char *oai_chunk_json(int kind, const char *id, int64_t created, const char *model,
		     const char *text, size_t text_len, bool role_first, const char *finish);
/* Where the cluster's log is, for the error a failed stream ends with
 * ("the cluster log" until set; rundir_log_hint). */
void oai_set_log_hint(const char *hint);
/* The same with the logprobs of the chunk's tokens (null when n_lp == 0).
 * finish "error" adds an "error" object (message, type, code) to the chunk. */
char *oai_chunk_json_lp(int kind, const char *id, int64_t created, const char *model,
			const char *text, size_t text_len, bool role_first, const char *finish,
			const struct oai_lp_tok *lp, uint32_t n_lp);
/* The last chunk of stream_options.include_usage: choices [] + usage. */
char *oai_usage_chunk_json(int kind, const char *id, int64_t created, const char *model,
			   uint32_t prompt_tokens, uint32_t completion_tokens);
/* "data: " json "\n\n" (json NULL = "[DONE]"), malloc'ed, *len set. */
char *oai_sse_frame(const char *json, size_t *len);

/* Stop-string cutter over streamed pieces. Text that could be the start of a
 * stop string is held back until the next piece decides. */
struct oai_stop {
	const char *const *stop; /* borrowed */
	uint32_t n_stop;
	char *held;
	size_t n_held;
	bool stopped;
};
void oai_stop_init(struct oai_stop *s, char *const *stop, uint32_t n_stop);
/* Feed piece[len]; *out (malloc'ed, may be empty) gets the text that is now
 * safe to emit. Sets s->stopped (and drops the stop string and anything after
 * it) when a stop string completed. 0 or ERR_NOMEM. */
int oai_stop_feed(struct oai_stop *s, const char *piece, size_t len, char **out,
		  size_t *out_len);
/* End of generation: the held text is emitted (it did not become a stop). */
int oai_stop_flush(struct oai_stop *s, char **out, size_t *out_len);
void oai_stop_free(struct oai_stop *s);

/* Custom answers (api/relay.c: n > 1, tool calls). One choice of a whole
 * answer: chat {"index", "message": {"role", "content"} (tool_calls: content
 * null and "tool_calls" the array given as JSON text), "logprobs",
 * "finish_reason"}, completions {"index", "text", "logprobs", "finish_reason"}. */
char *oai_choice_json(int kind, uint32_t index, const char *text, size_t len, const char *finish, bool want_lp,
		      const struct oai_lp_tok *lp, uint32_t n_lp, const char *tool_calls);
/* One stream chunk's choice: {"index", "delta": {role?, content? | tool_calls},
 * "logprobs", "finish_reason"} (completions: "text"). */
char *oai_chunk_choice_json(int kind, uint32_t index, const char *text, size_t len, bool role_first,
			    const char *finish, const struct oai_lp_tok *lp, uint32_t n_lp, const char *tool_calls);
/* Wrap a choice (chunk) or an array of choices (whole answer) with the id,
 * object, created, model (and usage). */
char *oai_chunk_wrap(int kind, const char *id, int64_t created, const char *model, const char *choice);
char *oai_response_wrap(int kind, const char *id, int64_t created, const char *model, const char *choices,
			uint32_t prompt_tokens, uint32_t completion_tokens);
/* The tool calls of a whole generated answer (api/toolcall.h says what is a
 * call): the "tool_calls" array JSON (ids call_..., type function, the
 * arguments as the model wrote them, as a JSON string) or NULL when the text
 * is no call. parallel: every call, else the first only. */
char *oai_tool_calls_from(const char *text, size_t len, char *const *names, uint32_t n, bool parallel);

/* Constant-time comparison of an "Authorization" header with "Bearer KEY". */
bool oai_auth_ok(const char *header, const char *key);

/* True for 127.0.0.0/8, ::1 and "localhost". */
bool oai_host_is_loopback(const char *host);

#endif
