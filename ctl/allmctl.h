/* allmctl's shared pieces: the global options every subcommand (and the dashboard,
 * allmctl top in ctl/top*.c) receives, and the subcommands of allmctl-cmds.c. */
#ifndef ALLMCTL_H
#define ALLMCTL_H

#include "ctl-client.h"

/* Global options, parsed before the subcommand. Strings point into argv. */
struct allmctl_opts {
	const char *name;        /* engine name (--name), "default" when not given */
	const char *runtime_dir; /* --runtime-dir, NULL = the default rule (ctl-proto.h) */
	int timeout_ms;          /* --timeout: per command round trip (default 5000) */
};

/* Exit statuses of allmctl. */
enum {
	ALLMCTL_EXIT_OK = 0,
	ALLMCTL_EXIT_ERROR = 1,   /* the engine answered with an error (or another failure) */
	ALLMCTL_EXIT_USAGE = 2,
	ALLMCTL_EXIT_TIMEOUT = 3, /* no engine answered */
};

/* allmctl-cmds.c: one function per subcommand; argv[0] is the subcommand name.
 * Each returns an exit status. */
struct allmctl_run {
	const struct allmctl_opts *o;
	bool json;                 /* --json: exactly one JSON object on stdout */
	struct allm_ctl_client *c; /* connected with no topics */
};
int allmctl_cmd_status(struct allmctl_run *r, int argc, char **argv);
int allmctl_cmd_metrics(struct allmctl_run *r, int argc, char **argv); /* Prometheus text */
int allmctl_cmd_set(struct allmctl_run *r, int argc, char **argv);
int allmctl_cmd_simple(struct allmctl_run *r, int argc, char **argv); /* calibrate, reset-stats, resume, shutdown */
int allmctl_cmd_cache(struct allmctl_run *r, int argc, char **argv); /* cache reset */
int allmctl_cmd_requests(struct allmctl_run *r, int argc, char **argv);
int allmctl_cmd_cancel(struct allmctl_run *r, int argc, char **argv);
int allmctl_cmd_drain(struct allmctl_run *r, int argc, char **argv);
int allmctl_cmd_watch(struct allmctl_run *r, int argc, char **argv);

/* Maps a failed call to an exit status, printing the client's error to stderr. */
int allmctl_fail(struct allmctl_run *r, const char *what, int err);

#endif
