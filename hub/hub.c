/* hub: HTTP side of `unicorn pull` — the file list, resumable downloads with
 * sha256 checks, and the pull into the store (hub.h, docs/models.md). */
#include "hub/hub.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>
#include <jansson.h>

#include "common/err.h"
#include "common/progress.h"
#include "hub/sha256.h"
#include "hub/store.h"

#define HUB_API_MAX (32u << 20)   /* a file list larger than this is refused */
#define HUB_ERRBODY_MAX 512       /* kept of an error answer, for the message */
#define HUB_MAX_REDIRS 10
#define HUB_RETRY_DELAY_MAX_MS 30000

void hub_opts_default(struct hub_opts *o)
{
	memset(o, 0, sizeof *o);
	o->retries = 5;
	o->retry_delay_ms = 1000;
}

static const char *opt_endpoint(const struct hub_opts *o)
{
	const char *e = o->endpoint;
	if (!e || !*e)
		e = getenv("HF_ENDPOINT");
	return e && *e ? e : HUB_DEFAULT_ENDPOINT;
}

static const char *opt_token(const struct hub_opts *o)
{
	const char *t = o->token;
	if (!t)
		t = getenv("HF_TOKEN");
	return t && *t ? t : NULL;
}

/* A token goes into a header line: no line breaks, bounded. */
static int check_token(const struct hub_opts *o)
{
	const char *t = opt_token(o);
	if (!t)
		return 0;
	if (strlen(t) > 4000)
		return err_set(ERR_INVAL, "HF_TOKEN is longer than 4000 characters");
	for (const char *c = t; *c; c++)
		if ((unsigned char)*c < 0x20 || *c == 0x7f)
			return err_set(ERR_INVAL, "HF_TOKEN holds a control character (a line break?)");
	return 0;
}

static FILE *opt_out(const struct hub_opts *o)
{
	return o->progress ? o->progress : stderr;
}

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc = CURLE_FAILED_INIT;

