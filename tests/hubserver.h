/* hubserver: a loopback HTTP server with the Hugging Face Hub's layout, for
 * the `unicorn pull` tests (libmicrohttpd, in the test process).
 *
 *   GET /api/models/ORG/NAME              {"id", "siblings": [{"rfilename"}]}
 *   GET /ORG/NAME/resolve/main/FILE       302 to /cdn/N (with X-Linked-Etag and
 *                                         X-Linked-Size, as the Hub sends them)
 *   GET /cdn/N                            the bytes (Range: bytes=S- -> 206)
 *
 * Gated repos answer 401 unless "Authorization: Bearer <token>"; unknown repos
 * and files 404. Every request is logged ("GET /path range=... auth=..."). */
#ifndef UNICORN_TESTS_HUBSERVER_H
#define UNICORN_TESTS_HUBSERVER_H

#include <stdbool.h>
#include <stddef.h>

#define HS_MAX_FILES 16
#define HS_MAX_LOG 128

enum hs_sum {
	HS_LINKED = 0, /* X-Linked-Etag on the redirect (the Hub's LFS files) */
	HS_ETAG,       /* only an ETag (the sha256) on the final answer */
	HS_WRONG,      /* X-Linked-Etag with a wrong sha256 */
	HS_ETAG_WRONG, /* only an ETag, with a wrong sha256 */
	HS_NONE,       /* no checksum at all */
};

struct hs_file {
	char repo[64], name[128];
	unsigned char *data;
	size_t len;
	char sha[65];
	enum hs_sum sum;
	int cuts;        /* the next `cuts` answers stop after cut_at bytes of the body */
	size_t cut_at;
};

struct hubserver {
	void *daemon;
	int port;
	char url[64];            /* http://127.0.0.1:PORT */
	char gated[64];          /* a repo that needs the token */
	char token[64];
	struct hs_file files[HS_MAX_FILES];
	size_t nfiles;
	char log[HS_MAX_LOG][320];
	size_t nlog;
};

void hs_start(struct hubserver *s);
void hs_stop(struct hubserver *s);
/* Add a file (copied; its sha256 computed). Returns it for tweaks. */
struct hs_file *hs_add(struct hubserver *s, const char *repo, const char *name, const void *data,
		       size_t len);
/* n pseudo-random bytes of seed (malloc'ed). */
unsigned char *hs_bytes(size_t n, unsigned seed);
/* Number of logged requests that contain every one of the (NULL-ended) substrings. */
int hs_count(struct hubserver *s, const char *a, const char *b);
/* The log, one request a line (for failure messages); static buffer. */
const char *hs_dump(struct hubserver *s);

#endif
