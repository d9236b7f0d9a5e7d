/* cli: the `unicorn` command's subcommands. Each takes argv after the
 * subcommand name (argv[0] is the subcommand) and returns the process exit
 * status (0 ok, 1 failure, 2 usage error). */
#ifndef UNICORN_CLI_H
#define UNICORN_CLI_H

#define UNICORN_VERSION "0.1.0" /* `unicorn --version` */

int cli_inspect(int argc, char **argv);   /* cli/cli_inspect.c */
int cli_tokenize(int argc, char **argv);  /* cli/cli_tokenize.c */
int cli_logits(int argc, char **argv);    /* cli/cli_logits.c */
int cli_quantize(int argc, char **argv);  /* cli/cli_quantize.c */
int cli_devices(int argc, char **argv);   /* cli/cli_devices.c */
int cli_bench(int argc, char **argv);     /* cli/cli_bench.c */
int cli_run(int argc, char **argv);       /* cli/cli_run.c */
int cli_chat(int argc, char **argv);      /* cli/cli_chat.c */
struct intake_gen_opts;
/* The chat loop on the cluster in rundir (also `unicorn run MODEL` without a
 * prompt): 0 when the user left, 1 on a failure. */
int cli_chat_session(const char *rundir, const char *system, const struct intake_gen_opts *o);
int cli_status(int argc, char **argv);    /* cli/cli_status.c */
int cli_down(int argc, char **argv);      /* cli/cli_down.c */
int cli_top(int argc, char **argv);       /* cli/cli_top.c */
int cli_trace(int argc, char **argv);     /* cli/cli_trace.c */
int cli_pull(int argc, char **argv);      /* cli/cli_models.c */
int cli_list(int argc, char **argv);      /* cli/cli_models.c */
int cli_rm(int argc, char **argv);        /* cli/cli_models.c */
int cli_ps(int argc, char **argv);        /* cli/cli_ps.c */
int cli_logs(int argc, char **argv);      /* cli/cli_logs.c */

#endif