static void curl_init_once(void)
{
	curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

/* ---- one HTTP exchange ------------------------------------------------- */

struct xfer {
	/* the response being received: every redirect hop starts a new one */
	long status;
	char etag[160];
	uint64_t content_length;
	bool has_content_length;
	uint64_t range_start, range_total;
	bool has_range, range_total_known;
	/* stated by the Hub on its redirect (the CDN's answer does not repeat them) */
	char linked_etag[160];
	uint64_t linked_size;
	bool has_linked_size;

	/* body into memory (the API) */
	char *mem;
	size_t mem_len, mem_cap;

	/* body into a file (a download) */
	int fd;
	const char *part;     /* its path, for messages */
	const char *what;     /* "FILE of REPO", for messages */
	struct hub_sha256 *md;
	uint64_t offset;      /* bytes in the file, all hashed */
	uint64_t total;       /* whole file, when known */
	bool started;         /* first body byte of this attempt seen */
	struct progress *prog;

	char errbody[HUB_ERRBODY_MAX];
	size_t errlen;
	int fail_rc;          /* set by a callback that stopped the transfer */
};

static bool parse_u64(const char *s, size_t n, uint64_t *out)
{
	if (n == 0 || n > 19)
		return false;
	uint64_t v = 0;
	for (size_t i = 0; i < n; i++) {
		if (!isdigit((unsigned char)s[i]))
			return false;
		v = v * 10 + (uint64_t)(s[i] - '0');
	}
	*out = v;
	return true;
}

/* "bytes START-END/TOTAL" (TOTAL may be "*"). */
static bool parse_content_range(const char *v, struct xfer *x)
{
	if (strncasecmp(v, "bytes ", 6))
		return false;
	v += 6;
	const char *dash = strchr(v, '-'), *slash = strchr(v, '/');
	uint64_t a, b, t = 0;
	if (!dash || !slash || slash < dash || !parse_u64(v, (size_t)(dash - v), &a) ||
	    !parse_u64(dash + 1, (size_t)(slash - dash - 1), &b) || b < a)
		return false;
	bool known = strcmp(slash + 1, "*") != 0;
	if (known && (!parse_u64(slash + 1, strlen(slash + 1), &t) || b >= t))
		return false;
	x->range_start = a;
	x->range_total = t;
	x->range_total_known = known;
	return true;
}

static size_t on_header(char *buf, size_t size, size_t nmemb, void *arg)
{
	struct xfer *x = arg;
	size_t n = size * nmemb;
	char line[512];
	if (n >= sizeof line)
		return n; /* no header we read is that long: ignore it */
	memcpy(line, buf, n);
	line[n] = 0;
	while (n && (line[n - 1] == '\r' || line[n - 1] == '\n' || line[n - 1] == ' ' || line[n - 1] == '\t'))
		line[--n] = 0;
	if (!strncmp(line, "HTTP/", 5)) {
		/* a new response (after a redirect, or a 100 Continue) */
		const char *sp = strchr(line, ' ');
		uint64_t st = 0;
		x->status = sp && parse_u64(sp + 1, 3, &st) ? (long)st : 0;
		x->etag[0] = 0;
		x->has_content_length = x->has_range = x->range_total_known = false;
		return size * nmemb;
	}
	char *colon = strchr(line, ':');
	if (!colon)
		return size * nmemb;
	*colon = 0;
	char *v = colon + 1;
	while (*v == ' ' || *v == '\t')
		v++;
	if (!strcasecmp(line, "ETag"))
		snprintf(x->etag, sizeof x->etag, "%s", v);
	else if (!strcasecmp(line, "X-Linked-Etag"))
		snprintf(x->linked_etag, sizeof x->linked_etag, "%s", v);
	else if (!strcasecmp(line, "X-Linked-Size"))
		x->has_linked_size = parse_u64(v, strlen(v), &x->linked_size);
	else if (!strcasecmp(line, "Content-Length"))
		x->has_content_length = parse_u64(v, strlen(v), &x->content_length);
	else if (!strcasecmp(line, "Content-Range"))
		x->has_range = parse_content_range(v, x);
	return size * nmemb;
}

/* A sha256 stated in an ETag: optional W/, optional quotes, 64 hex digits. */
static bool etag_sha256(const char *v, char out[65])
{
	if (!strncmp(v, "W/", 2))
		v += 2;
	size_t n = strlen(v);
	if (n >= 2 && v[0] == '"' && v[n - 1] == '"') {
		v++;
		n -= 2;
	}
	if (n != 64)
		return false;
	for (size_t i = 0; i < 64; i++) {
		if (!isxdigit((unsigned char)v[i]))
			return false;
		out[i] = (char)tolower((unsigned char)v[i]);
	}
	out[64] = 0;
	return true;
}

static void keep_errbody(struct xfer *x, const char *p, size_t n)
{
	size_t room = sizeof x->errbody - 1 - x->errlen;
	if (n > room)
		n = room;
	memcpy(x->errbody + x->errlen, p, n);
	x->errlen += n;
	x->errbody[x->errlen] = 0;
}

static size_t on_body_mem(char *p, size_t size, size_t nmemb, void *arg)
{
	struct xfer *x = arg;
	size_t n = size * nmemb;
	if (x->status != 200) {
		keep_errbody(x, p, n);
		return n;
	}
	if (n > HUB_API_MAX - x->mem_len) {
		x->fail_rc = err_set(ERR_RANGE, "the file list is larger than %u MiB", HUB_API_MAX >> 20);
		return 0;
	}
	if (x->mem_len + n + 1 > x->mem_cap) {
		size_t cap = x->mem_cap ? x->mem_cap : 65536;
		while (cap < x->mem_len + n + 1)
			cap *= 2;
		char *m = realloc(x->mem, cap);
		if (!m) {
			x->fail_rc = err_set(ERR_NOMEM, "out of memory");
			return 0;
		}
		x->mem = m;
		x->mem_cap = cap;
	}
	memcpy(x->mem + x->mem_len, p, n);
	x->mem_len += n;
	x->mem[x->mem_len] = 0;
	return n;
}

static int write_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* The first body bytes of a download attempt: is this the part we asked for? */
static int body_start(struct xfer *x)
{
	x->started = true;
	if (x->status == 206) {
		if (!x->has_range || x->range_start != x->offset)
			return err_set(ERR_INVAL, "%s: asked for the bytes from %" PRIu64 ", the server "
				       "answered 206 with another range", x->what, x->offset);
	} else if (x->offset > 0) {
		/* The server ignored Range: take the whole file again. */
		if (ftruncate(x->fd, 0) || lseek(x->fd, 0, SEEK_SET) < 0)
			return err_set(ERR_IO, "%s: %s", x->part, strerror(errno));
		if (hub_sha256_reset(x->md))
			return err_set(ERR_NOMEM, "sha256: cannot start a digest");
		x->offset = 0;
	}
	uint64_t total = 0;
	bool known = true;
	if (x->status == 206 && x->range_total_known)
		total = x->range_total;
	else if (x->has_content_length && x->content_length <= UINT64_MAX - x->offset)
		total = x->offset + x->content_length;
	else if (x->has_linked_size)
		total = x->linked_size;
	else
		known = false;
	if (known && x->has_linked_size && total != x->linked_size)
		return err_set(ERR_INVAL, "%s: the Hub states %" PRIu64 " bytes, the download server %" PRIu64,
			       x->what, x->linked_size, total);
	x->total = known ? total : 0;
	x->prog->total = x->total;
	progress_update(x->prog, x->offset);
	struct statvfs vfs;
	if (known && fstatvfs(x->fd, &vfs) == 0 &&
	    (uint64_t)vfs.f_bavail * vfs.f_frsize < total - x->offset) {
		char need[32], have[32];
		progress_fmt_bytes(need, sizeof need, (double)(total - x->offset));
		progress_fmt_bytes(have, sizeof have, (double)vfs.f_bavail * vfs.f_frsize);
		return err_set(ERR_IO, "%s: needs %s more, %s has only %s free", x->what, need, x->part, have);
	}
	return 0;
}

static size_t on_body_file(char *p, size_t size, size_t nmemb, void *arg)
{
	struct xfer *x = arg;
	size_t n = size * nmemb;
	if (x->status != 200 && x->status != 206) {
		keep_errbody(x, p, n);
		return n;
	}
	if (!x->started && (x->fail_rc = body_start(x)))
		return 0;
	if (x->total && n > x->total - x->offset) {
		x->fail_rc = err_set(ERR_RANGE, "%s: the server sends more than the %" PRIu64 " bytes it "
				     "announced", x->what, x->total);
		return 0;
	}
	if (write_all(x->fd, p, n)) {
		x->fail_rc = err_set(ERR_IO, "%s: write: %s", x->part, strerror(errno));
		return 0;
	}
	if (hub_sha256_update(x->md, p, n)) {
		x->fail_rc = err_set(ERR_IO, "sha256: digest update failed");
		return 0;
	}
	x->offset += n;
	progress_update(x->prog, x->offset);
	return n;
}

/* The server's own words from an error answer ({"error": "..."} on the Hub),
 * printable and short, or "". */
static void server_says(const struct xfer *x, char *out, size_t cap)
{
	out[0] = 0;
	if (!x->errlen)
		return;
	json_t *j = json_loadb(x->errbody, x->errlen, 0, NULL);
	const char *s = j && json_is_object(j) ? json_string_value(json_object_get(j, "error")) : NULL;
	if (s) {
		size_t k = 0;
		int w = snprintf(out, cap, " (the server says: ");
		k = w > 0 && (size_t)w < cap ? (size_t)w : 0;
		for (; *s && k + 3 < cap && k < 200; s++)
			out[k++] = isprint((unsigned char)*s) ? *s : ' ';
		out[k++] = ')';
		out[k] = 0;
	}
	json_decref(j);
}

static CURLcode perform(const struct hub_opts *o, const char *url, struct xfer *x, bool to_file,
			uint64_t range_from)
{
	if (pthread_once(&curl_once, curl_init_once) || curl_init_rc != CURLE_OK)
		return CURLE_FAILED_INIT;
	CURL *c = curl_easy_init();
	if (!c)
		return CURLE_FAILED_INIT;
	struct curl_slist *hdrs = NULL, *h;
	char auth[4200], range[64];
	const char *token = opt_token(o);
	CURLcode cc = CURLE_OUT_OF_MEMORY;
	if (token) {
		if (strlen(token) > 4000 || strpbrk(token, "\r\n")) {
			cc = CURLE_BAD_FUNCTION_ARGUMENT;
			goto out_easy;
		}
		snprintf(auth, sizeof auth, "Authorization: Bearer %s", token);
		if (!(h = curl_slist_append(hdrs, auth)))
			goto out_hdrs;
		hdrs = h;
	}
	if (!to_file && !(h = curl_slist_append(hdrs, "Accept: application/json")))
		goto out_hdrs;
	else if (!to_file)
		hdrs = h;
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(c, CURLOPT_USERAGENT, "unicorn/1 (libcurl)");
	/* The Hub answers downloads with a redirect to its CDN. curl does not send
	 * the Authorization header on to another host. */
	curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
	curl_easy_setopt(c, CURLOPT_MAXREDIRS, (long)HUB_MAX_REDIRS);
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 30L);
	/* a stalled transfer (no byte for a minute) is a failure to retry */
	curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
	curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, 60L);
	curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(c, CURLOPT_HEADERDATA, x);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, to_file ? on_body_file : on_body_mem);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, x);
	if (range_from) {
		snprintf(range, sizeof range, "%" PRIu64 "-", range_from);
		curl_easy_setopt(c, CURLOPT_RANGE, range);
	}
	cc = curl_easy_perform(c);
	long st = 0;
	if (curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &st) == CURLE_OK && st)
		x->status = st;
