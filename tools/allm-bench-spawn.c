/* allm-bench's own engines: each run gets a fresh allm-engined in a private runtime
 * dir under a unique name, so concurrent benchmarks (and a user's engine) never meet,
 * and nothing is left behind: the engine is stopped with SIGTERM (its exit status
 * checked), dies with us if we are killed (PR_SET_PDEATHSIG), and its dir goes. */
#include "allm-bench.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PROG "allm-bench"
/* After SIGTERM the engine finishes in-flight work (none: we drained) and exits. */
#define STOP_GRACE_S 30.0

volatile sig_atomic_t bench_interrupted;
/* The engine being started or run, for the signal handler to pass SIGTERM on. */
static volatile pid_t g_engine_pid;

static void on_signal(int sig)
{
	bench_interrupted = sig;
	if (g_engine_pid > 0)
		kill(g_engine_pid, SIGTERM);
}

void bench_signals_install(void)
{
	struct sigaction sa = {.sa_handler = on_signal};
	sigemptyset(&sa.sa_mask);
	/* no SA_RESTART: a blocking wait returns EINTR and its loop sees the flag */
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
}

static void sleep_s(double s)
{
	struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
	nanosleep(&ts, NULL);
}

static bool executable_file(const char *p)
{
	struct stat st;
	return stat(p, &st) == 0 && S_ISREG(st.st_mode) && access(p, X_OK) == 0;
}

/* allm-engined beside this program (installed side by side, or build/tools ->
 * build/engined), else the first one on PATH. */
static int find_engined(char *ret, size_t len)
{
	char self[PATH_MAX];
	ssize_t k = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (k > 0) {
		self[k] = 0;
		char *slash = strrchr(self, '/');
		if (slash) {
			*slash = 0;
			static const char *const rel[] = {"allm-engined", "../engined/allm-engined"};
			for (size_t i = 0; i < sizeof(rel) / sizeof(rel[0]); i++) {
				int w = snprintf(ret, len, "%s/%s", self, rel[i]);
				if (w > 0 && (size_t)w < len && executable_file(ret))
					return 0;
			}
		}
	}
	const char *path = getenv("PATH");
	while (path && *path) {
		const char *end = strchr(path, ':');
		size_t n = end ? (size_t)(end - path) : strlen(path);
		if (n > 0 && n < len - 16) {
			snprintf(ret, len, "%.*s/allm-engined", (int)n, path);
			if (executable_file(ret))
				return 0;
		}
		path = end ? end + 1 : NULL;
	}
	return -ENOENT;
}

/* argv for the engine: our pass-through flags, minus those `extra` overrides. */
static int build_argv(const struct bench_opts *o, const char *const *extra, const char *exe,
		      const struct bench_engine *e, const char **argv, int cap)
{
	int n = 0;
	argv[n++] = exe;
	argv[n++] = "--name";
	argv[n++] = e->name;
	argv[n++] = "--runtime-dir";
	argv[n++] = e->dir;
	if (o->model_dir) {
		argv[n++] = "--model";
		argv[n++] = o->model_dir;
	}
	if (o->dummy) {
		argv[n++] = "--dummy";
		argv[n++] = o->dummy;
	}
	for (int i = 0; i < o->n_eng_args; i++) {
		const char *f = o->eng_args[i];
		bool is_flag = f[0] == '-' && f[1] == '-';
		bool overridden = false;
		for (int k = 0; is_flag && extra && extra[k]; k += 2)
			overridden |= !strcmp(extra[k], f);
		if (overridden) {
			/* skip its value too, unless it is a bare switch */
			if (i + 1 < o->n_eng_args && strncmp(o->eng_args[i + 1], "--", 2))
				i++;
			continue;
		}
		if (n + 1 >= cap)
			return -E2BIG;
		argv[n++] = f;
	}
	for (int k = 0; extra && extra[k]; k++) {
		if (n + 1 >= cap)
			return -E2BIG;
		argv[n++] = extra[k];
	}
	argv[n] = NULL;
	return n;
}

/* The engine's progress lines end in '\r' (redrawn) or '\n': the last non-empty
 * piece of its log is what it is doing now. */
static void log_last_line(const char *path, char *ret, size_t len)
{
	char buf[2048];
	ret[0] = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	off_t size = lseek(fd, 0, SEEK_END);
	off_t from = size > (off_t)sizeof(buf) - 1 ? size - (off_t)sizeof(buf) + 1 : 0;
	ssize_t k = pread(fd, buf, sizeof(buf) - 1, from);
	close(fd);
	if (k <= 0)
		return;
	buf[k] = 0;
	while (k > 0 && (buf[k - 1] == '\n' || buf[k - 1] == '\r'))
		buf[--k] = 0;
	char *p = buf + k;
	while (p > buf && p[-1] != '\n' && p[-1] != '\r')
		p--;
	snprintf(ret, len, "%.*s", (int)(len - 1), p); /* a long line is cut: display only */
}

static void print_log_tail(const char *path)
{
	char buf[4096];
	FILE *f = fopen(path, "r");
	if (!f)
		return;
	fseek(f, 0, SEEK_END);
	long size = ftell(f);
	fseek(f, size > (long)sizeof(buf) - 1 ? size - (long)sizeof(buf) + 1 : 0, SEEK_SET);
	size_t k = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[k] = 0;
	fprintf(stderr, PROG ": the engine's log (%s, last lines):\n%s%s", path, buf,
		k && buf[k - 1] != '\n' ? "\n" : "");
}

/* Removes the runtime dir and whatever the engine left in it (socket, control
 * endpoints of a killed engine, its log). The dir is ours alone: mkdtemp made it. */
