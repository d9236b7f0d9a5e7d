/* Errors that say what to do next (issue 35 #7): a stream that fails after
 * its 200 ends with an OpenAI error object (message, type, code) next to
 * finish_reason "error", and the message says where the cluster's log is. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "api/openai.h"
#include "ipc/rundir.h"

Test(api_hints, stream_error_has_message)
{
	char tmp[] = "/tmp/unicorn-hints-XXXXXX";
	cr_assert_not_null(mkdtemp(tmp));
	char hint[256], log[256];
	/* no log file: a foreground cluster, its output */
	rundir_log_hint(tmp, hint, sizeof hint);
	cr_assert_not_null(strstr(hint, "unicorn-up"), "%s", hint);
	snprintf(log, sizeof log, "%s/" RUNDIR_LOG, tmp);
	FILE *f = fopen(log, "w");
	cr_assert_not_null(f);
	fclose(f);
	rundir_log_hint(tmp, hint, sizeof hint);
	cr_assert_not_null(strstr(hint, log), "%s", hint);
	oai_set_log_hint(hint);
	for (int kind = OAI_CHAT; kind <= OAI_COMPLETION; kind++) {
		char *s = oai_chunk_json(kind, "id", 1, "m", kind == OAI_CHAT ? NULL : "", 0, false, "error");
		cr_assert_not_null(s);
		json_t *j = json_loads(s, 0, NULL);
		cr_assert_not_null(j, "%s", s);
		json_t *c = json_array_get(json_object_get(j, "choices"), 0);
		cr_assert_str_eq(json_string_value(json_object_get(c, "finish_reason")), "error");
		json_t *e = json_object_get(j, "error");
		cr_assert_not_null(e, "no error object: %s", s);
		cr_assert_str_eq(json_string_value(json_object_get(e, "type")), "server_error");
		cr_assert_str_eq(json_string_value(json_object_get(e, "code")), "generation_failed");
		cr_assert_not_null(strstr(json_string_value(json_object_get(e, "message")), log), "%s", s);
		json_decref(j);
		free(s);
		/* a normal end has none */
		s = oai_chunk_json(kind, "id", 1, "m", kind == OAI_CHAT ? NULL : "", 0, false, "stop");
		cr_assert_null(strstr(s, "\"error\""), "%s", s);
		free(s);
	}
	oai_set_log_hint(NULL);
	unlink(log);
	rmdir(tmp);
}