out_hdrs:
	curl_slist_free_all(hdrs);
out_easy:
	curl_easy_cleanup(c);
	return cc;
}

/* Failures worth another try: the connection, not the request. */
static bool curl_transient(CURLcode cc)
{
	switch (cc) {
	case CURLE_COULDNT_CONNECT:
	case CURLE_PARTIAL_FILE:
	case CURLE_RECV_ERROR:
	case CURLE_SEND_ERROR:
	case CURLE_GOT_NOTHING:
	case CURLE_OPERATION_TIMEDOUT:
	case CURLE_HTTP2:
	case CURLE_HTTP2_STREAM:
	case CURLE_HTTP3:
	case CURLE_SSL_CONNECT_ERROR:
		return true;
	default:
		return false;
	}
}

/* A sentence for an HTTP status that is not the answer we wanted. */
static int status_error(const struct hub_opts *o, const struct xfer *x, const char *what, const char *repo,
			bool file)
{
	char says[256];
	server_says(x, says, sizeof says);
	const char *token = opt_token(o);
	switch (x->status) {
	case 401:
		if (token)
			return err_set(ERR_IO, "%s: %s answered 401 Unauthorized: the token in HF_TOKEN was "
				       "refused for %s%s", what, opt_endpoint(o), repo, says);
		return err_set(ERR_IO, "%s: %s answered 401 Unauthorized: %s is gated, private or does not "
			       "exist; set HF_TOKEN to a token of an account that may read it%s", what,
			       opt_endpoint(o), repo, says);
	case 403:
		return err_set(ERR_IO, "%s: %s answered 403 Forbidden: the account of HF_TOKEN may not read "
			       "%s (accept the model's license on its page)%s", what, opt_endpoint(o), repo, says);
	case 404:
		if (file)
			return err_set(ERR_NOTFOUND, "%s: %s answered 404 Not Found%s; the repo's file list "
				       "named it: try again later, or choose another quant with %s:QUANT", what,
				       opt_endpoint(o), says, repo);
		return err_set(ERR_NOTFOUND, "%s: %s answered 404 Not Found%s: there is no model %s; check "
			       "the name (ORG/NAME as in the model page's URL, case matters; a private or gated "
			       "one needs HF_TOKEN) and the quant (REPO:QUANT, e.g. :Q4_K_M); `unicorn list` "
			       "shows the models already in the store", what, opt_endpoint(o), says, repo);
	default:
		return err_set(ERR_IO, "%s: %s answered HTTP %ld%s", what, opt_endpoint(o), x->status, says);
	}
}

