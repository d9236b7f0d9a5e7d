/* live: the load a process publishes on its liveness page (ipc/live.h
 * struct live_load), read by /health and the supervisor's drain
 * (docs/scale.md): none until published, then the latest values, and only
 * through the page of the right pid. */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/err.h"
#include "ipc/live.h"

Test(live_load, published_load_reaches_a_reader)
{
	char dir[] = "/tmp/unicorn-liveload-XXXXXX";
	cr_assert_not_null(mkdtemp(dir));
	struct live_page *w;
	cr_assert_eq(live_create(dir, MSG_ROLE_COORDINATOR, 0, &w), 0, "%s", err_msg());
	const struct live_page *r;
	cr_assert_eq(live_open(dir, MSG_ROLE_COORDINATOR, getpid(), &r), 0, "%s", err_msg());
	struct live_load l;
	cr_assert(!live_read_load(r, &l), "a load before any was published");
	cr_assert_eq(l.running + l.queued + l.slots, 0u);
	live_set_load(w, 3, 2, 4);
	cr_assert(live_read_load(r, &l));
	cr_assert_eq(l.running, 3u);
	cr_assert_eq(l.queued, 2u);
	cr_assert_eq(l.slots, 4u);
	live_set_load(w, 0, 0, 4);
	cr_assert(live_read_load(r, &l));
	cr_assert_eq(l.running + l.queued, 0u);
	/* the row and the load do not disturb each other */
	struct msg_status st = { .role = MSG_ROLE_COORDINATOR, .pid = (uint32_t)getpid(), .steps = 9 };
	live_publish(w, &st);
	uint64_t beat;
	uint32_t stall;
	struct msg_status got;
	cr_assert(live_read(r, &beat, &stall, &got));
	cr_assert_eq(got.steps, 9u);
	cr_assert(live_read_load(r, &l));
	cr_assert_eq(l.slots, 4u);
	live_set_load(NULL, 1, 1, 1); /* no page: nothing happens */
	live_unmap(r);
	live_close(w, dir, MSG_ROLE_COORDINATOR, true);
	cr_assert_eq(rmdir(dir), 0);
}