static void remove_dir(struct bench_engine *e)
{
	if (!e->dir[0])
		return;
	DIR *d = opendir(e->dir);
	if (d) {
		struct dirent *de;
		while ((de = readdir(d)))
			if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
				unlinkat(dirfd(d), de->d_name, 0);
		closedir(d);
	}
	rmdir(e->dir);
	e->dir[0] = 0;
}

static void child_exec(const char **argv, const char *log, pid_t parent)
{
	/* if allm-bench dies without stopping us, so do we: no orphaned engine */
	if (prctl(PR_SET_PDEATHSIG, SIGTERM) || getppid() != parent)
		_exit(127);
	int in = open("/dev/null", O_RDONLY | O_CLOEXEC);
	int out = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (in < 0 || out < 0 || dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(out, 2) < 0)
		_exit(127);
	signal(SIGPIPE, SIG_DFL);
	execv(argv[0], (char *const *)argv);
	dprintf(2, PROG ": cannot run %s: %s\n", argv[0], strerror(errno));
	_exit(127);
}

/* Waits for the socket; redraws the engine's progress line while loading. */
static int wait_ready(const struct bench_opts *o, struct bench_engine *e)
{
	char sock[400], line[160], shown[160] = "";
	snprintf(sock, sizeof(sock), "%s/%s.sock", e->dir, e->name);
	double t0 = allm_now();
	bool drew = false;
	int rc = -1;
	for (;;) {
		int status;
		pid_t w = waitpid(e->pid, &status, WNOHANG);
		if (w == e->pid) {
			e->pid = 0;
			g_engine_pid = 0;
			fprintf(stderr, "%s" PROG ": the engine exited before serving (%s %d)\n",
				drew ? "\n" : "", WIFEXITED(status) ? "status" : "signal",
				WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
			print_log_tail(e->log);
			break;
		}
		if (access(sock, F_OK) == 0) {
			rc = 0;
			break;
		}
		if (bench_interrupted) {
			fprintf(stderr, "%s" PROG ": interrupted while the engine started\n", drew ? "\n" : "");
			break;
		}
		if (allm_now() - t0 > o->start_timeout_s) {
			fprintf(stderr, "%s" PROG ": the engine did not start within %.0f s "
					"(--start-timeout)\n", drew ? "\n" : "", o->start_timeout_s);
			print_log_tail(e->log);
			break;
		}
		log_last_line(e->log, line, sizeof(line));
		if (!o->quiet && strstr(line, "allm-engined: ") == line && strcmp(line, shown)) {
			/* only the redrawn progress lines (loading, calibrating), not its log */
			fprintf(stderr, "\r" PROG ": engine %s%s", line + strlen("allm-engined: "),
				isatty(2) ? "\033[K" : "");
			snprintf(shown, sizeof(shown), "%s", line);
			drew = true;
		}
		sleep_s(0.02);
	}
	if (drew && rc == 0)
		fputc('\n', stderr);
	return rc;
}

int bench_engine_start(const struct bench_opts *o, const char *const *extra, int idx,
		       struct bench_engine *e)
{
	char exe[PATH_MAX];
	const char *argv[BENCH_MAX_ENG_ARGS + 16];
	const char *tmp = getenv("TMPDIR");

	memset(e, 0, sizeof(*e));
	if (find_engined(exe, sizeof(exe))) {
		fprintf(stderr, PROG ": cannot find allm-engined beside %s or on PATH\n", "allm-bench");
		return -1;
	}
	snprintf(e->dir, sizeof(e->dir), "%s/allm-bench.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(e->dir)) {
		fprintf(stderr, PROG ": cannot create a runtime dir %s: %s\n", e->dir, strerror(errno));
		e->dir[0] = 0;
		return -1;
	}
	snprintf(e->name, sizeof(e->name), "bench-%d-%d", (int)getpid(), idx);
	snprintf(e->log, sizeof(e->log), "%s/engine.log", e->dir);
	if (build_argv(o, extra, exe, e, argv, (int)(sizeof(argv) / sizeof(argv[0]))) < 0) {
		fprintf(stderr, PROG ": too many engine flags\n");
		goto fail;
	}
	pid_t parent = getpid();
	fflush(NULL);
	e->pid = fork();
	if (e->pid < 0) {
		fprintf(stderr, PROG ": fork: %s\n", strerror(errno));
		e->pid = 0;
		goto fail;
	}
	if (e->pid == 0)
		child_exec(argv, e->log, parent);
	g_engine_pid = e->pid;
	if (wait_ready(o, e))
		goto fail;
	return 0;
fail:
	bench_engine_stop(e);
	return -1;
}

int bench_engine_stop(struct bench_engine *e)
{
	int rc = 0;
	if (e->pid > 0) {
		int status = 0;
		kill(e->pid, SIGTERM);
		double t0 = allm_now();
		pid_t w;
		while ((w = waitpid(e->pid, &status, WNOHANG)) == 0 && allm_now() - t0 < STOP_GRACE_S)
			sleep_s(0.01);
		if (w == 0) {
			fprintf(stderr, PROG ": the engine ignored SIGTERM for %.0f s: killing it\n",
				STOP_GRACE_S);
			kill(e->pid, SIGKILL);
			waitpid(e->pid, &status, 0);
			rc = -1;
		} else if (w < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
			fprintf(stderr, PROG ": the engine exited with %s %d\n",
				w > 0 && WIFEXITED(status) ? "status" : "signal",
				w > 0 && WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
			print_log_tail(e->log);
			rc = -1;
		}
		e->pid = 0;
		g_engine_pid = 0;
	}
	remove_dir(e);
	return rc;
}