int hub_list(const struct hub_opts *o, const char *repo, struct hub_files *out)
{
	memset(out, 0, sizeof *out);
	char url[2048], what[HUB_REPO_MAX + 64];
	const char *ep = opt_endpoint(o);
	size_t el = strlen(ep);
	while (el && ep[el - 1] == '/')
		el--;
	snprintf(what, sizeof what, "the file list of %s", repo);
	int trc = check_token(o);
	if (trc)
		return trc;
	if (snprintf(url, sizeof url, "%.*s/api/models/%s", (int)el, ep, repo) >= (int)sizeof url)
		return err_set(ERR_RANGE, "%s: endpoint too long", what);
	struct xfer x = { .fd = -1 };
	int rc = 0;
	CURLcode cc = perform(o, url, &x, false, 0);
	if (cc != CURLE_OK) {
		if (x.fail_rc)
			rc = err_prefix(x.fail_rc, "%s", what);
		else
			rc = err_set(ERR_IO, "%s: %s: %s", what, url, curl_easy_strerror(cc));
	} else if (x.status != 200) {
		rc = status_error(o, &x, what, repo, false);
	} else {
		rc = hub_files_parse(x.mem ? x.mem : "", x.mem_len, repo, out);
	}
	free(x.mem);
	return rc;
}

