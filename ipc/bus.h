/* bus: the cluster's message links, a small wrapper over nng 1.5.2.
 *
 * Only ipc:// URLs (sockets inside the runtime directory, see ipc/rundir.h);
 * anything else is refused. Every link has finite send/receive timeouts, a
 * receive limit of MSG_MAX_BUF bytes, and accepts only peers running as our
 * uid (checked on each new pipe with NNG_OPT_IPC_PEER_UID). Messages go
 * through ipc/msg.h, so every received message is fully validated.
 *
 * Three kinds of link (docs/protocol.md "Links"):
 *   BUS_PAIR  pair1, one peer: coordinator <-> worker, supervisor <-> child.
 *             The stable side listens; the other dials. Dialing never blocks
 *             and retries forever (100 ms .. 1 s), so a restarted peer comes
 *             back by itself.
 *   BUS_REQ   req0, the CLI: bus_call() sends one request and waits for its
 *             answer. REQ auto-resend is disabled; every CLI request is
 *             idempotent (request ids), so the CLI itself may retry.
 *   BUS_REP   rep0 with contexts, the coordinator's CLI intake: bus_serve()
 *             receives one request and returns a pending handle that may be
 *             answered later (long-polls), in any order, with bus_reply().
 *
 * Not thread-safe per struct bus except that bus_reply() on different pending
 * handles may run concurrently with bus_serve(). */
#ifndef UNICORN_BUS_H
#define UNICORN_BUS_H

#include <stdbool.h>
#include <stdint.h>

#include "ipc/msg.h"

#define BUS_SEND_TIMEOUT_MS 1000  /* default send timeout */
#define BUS_URL_MAX 200           /* ipc:// URL length cap (sun_path is 108) */

enum bus_kind { BUS_PAIR = 1, BUS_REQ = 2, BUS_REP = 3 };

struct bus;
struct bus_pending;

/* Listen (BUS_PAIR or BUS_REP) on url, e.g. "ipc:///run/user/1000/unicorn/default/gpu.ipc".
 * A stale socket file from a dead process is replaced (nng unlinks it). */
int bus_listen(const char *url, enum bus_kind kind, struct bus **out);
/* Dial (BUS_PAIR or BUS_REQ) url without waiting for the peer to exist. */
int bus_dial(const char *url, enum bus_kind kind, struct bus **out);
/* A descriptor that polls readable while a message (a request, on a rep
 * link) waits to be received: for a loop that sleeps in poll(2). */
int bus_recv_fd(struct bus *b, int *fd);
/* Close the socket so that a bus_recv blocked in another thread returns
 * (ERR_CLOSED-like error) at once; the bus must still be freed with bus_close. */
void bus_interrupt(struct bus *b);
void bus_close(struct bus *b);

/* Change the send timeout (ms, > 0). */
int bus_set_send_timeout(struct bus *b, int ms);

/* BUS_PAIR / BUS_REQ: send m. If m->seq is 0 it is set to the link's next
 * sequence number (never 0). ERR_TIMEOUT if the peer is absent or not reading
 * within the send timeout. */
int bus_send(struct bus *b, struct msg *m);
/* BUS_PAIR / BUS_REQ: receive one message within timeout_ms (>= 0, or
 * BUS_FOREVER: until one comes or bus_interrupt closes the socket).
 * ERR_TIMEOUT when nothing came; ERR_INVAL for a malformed message (dropped). */
#define BUS_FOREVER (-1)
int bus_recv(struct bus *b, int timeout_ms, struct msg *out);
/* BUS_REQ: send req and wait up to timeout_ms for its answer. */
int bus_call(struct bus *b, struct msg *req, int timeout_ms, struct msg *reply);
/* BUS_REQ: send req and wait for its answer up to timeout_ms, asking
 * give_up(arg) (may be NULL) every slice_ms meanwhile. The request stays out
 * the whole time: a REQ link drops the answer of a request once another is
 * sent on it, so a peer that answers late (the coordinator within a long
 * step) must be waited for, not asked again. ERR_AGAIN when give_up said so
 * (nothing came), ERR_TIMEOUT after timeout_ms, ERR_IO when the link broke
 * (the peer died: at once, not at the timeout). */
int bus_call_patient(struct bus *b, struct msg *req, int timeout_ms, int slice_ms, bool (*give_up)(void *arg),
		     void *arg, struct msg *reply);

/* BUS_REP: wait up to timeout_ms for one request; on success *pending must be
 * answered with bus_reply or dropped with bus_pending_drop. */
int bus_serve(struct bus *b, int timeout_ms, struct msg *req, struct bus_pending **pending);
/* Answer a pending request (the handle is consumed whether or not this
 * succeeds). reply->seq defaults to the request's seq. */
int bus_reply(struct bus_pending *p, struct msg *reply);
void bus_pending_drop(struct bus_pending *p);
/* seq of the request a pending handle answers. */
uint32_t bus_pending_seq(const struct bus_pending *p);
/* BUS_REP: the connection (a nonzero id) a request came over, and a callback
 * (on an nng thread) when a connection closes, e.g. its process died: the
 * intake cancels that client's requests at once instead of waiting for them
 * to go unpolled. */
uint32_t bus_pending_peer(const struct bus_pending *p);
int bus_on_peer_gone(struct bus *b, void (*fn)(void *arg, uint32_t peer), void *arg);

/* Raw bytes instead of ipc/msg.h messages, for answers larger than a message
 * (the observability link, coordinator/obs_server.h): the receiver validates
 * what it gets. A req link's answers may be up to bus_set_recv_max bytes.
 * bus_call_bytes: *rep is malloc'ed with a NUL after its *rep_len bytes.
 * bus_serve_bytes: *req is malloc'ed; answer with bus_reply_bytes. */
int bus_set_recv_max(struct bus *b, size_t bytes);
int bus_call_bytes(struct bus *b, const void *req, size_t len, int timeout_ms, void **rep,
		   size_t *rep_len);
int bus_serve_bytes(struct bus *b, int timeout_ms, void **req, size_t *len,
		    struct bus_pending **pending);
int bus_reply_bytes(struct bus_pending *p, const void *data, size_t len);

#endif