/* URL-encode every component of a repo file name (keeping the slashes). */
static int file_url(const struct hub_opts *o, const char *repo, const char *file, char *url, size_t cap)
{
	const char *ep = opt_endpoint(o);
	size_t el = strlen(ep);
	while (el && ep[el - 1] == '/')
		el--;
	int k = snprintf(url, cap, "%.*s/%s/resolve/main/", (int)el, ep, repo);
	if (k < 0 || (size_t)k >= cap)
		return err_set(ERR_RANGE, "%s: URL too long", file);
	size_t len = (size_t)k;
	const char *p = file;
	while (*p) {
		size_t seg = strcspn(p, "/");
		char *esc = curl_easy_escape(NULL, p, (int)seg);
		if (!esc)
			return err_set(ERR_NOMEM, "out of memory");
		k = snprintf(url + len, cap - len, "%s%s", esc, p[seg] == '/' ? "/" : "");
		curl_free(esc);
		if (k < 0 || (size_t)k >= cap - len)
			return err_set(ERR_RANGE, "%s: URL too long", file);
		len += (size_t)k;
		p += seg + (p[seg] == '/');
	}
	return 0;
}

/* Feed fd's first n bytes to md (a resumed download's part). */
static int hash_prefix(int fd, uint64_t n, struct hub_sha256 *md, const char *path)
{
	static char buf[1 << 16];
	uint64_t done = 0;
	while (done < n) {
		size_t want = n - done < sizeof buf ? (size_t)(n - done) : sizeof buf;
		ssize_t r = pread(fd, buf, want, (off_t)done);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return err_set(ERR_IO, "%s: read: %s", path, r ? strerror(errno) : "short file");
		if (hub_sha256_update(md, buf, (size_t)r))
			return err_set(ERR_IO, "sha256: digest update failed");
		done += (uint64_t)r;
	}
	return 0;
}

int hub_sha256_file(const char *path, char out[65])
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return err_set(ERR_IO, "%s: %s", path, strerror(errno));
	struct stat sb;
	struct hub_sha256 *md = hub_sha256_new();
	int rc = 0;
	if (!md)
		rc = err_set(ERR_NOMEM, "sha256: cannot start a digest");
	else if (fstat(fd, &sb))
		rc = err_set(ERR_IO, "%s: %s", path, strerror(errno));
	else if (!(rc = hash_prefix(fd, (uint64_t)sb.st_size, md, path)) && hub_sha256_final(md, out))
		rc = err_set(ERR_IO, "sha256: digest failed");
	hub_sha256_free(md);
	close(fd);
	return rc;
}

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

/* One download; *rejected is set when the file was refused (checksum) and
 * nothing of it was kept. */
static int download(const struct hub_opts *o, const char *repo, const char *file, const char *dest,
		    bool *rejected)
{
	*rejected = false;
	char url[4096], part[PATH_MAX], what[HUB_FILE_MAX + HUB_REPO_MAX + 8];
	snprintf(what, sizeof what, "%s of %s", file, repo);
	int rc = check_token(o);
	if (!rc)
		rc = file_url(o, repo, file, url, sizeof url);
	if (rc)
		return rc;
	if (snprintf(part, sizeof part, "%s.part", dest) >= (int)sizeof part)
		return err_set(ERR_RANGE, "%s: path too long", dest);
	int fd = open(part, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0)
		return err_set(ERR_IO, "%s: %s", part, strerror(errno));
	if (flock(fd, LOCK_EX | LOCK_NB)) {
		rc = err_set(ERR_STATE, "%s: another pull is downloading it (%s is locked)", what, part);
		goto out_fd;
	}
	struct stat sb;
	if (fstat(fd, &sb)) {
		rc = err_set(ERR_IO, "%s: %s", part, strerror(errno));
		goto out_fd;
	}
	struct progress prog;
	const char *base = strrchr(file, '/') ? strrchr(file, '/') + 1 : file;
	progress_init(&prog, opt_out(o), base, 0);
	progress_set_quiet(&prog, o->quiet);
	struct xfer x = { .fd = fd, .part = part, .what = what, .prog = &prog,
			  .offset = (uint64_t)sb.st_size };
	x.md = hub_sha256_new();
	if (!x.md) {
		rc = err_set(ERR_NOMEM, "sha256: cannot start a digest");
		goto out_md;
	}
	if ((rc = hash_prefix(fd, x.offset, x.md, part)) || lseek(fd, (off_t)x.offset, SEEK_SET) < 0) {
		rc = rc ? rc : err_set(ERR_IO, "%s: %s", part, strerror(errno));
		goto out_md;
	}
	if (x.offset && !o->quiet)
		fprintf(opt_out(o), "unicorn: resuming %s from byte %" PRIu64 "\n", file, x.offset);
	int delay = o->retry_delay_ms > 0 ? o->retry_delay_ms : 0;
	bool whole = false;
	for (int attempt = 0;; attempt++) {
		x.started = false;
		x.fail_rc = 0;
		x.errlen = 0;
		x.errbody[0] = 0;
		x.linked_etag[0] = 0;
		x.has_linked_size = false;
		bool again = false;
		CURLcode cc = perform(o, url, &x, true, x.offset);
		if (cc == CURLE_OK && (x.status == 200 || x.status == 206)) {
			if (!x.started && (rc = body_start(&x)))   /* an empty file */
				break;
			if (x.total && x.offset != x.total) {
				rc = err_set(ERR_IO, "%s: the transfer ended after %" PRIu64 " of %" PRIu64 " bytes",
					     what, x.offset, x.total);
				again = true;
			} else {
				whole = true;
				break;
			}
		} else if (cc == CURLE_OK && x.status == 416 && x.offset > 0) {
			/* Nothing after our offset: the part may be whole already. */
			whole = true;
			break;
		} else if (x.fail_rc) {
			rc = x.fail_rc;
			break;
		} else if (cc != CURLE_OK) {
			char got[48];
			progress_fmt_bytes(got, sizeof got, (double)x.offset);
			rc = err_set(ERR_IO, "%s: %s (%s kept in %s)", what, curl_easy_strerror(cc), got, part);
			again = curl_transient(cc);
		} else {
			rc = status_error(o, &x, what, repo, true);
			again = x.status == 429 || x.status >= 500;
		}
		if (!again)
			break;
		if (attempt >= o->retries) {
			err_prefix(rc, "gave up after %d attempt%s", attempt + 1, attempt ? "s" : "");
			break;
		}
		if (!o->quiet) {
			if (prog.tty && prog.last_len)
				fputc('\n', opt_out(o));
			fprintf(opt_out(o), "unicorn: %s; retrying in %.1f s (%d of %d)\n", err_msg(),
				delay / 1000.0, attempt + 1, o->retries);
		}
		sleep_ms(delay);
		delay = delay * 2 > HUB_RETRY_DELAY_MAX_MS ? HUB_RETRY_DELAY_MAX_MS : delay * 2;
	}
	if (!whole)
		goto out_md;
	char want[65] = "", got[65];
	if (hub_sha256_final(x.md, got)) {
		rc = err_set(ERR_IO, "sha256: digest failed");
		goto out_md;
	}
	bool stated = etag_sha256(x.linked_etag, want) || etag_sha256(x.etag, want);
	if (stated && strcmp(want, got)) {
		unlink(part);
		*rejected = true;
		rc = err_set(ERR_INVAL, "%s: sha256 mismatch: the server states %s, the download is %s; "
			     "the file was removed", what, want, got);
		goto out_md;
	}
	if (x.status == 416 && !stated) {
		/* Cannot tell whether the part is whole: take it again. */
		unlink(part);
		rc = err_set(ERR_IO, "%s: the server refused to resume at byte %" PRIu64 " and states no "
			     "sha256; the partial file was removed, pull again", what, x.offset);
		goto out_md;
	}
	if (!stated && !o->quiet)
		fprintf(opt_out(o), "unicorn: the server states no sha256 for %s: not verified\n", file);
	if (fsync(fd) || rename(part, dest)) {
		rc = err_set(ERR_IO, "%s: %s", dest, strerror(errno));
		goto out_md;
	}
	if (x.status != 416)
		progress_finish(&prog);
	rc = 0;
out_md:
	hub_sha256_free(x.md);
out_fd:
	close(fd);
	return rc;
}

int hub_download(const struct hub_opts *o, const char *repo, const char *file, const char *dest)
{
	bool rejected;
	return download(o, repo, file, dest, &rejected);
}

static int path_join(char *out, size_t cap, const char *a, const char *b)
{
	int k = snprintf(out, cap, "%s/%s", a, b);
	if (k < 0 || (size_t)k >= cap)
		return err_set(ERR_RANGE, "%s/%s: path too long", a, b);
	return 0;
}

static int pull_gguf(const struct hub_opts *o, const char *store, const struct hub_ref *r,
		     const char *file, char *path, size_t cap)
{
	char rdir[PATH_MAX], dest[PATH_MAX];
	const char *base = strrchr(file, '/') ? strrchr(file, '/') + 1 : file;
	int rc;
	if ((rc = path_join(rdir, sizeof rdir, store, r->repo)) ||
	    (rc = path_join(dest, sizeof dest, rdir, base)))
		return rc;
	if (snprintf(path, cap, "%s", dest) >= (int)cap)
		return err_set(ERR_RANGE, "%s: path too long", dest);
	struct stat sb;
	if (stat(dest, &sb) == 0 && S_ISREG(sb.st_mode)) {
		if (!o->quiet)
			fprintf(opt_out(o), "unicorn: %s is already in the store\n", base);
		return store_touch(dest);
	}
	if ((rc = store_mkdirs(rdir)))
		return rc;
	if (!o->quiet)
		fprintf(opt_out(o), "unicorn: pulling %s from %s\n", file, r->repo);
	bool rejected;
	rc = download(o, r->repo, file, dest, &rejected);
	if (rc)
		store_prune(store, rdir);
	else
		rc = store_touch(dest);
	return rc;
}

static int pull_checkpoint(const struct hub_opts *o, const char *store, const struct hub_ref *r,
			   const struct hub_choice *c, char *path, size_t cap)
{
	char final[PATH_MAX], stage[PATH_MAX], probe[PATH_MAX];
	int rc;
	if ((rc = path_join(final, sizeof final, store, r->repo)))
		return rc;
	const char *slash = strchr(r->repo, '/');
	if (snprintf(stage, sizeof stage, "%s/%.*s/.%s.pull", store, (int)(slash - r->repo), r->repo,
		     slash + 1) >= (int)sizeof stage)
		return err_set(ERR_RANGE, "%s: path too long", store);
	if (snprintf(path, cap, "%s", final) >= (int)cap)
		return err_set(ERR_RANGE, "%s: path too long", final);
	struct stat sb;
	if ((rc = path_join(probe, sizeof probe, final, "config.json")))
		return rc;
	if (stat(probe, &sb) == 0) {
		if (!o->quiet)
			fprintf(opt_out(o), "unicorn: %s is already in the store\n", r->repo);
		return store_touch(final);
	}
	if (stat(final, &sb) == 0)
		return err_set(ERR_STATE, "%s exists and is not a Hugging Face checkpoint (no config.json); "
			       "remove it first (unicorn rm)", final);
	if ((rc = store_mkdirs(stage)))
		return rc;
	if (!o->quiet)
		fprintf(opt_out(o), "unicorn: pulling %s (a Hugging Face checkpoint: %zu files)\n", r->repo, c->n);
	for (size_t i = 0; i < c->n && !rc; i++) {
		char dest[PATH_MAX];
		if ((rc = path_join(dest, sizeof dest, stage, c->files[i])))
			break;
		if (stat(dest, &sb) == 0)
			continue; /* whole from an earlier, interrupted pull */
		bool rejected;
		rc = download(o, r->repo, c->files[i], dest, &rejected);
		if (rc && rejected) {
			/* a wrong file: keep nothing of this checkpoint */
			int e = rc;
			char msg[1024];
			snprintf(msg, sizeof msg, "%s", err_msg());
			store_remove_tree(stage);
			store_prune(store, stage);
			return err_set(e, "%s", msg);
		}
	}
	if (rc) {
		store_prune(store, stage);
		return rc;
	}
	if (rename(stage, final))
		return err_set(ERR_IO, "%s -> %s: %s", stage, final, strerror(errno));
	return store_touch(final);
}

int hub_pull(const struct hub_opts *o, const struct hub_ref *r, char *path, size_t cap)
{
	char store[PATH_MAX];
	int rc;
	if (o->store)
		snprintf(store, sizeof store, "%s", o->store);
	else if ((rc = store_dir(store, sizeof store)))
		return rc;
	const char *ep = opt_endpoint(o);
	if (strncmp(ep, "http://", 7) && strncmp(ep, "https://", 8))
		return err_set(ERR_INVAL, "HF_ENDPOINT '%s': expected an http:// or https:// URL", ep);
	struct hub_files f;
	if ((rc = hub_list(o, r->repo, &f)))
		return rc;
	struct hub_choice c;
	if ((rc = hub_choose(&f, r->repo, r->quant, &c))) {
		hub_files_free(&f);
		return rc;
	}
	if (c.kind == HUB_GGUF) {
		rc = pull_gguf(o, store, r, c.files[0], path, cap);
		/* the vision projector goes beside the model, where unicorn-up finds it */
		const char *mm = rc ? NULL : hub_choose_mmproj(&f);
		char mpath[PATH_MAX];
		if (mm && (rc = pull_gguf(o, store, r, mm, mpath, sizeof mpath)))
			err_prefix(rc, "the model is in the store, its vision projector is not");
	} else
		rc = pull_checkpoint(o, store, r, &c, path, cap);
	hub_choice_free(&c);
	hub_files_free(&f);
	return rc;
}
