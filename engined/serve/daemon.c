/* allm-engined: the long-running engine. One thread runs the event loop (clients,
 * doorbells, signals) and the scheduler's steps in turn: requests arrive and
 * tokens leave between steps, never blocking one another (DESIGN §2, §8). */
#include "daemon.h"

#include "ctl-kvevents.h"
#include "ctl-proto.h"
#include "ctl-server.h"
#include "engine-calib.h"
#include "progress.h"
#include "shm-guard.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

void vdlog(const struct daemon *d, enum allm_log_level level, const char *fmt, va_list ap)
{
	if (level > d->log_level)
		return;
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	struct tm tm;
	localtime_r(&ts.tv_sec, &tm);
	fprintf(stderr, "%02d:%02d:%02d.%03ld allm-engined[%s] %s: ", tm.tm_hour, tm.tm_min,
		tm.tm_sec, ts.tv_nsec / 1000000, d->name, allm_log_level_name(level));
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
}

void dlog(const struct daemon *d, enum allm_log_level level, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vdlog(d, level, fmt, ap);
	va_end(ap);
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: allm-engined [--name NAME] (--model DIR | --dummy PRESET) [options]\n"
		"serving:\n"
		"  --name NAME            engine name: socket $ALLM_RUNTIME_DIR/NAME.sock (default \"default\")\n"
		"  --runtime-dir DIR      instead of $ALLM_RUNTIME_DIR, $XDG_RUNTIME_DIR/adaptivellm,\n"
		"                         /tmp/adaptivellm-$UID\n"
		"  --allow-uid UID        also serve this user (repeatable; default: own uid only)\n"
		"  --shm memfd|posix      client segments: sealed memfd (default) or shm_open\n"
		"  --share-prefix-cache   requests of different users may share cached KV blocks\n"
		"                         (default: each uid its own: a hit shows in the timing)\n"
		"  --kv-events-endpoint ipc://PATH | tcp://HOST:PORT\n"
		"                         publish KV cache events in vLLM's format (block stored,\n"
		"                         removed, all cleared) for routers; replay on PATH.replay or\n"
		"                         PORT+1 (default: off). They carry EVERY USER'S PROMPT AND\n"
		"                         COMPLETION TOKEN IDS. Who can read them: ipc: the engine's\n"
		"                         uid alone (PATH's directory must be one only it can enter;\n"
		"                         made 0700 when missing); tcp with CURVE: holders of a listed\n"
		"                         client key; tcp on 127.x or [::1] without CURVE: every local\n"
		"                         user; any other tcp address without CURVE: refused\n"
		"  --kv-events-topic T    their ZeroMQ topic (default kv@NAME@MODEL, llm-d's form)\n"
		"  --kv-events-curve-key FILE  ZeroMQ CURVE for tcp: the engine's secret key (Z85, or\n"
		"                         a ZeroMQ certificate's secret-key line), a file of this uid\n"
		"                         that no one else can read; its public key is logged at start\n"
		"  --kv-events-curve-clients FILE  the subscribers' public keys it lets in, one a line\n"
		"  --kv-events-insecure   allow a plaintext tcp bind beyond loopback (anyone who\n"
		"                         reaches it reads every prompt; routers without CURVE)\n"
		"  --shutdown-timeout S   on SIGTERM, seconds to finish in-flight requests and deliver\n"
		"                         what clients have not read (default 30); a second signal: now\n"
		"limits on what clients can make the engine hold (a refused request ends with status\n"
		"-EAGAIN):\n"
		"  --max-clients N        connections at once, handshakes included (default %d)\n"
		"  --handshake-timeout S  a connection that has not finished its hello by then is\n"
		"                         closed (default %.0f)\n"
		"  --max-queued N         requests in flight, all clients (default %d)\n"
		"  --max-queued-per-uid N      ... of one user (default %d)\n"
		"  --max-queued-per-client N   ... of one client (default %d)\n"
		"  --max-prompt-bytes N   prompt bytes held by requests in flight, 4 a token (default %lld)\n"
		"  --max-prompt-bytes-per-uid N  ... of one user (default %lld)\n"
		"%s",
		ALLM_D_MAX_CLIENTS, ALLM_D_HANDSHAKE_S, ALLM_D_MAX_QUEUED, ALLM_D_MAX_QUEUED_UID,
		ALLM_D_MAX_QUEUED_CLIENT, (long long)ALLM_D_MAX_PROMPT_BYTES,
		(long long)ALLM_D_MAX_PROMPT_BYTES_UID, allm_engine_opts_help());
}

static int parse_args(int argc, char **argv, struct daemon *d, struct allm_engine_opts *o)
{
	struct allm_err err = {{0}};
	allm_engine_opts_default(o);
	/* the environment's switches, read once here (docs/USAGE.md, "Environment
	 * variables") and handed down */
	allm_kv_env_read(&o->kv_env);
	allm_backend_env_read(&o->backend_env);
	const char *ring = getenv("ALLM_KV_EVENTS_TEST_RING"); /* a test hook */
	d->kv_events.test_ring = ring ? atoi(ring) : 0;
	d->name = "default";
	d->shutdown_timeout = 30;
	daemon_limits_default(d);
	for (int i = 1; i < argc;) {
		int r = allm_engine_opts_parse(o, argc, argv, &i, &err);
		if (r < 0) {
			fprintf(stderr, "allm-engined: %s\n", err.msg);
			return -1;
		}
		if (r)
			continue;
		const char *f = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(f, "--help") || !strcmp(f, "-h")) {
			usage(stdout);
			exit(0);
		}
		if (!strcmp(f, "--share-prefix-cache")) {
			d->share_prefix_cache = true;
			i++;
			continue;
		}
		if (!strcmp(f, "--kv-events-insecure")) {
			d->kv_events.insecure = true;
			i++;
			continue;
		}
		if (!v) {
			fprintf(stderr, "allm-engined: unknown flag or missing value: %s (see --help)\n", f);
			return -1;
		}
		int64_t n;
		double x;
		if (!strcmp(f, "--name")) {
			if (!*v || strchr(v, '/') || strlen(v) > 64) {
				fprintf(stderr, "allm-engined: --name must be 1..64 characters without '/'\n");
				return -1;
			}
			d->name = v;
		} else if (!strcmp(f, "--kv-events-endpoint")) {
			d->kv_events.endpoint = v;
		} else if (!strcmp(f, "--kv-events-curve-key")) {
			d->kv_events.curve_key_file = v;
		} else if (!strcmp(f, "--kv-events-curve-clients")) {
			d->kv_events.curve_clients_file = v;
		} else if (!strcmp(f, "--kv-events-topic")) {
			if (strlen(v) > CTL_KV_TOPIC_MAX) {
				fprintf(stderr, "allm-engined: --kv-events-topic: at most %d bytes\n", CTL_KV_TOPIC_MAX);
				return -1;
			}
			snprintf(d->kv_events_topic, sizeof(d->kv_events_topic), "%s", v);
			d->kv_events_topic_set = true;
		} else if (!strcmp(f, "--runtime-dir")) {
			snprintf(d->runtime_dir, sizeof(d->runtime_dir), "%s", v);
		} else if (!strcmp(f, "--allow-uid") && !allm_parse_i64(v, 0, INT32_MAX, &n)) {
			if (d->n_allow_uids == (int)ALLM_ARRAY_SIZE(d->allow_uids)) {
				fprintf(stderr, "allm-engined: too many --allow-uid\n");
				return -1;
			}
			d->allow_uids[d->n_allow_uids++] = (uid_t)n;
		} else if (!strcmp(f, "--shm") && (!strcmp(v, "memfd") || !strcmp(v, "posix"))) {
			d->posix_shm = !strcmp(v, "posix");
		} else if (!strcmp(f, "--shutdown-timeout") && !allm_parse_f64(v, 0, 86400, &x)) {
			d->shutdown_timeout = x;
		} else if (!strcmp(f, "--max-clients") && !allm_parse_i64(v, 1, 1 << 20, &n)) {
			d->max_clients = (int)n;
		} else if (!strcmp(f, "--handshake-timeout") && !allm_parse_f64(v, 0.01, 3600, &x)) {
			d->handshake_timeout = x;
		} else if (!strcmp(f, "--max-queued") && !allm_parse_i64(v, 1, INT32_MAX, &n)) {
			d->max_queued = n;
		} else if (!strcmp(f, "--max-queued-per-uid") && !allm_parse_i64(v, 1, INT32_MAX, &n)) {
			d->max_queued_uid = n;
		} else if (!strcmp(f, "--max-queued-per-client") && !allm_parse_i64(v, 1, INT32_MAX, &n)) {
			d->max_queued_client = n;
		} else if (!strcmp(f, "--max-prompt-bytes") && !allm_parse_i64(v, 1, INT64_MAX / 2, &n)) {
			d->max_prompt_bytes = n;
		} else if (!strcmp(f, "--max-prompt-bytes-per-uid") && !allm_parse_i64(v, 1, INT64_MAX / 2, &n)) {
			d->max_prompt_bytes_uid = n;
		} else {
			fprintf(stderr, "allm-engined: unknown flag or bad value: %s %s (see --help)\n", f, v);
			return -1;
		}
		i += 2;
	}
	char why[600];
	if (ctl_kvevents_check(&d->kv_events, why, sizeof(why))) {
		fprintf(stderr, "allm-engined: %s\n", why);
		return -1;
	}
	d->log_level = o->log_level;
	return 0;
}

/* $ALLM_RUNTIME_DIR, else $XDG_RUNTIME_DIR/adaptivellm, else /tmp/adaptivellm-$UID.
 * Checked on the opened directory (O_NOFOLLOW, fstat), never by a second path
 * lookup someone could redirect in between, and kept open: the socket is made
 * and removed relative to it. A directory the engine creates gets exactly the
 * mode it needs: 0700, or 0711 with --allow-uid (the allowed users may reach the
 * socket, which the engine opens to them and checks their uid at accept, not
 * list or create anything). A directory that was there already is never
 * chmod'ed (it may be /tmp or /run, shared by the whole host): it must be ours
 * and closed to other users' writes, else the engine refuses it. Refused rather
 * than a private folder made inside it, because clients find the socket by the
 * same rule (ALLM_RUNTIME_DIR, --runtime-dir) and check that very directory;
 * a folder only the engine knew of would be one they cannot find. */
static int prepare_runtime_dir(struct daemon *d)
{
	/* one rule for every engine socket, shared with the control-plane peers */
	if (!d->runtime_dir[0] && allm_ctl_runtime_dir(d->runtime_dir, sizeof(d->runtime_dir))) {
		dlog(d, ALLM_LOG_ERROR, "runtime directory path too long");
		return -1;
	}
	bool made = mkdir(d->runtime_dir, 0700) == 0;
	if (!made && errno != EEXIST) {
		dlog(d, ALLM_LOG_ERROR, "cannot create %s: %s", d->runtime_dir, strerror(errno));
		return -1;
	}
	int fd = open(d->runtime_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) || !S_ISDIR(st.st_mode) || st.st_uid != geteuid()) {
		bool link = fd < 0 && !lstat(d->runtime_dir, &st) && S_ISLNK(st.st_mode);
		dlog(d, ALLM_LOG_ERROR, "%s is not a directory owned by uid %d%s", d->runtime_dir, (int)geteuid(),
		     link ? " (a symlink)" : "");
		goto fail;
	}
	mode_t mode = st.st_mode & 07777, want = d->n_allow_uids ? 0711 : 0700;
	if (made) {
		if (mode != want && fchmod(fd, want)) {
			dlog(d, ALLM_LOG_ERROR, "cannot make %s mode %04o: %s", d->runtime_dir, (unsigned)want, strerror(errno));
			goto fail;
		}
	} else if (mode & 022) {
		dlog(d, ALLM_LOG_ERROR, "refusing the runtime directory %s: mode %04o lets other users create files in it "
			   "(the engine never changes the mode of a directory it did not create); name a directory "
			   "of your own with --runtime-dir or ALLM_RUNTIME_DIR, e.g. %s/adaptivellm-%u, which the "
			   "engine creates 0700",
		     d->runtime_dir, (unsigned)mode, d->runtime_dir, (unsigned)geteuid());
		goto fail;
	} else if (d->n_allow_uids && !(mode & S_IXOTH)) {
		dlog(d, ALLM_LOG_ERROR, "--allow-uid: the runtime directory %s (mode %04o, not made by this engine) does not let "
			   "other users reach the socket; chmod 711 it, or name a directory the engine can create "
			   "(it never changes the mode of one it did not create)",
		     d->runtime_dir, (unsigned)mode);
		goto fail;
	}
	d->runtime_fd = fd;
	snprintf(d->sock_name, sizeof(d->sock_name), "%s.sock", d->name);
	snprintf(d->sock_tmp_name, sizeof(d->sock_tmp_name), ".%s", d->sock_name);
	snprintf(d->sock_path, sizeof(d->sock_path), "%s/%s", d->runtime_dir, d->sock_name);
	return 0;
fail:
	if (fd >= 0)
		close(fd);
	return -1;
}

static int listen_socket(struct daemon *d)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	struct sockaddr_un tmp = {.sun_family = AF_UNIX};
	struct stat st;
	/* tmp: the name it is bound under until publish_socket(), one byte longer */
	int n = snprintf(tmp.sun_path, sizeof(tmp.sun_path), "%s/%s", d->runtime_dir, d->sock_tmp_name);
	if (n < 0 || (size_t)n >= sizeof(tmp.sun_path)) {
		dlog(d, ALLM_LOG_ERROR, "socket path too long: %s", d->sock_path);
		return -1;
	}
	strcpy(a.sun_path, d->sock_path);
	int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (probe >= 0 && connect(probe, (struct sockaddr *)&a, sizeof(a)) == 0) {
		close(probe);
		dlog(d, ALLM_LOG_ERROR, "an engine named '%s' is already running (%s)", d->name, d->sock_path);
		return -1;
	}
	if (probe >= 0)
		close(probe);
	/* stale sockets of an engine that died, ready or starting */
	unlinkat(d->runtime_fd, d->sock_name, 0);
	unlinkat(d->runtime_fd, d->sock_tmp_name, 0);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	/* the socket's mode from the start, not a chmod by path after: ours alone, or
	 * (--allow-uid) anyone's to connect to, since the accept checks each peer */
	mode_t old = umask(d->n_allow_uids ? 0111 : 0177);
	int e = fd < 0 || bind(fd, (struct sockaddr *)&tmp, sizeof(tmp)) ? errno : 0;
	umask(old);
	if (e || listen(fd, 128)) {
		dlog(d, ALLM_LOG_ERROR, "cannot listen on %s: %s", d->sock_path, strerror(e ? e : errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	/* bind() went by path: the socket must be in the directory we checked */
	if (fstatat(d->runtime_fd, d->sock_tmp_name, &st, AT_SYMLINK_NOFOLLOW) || !S_ISSOCK(st.st_mode) ||
	    st.st_uid != geteuid()) {
		dlog(d, ALLM_LOG_ERROR, "%s is not where the engine's socket was made: the runtime directory %s was moved?",
		     d->sock_path, d->runtime_dir);
		close(fd);
		return -1;
	}
	d->listen_fd = fd;
	return 0;
}

/* The bound socket under its real name: clients (and whoever waits for the file)
 * find the engine only now, with everything it serves already up. */
static int publish_socket(struct daemon *d)
{
	if (renameat(d->runtime_fd, d->sock_tmp_name, d->runtime_fd, d->sock_name)) {
		dlog(d, ALLM_LOG_ERROR, "cannot rename %s/%s to %s: %s", d->runtime_dir, d->sock_tmp_name, d->sock_path,
		     strerror(errno));
		return -1;
	}
	d->sock_published = true;
	return 0;
}

static void stop_listening(struct daemon *d)
{
	if (d->listen_fd < 0)
		return;
	daemon_listen_pause(d);
	close(d->listen_fd);
	d->listen_fd = -1;
	unlinkat(d->runtime_fd, d->sock_published ? d->sock_name : d->sock_tmp_name, 0);
}

static int g_signal_fd = -1;

/* Async-signal-safe: write(2) on an eventfd. */
static void on_posix_signal(int sig)
{
	uint64_t one = 1;
	int saved = errno;
	if (g_signal_fd >= 0 && write(g_signal_fd, &one, sizeof(one)) < 0) {
	}
	errno = saved;
}

static void on_signal(struct allm_loop *l, int fd, uint32_t revents, void *user)
{
	struct daemon *d = user;
	uint64_t n = 0;
	if (read(fd, &n, sizeof(n)) != (ssize_t)sizeof(n) || n == 0)
		return;
	if (d->draining) {
		dlog(d, ALLM_LOG_WARN, "second signal: cancelling what is left and exiting now");
		d->drain_deadline = 0;
		return;
	}
	daemon_begin_shutdown(d, "SIGTERM/SIGINT");
}

void daemon_begin_shutdown(struct daemon *d, const char *why)
{
	if (d->draining)
		return;
	dlog(d, ALLM_LOG_INFO, "%s: no new requests; finishing those in flight (up to %.0f s, a second signal: now)",
	     why, d->shutdown_timeout);
	d->draining = true;
	d->drain_deadline = allm_now() + d->shutdown_timeout;
	stop_listening(d);
}

/* The periodic tick (a timerfd in the loop): bounds how long a drain deadline or
 * other timed work can wait while the engine sleeps. */
static void on_tick(struct allm_loop *l, int fd, uint32_t revents, void *user)
{
	struct daemon *d = user;
	uint64_t n;
	if (read(fd, &n, sizeof(n)) < 0) {
	}
	daemon_client_tick(d, allm_now()); /* handshake timeouts, a paused listener */
	ctl_server_tick(d->ctl); /* `stats` telemetry at 10 Hz */
}

static int start_tick(struct daemon *d)
{
	d->tick_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	struct itimerspec it = {{0, 100 * 1000000}, {0, 100 * 1000000}}; /* 10 Hz */
	if (d->tick_fd < 0 || timerfd_settime(d->tick_fd, 0, &it, NULL) ||
	    allm_loop_watch(d->loop, d->tick_fd, POLLIN, on_tick, d))
		return -1;
	return 0;
}

static void calib_progress(void *user, int done, int total)
{
	struct daemon *d = user;
	static struct allm_progress p = {.label = "calibrating predictors", .prefix = "allm-engined: "};
	if (d->log_level >= ALLM_LOG_INFO)
		allm_progress_steps(&p, (uint64_t)done, (uint64_t)total);
}

/* Engine events: the control plane sees each finish (telemetry, latency windows)
 * before daemon-client.c answers the client and frees the request's state; the
 * split keeps daemon-client.c free of ZeroMQ (the fuzz target builds it alone). */
static void on_finish(void *user, const struct allm_result *res)
{
	struct daemon *d = user;
	const struct dreq *dr = res->user;
	ctl_server_on_finish(d->ctl, res, dr && dr->c ? dr->c->id : 0);
	daemon_on_finish(user, res);
}

static void on_note(void *user, const char *msg)
{
	dlog(user, ALLM_LOG_WARN, "%s", msg);
}

static void on_decision(void *user, const struct allm_decision *dec, bool measured)
{
	struct daemon *d = user;
	ctl_server_on_decision(d->ctl, dec, measured);
	/* the log's line of it (debug): what was compared, what came of it */
	if (d->log_level >= ALLM_LOG_DEBUG) {
		char meas[48] = "";
		if (measured)
			snprintf(meas, sizeof(meas), "; measured %.3f ms", dec->measured_s * 1e3);
		dlog(d, ALLM_LOG_DEBUG, "decision %lld, request %lld, %s of %d tokens: %s (%s)%s: predicted %s %.3f ms, recompute "
			   "%.3f ms%s",
		     (long long)dec->seq_no, (long long)dec->req_id,
		     dec->kind == ALLM_DECISION_RESTORE ? "a cached prefix" : "a victim", dec->n_tokens,
		     allm_choice_name(dec->choice), allm_reason_text(dec->reason),
		     dec->estimated ? ", on the first estimate (not calibrated yet)" : "",
		     dec->kind == ALLM_DECISION_RESTORE ? "restore" : "swap", dec->pred_swap_s * 1e3,
		     dec->pred_recompute_s * 1e3, meas);
	}
}

/* Elastic memory's decisions: the log's line (debug), as the others. */
static void on_pool(void *user, const struct allm_pool_decision *dec)
{
	struct daemon *d = user;
	if (dec->reason == ALLM_POOL_SLO_TPOT || dec->reason == ALLM_POOL_SLO_TTFT) {
		dlog(d, ALLM_LOG_INFO, "pool decision %lld: SLO buffer %s to %lld prompt tokens a step (%s: %.1f ms, target %.1f ms)",
		     (long long)dec->seq_no, dec->inflate ? "shrinks" : "grows", (long long)dec->buffer_tokens,
		     allm_pool_reason_name(dec->reason), dec->observed_ms, dec->target_ms);
		return;
	}
	if (d->log_level >= ALLM_LOG_DEBUG)
		dlog(d, ALLM_LOG_DEBUG, "pool decision %lld: %s %d blocks (%s): KV %d blocks, scratch %lld tokens (%.1f MiB)",
		     (long long)dec->seq_no, dec->inflate ? "inflate, to the KV cache" : "deflate, to the scratch",
		     dec->blocks, allm_pool_reason_name(dec->reason), dec->kv_blocks, (long long)dec->scratch_tokens,
		     dec->scratch_bytes / 1048576.0);
}

/* --- what the control server sees of the daemon (struct ctl_host) ---------------- */

static void host_log(void *user, enum allm_log_level level, const char *fmt, va_list ap)
{
	vdlog(user, level, fmt, ap);
}

static enum ctl_host_state host_state(void *user)
{
	const struct daemon *d = user;
	return d->draining ? CTL_HOST_SHUTTING_DOWN : d->paused ? CTL_HOST_PAUSED : CTL_HOST_SERVING;
}

static void host_set_paused(void *user, bool paused)
{
	struct daemon *d = user;
	d->paused = paused;
}

static void host_shutdown(void *user, const char *why)
{
	daemon_begin_shutdown(user, why);
}

static uint32_t host_request_client(void *user, const void *req_user)
{
	const struct dreq *dr = req_user;
	return dr && dr->c ? dr->c->id : 0;
}

static const struct ctl_host_ops host_ops = {
	.log = host_log,
	.state = host_state,
	.set_paused = host_set_paused,
	.shutdown = host_shutdown,
	.clients = daemon_client_list,
	.request_client = host_request_client,
};

static void on_ctl_fd(struct allm_loop *l, int fd, uint32_t revents, void *user)
{
	ctl_server_pump(user);
}

/* After listen_socket(): it made sure no engine of this name runs, so the
 * control sockets' files can be replaced. */
static int start_control(struct daemon *d)
{
	struct ctl_host h = {
		.ops = &host_ops,
		.user = d,
		.rt = d->rt,
		.eng = d->eng,
		.pred = d->pred,
		.name = d->name,
		.runtime_dir = d->runtime_dir,
		.profile_path = d->profile_path,
		.kv_events = &d->kv_events,
	};
	d->kv_events.topic = d->kv_events_topic;
	if (d->kv_events.endpoint && !d->kv_events_topic_set)
		snprintf(d->kv_events_topic, sizeof(d->kv_events_topic), "kv@%s@%.180s", d->name, d->rt->model_desc);
	if (ctl_server_start(&h, &d->ctl))
		return -1;
	if (allm_loop_watch(d->loop, ctl_server_fd(d->ctl), POLLIN, on_ctl_fd, d->ctl)) {
		ctl_server_stop(d->ctl);
		d->ctl = NULL;
		return -1;
	}
	return 0;
}

static void stop_control(struct daemon *d)
{
	if (!d->ctl)
		return;
	allm_loop_unwatch(d->loop, ctl_server_fd(d->ctl));
	ctl_server_stop(d->ctl);
	d->ctl = NULL;
}

/* Requests taken from every client's SQ so far. */
static uint64_t submitted_total(const struct daemon *d)
{
	uint64_t n = 0;
	for (const struct dclient *c = d->clients; c; c = c->next)
		n += c->submitted;
	return n;
}

/* A simulated device's clock moves only when the engine steps, so requests a
 * client sends together (a workload at t = 0) arrive at one virtual instant only
 * if no step runs between them: after a turn that took submissions the engine
 * waits this long (wall time, no simulated time passes) for the rest. */
#define SIM_BURST_GAP_S 0.002

static int count_open_fds(void)
{
	int n = 0;
	DIR *dir = opendir("/proc/self/fd");
	if (!dir)
		return 64; /* a guess: what a started engine holds */
	while (readdir(dir))
		n++;
	closedir(dir);
	return n;
}

/* Keeps file descriptors for everything besides clients (DESIGN §8): what is open
 * now, ALLM_D_FD_RESERVE for the control plane's peers (libzmq aborts when its
 * own accept fails with EMFILE) and the rest, then ALLM_D_FDS_PER_CLIENT for each
 * of --max-clients. Raises the soft limit toward the hard one when needed, else
 * lowers --max-clients to what fits, and says so. */
static void reserve_fds(struct daemon *d)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl))
		return;
	rlim_t base = (rlim_t)count_open_fds() + ALLM_D_FD_RESERVE;
	rlim_t need = base + (rlim_t)d->max_clients * ALLM_D_FDS_PER_CLIENT;
	if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < need) {
		struct rlimit up = {.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= need ? need : rl.rlim_max,
				    .rlim_max = rl.rlim_max};
		if (!setrlimit(RLIMIT_NOFILE, &up))
			rl.rlim_cur = up.rlim_cur;
	}
	if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < need) {
		long fit = rl.rlim_cur > base ? (long)((rl.rlim_cur - base) / ALLM_D_FDS_PER_CLIENT) : 0;
		fit = fit < 1 ? 1 : fit;
		dlog(d, ALLM_LOG_WARN, "only %llu file descriptors (ulimit -n): serving at most %ld clients, not %d "
			   "(--max-clients)", (unsigned long long)rl.rlim_cur, fit, d->max_clients);
		d->max_clients = (int)fit;
	}
}

static int serve(struct daemon *d)
{
	struct allm_err err = {{0}};
	bool ctl_more = false; /* commands left over from the last turn's budget */
	bool sim = d->rt->be->simulated;
	double hold_until = 0; /* sim: no step before this wall time (a burst is arriving) */
	for (;;) {
		bool busy = !allm_engine_idle(d->eng);
		if (d->draining && !busy && !daemon_backlogged(d))
			return 0;
		/* one deadline for everything: requests still running and clients
		 * that do not read what they were sent (DESIGN §8) */
		if (d->draining && allm_now() > d->drain_deadline) {
			dlog(d, ALLM_LOG_WARN, "shutdown deadline: cancelling %s", busy ? "the requests still in flight"
									 : "what clients have not read");
			daemon_close_clients(d);
			return 0;
		}
		/* Idle: ask every client to ring its SQ doorbell, re-checking that
		 * nothing arrived meanwhile (spin-then-sleep, DESIGN §8); then sleep. */
		bool sleep = !busy && !ctl_more && daemon_prepare_sleep(d);
		/* asleep, only an fd wakes us: a client, a doorbell, a signal, the tick,
		 * the control socket */
		allm_loop_run_once(d->loop, sleep ? -1 : 0);
		if (sleep)
			daemon_finish_sleep(d);
		/* every turn, not only on ZMQ_FD: that fd is edge-triggered */
		ctl_more = ctl_server_pump(d->ctl);
		uint64_t taken = sim ? submitted_total(d) : 0;
		daemon_pump_sq(d);
		if (sim && submitted_total(d) != taken)
			hold_until = allm_now() + SIM_BURST_GAP_S;
		bool hold = sim && allm_now() < hold_until;
		if (!hold && !allm_engine_idle(d->eng) && allm_engine_step(d->eng, &err) < 0)
			dlog(d, ALLM_LOG_ERROR, "step failed: %s", err.msg);
		ctl_server_flush_events(d->ctl); /* this turn's KV events: one batch */
		daemon_flush(d);
	}
}

int main(int argc, char **argv)
{
	struct daemon d = {.listen_fd = -1, .signal_fd = -1, .tick_fd = -1, .runtime_fd = -1};
	struct allm_engine_opts o;
	struct allm_err err = {{0}};
	char note[600] = "";
	int rc = 1;

	if (parse_args(argc, argv, &d, &o))
		return 2;
	signal(SIGPIPE, SIG_IGN);
	/* sockets and files we create are ours alone unless opened on purpose */
	umask(077);
	if (prepare_runtime_dir(&d))
		return 1;
	struct allm_progress load = {.label = "loading weights", .prefix = "allm-engined: ",
				     .min_total = 64u << 20};
	if (allm_runtime_open(&o, 0, allm_progress_cb, &load, &d.rt, &err)) {
		dlog(&d, ALLM_LOG_ERROR, "%s", err.msg);
		return 1;
	}
	if (d.rt->device_note[0])
		dlog(&d, ALLM_LOG_INFO, "%s", d.rt->device_note);
	if (d.rt->disk_note[0])
		dlog(&d, d.rt->disk_failed ? 1 : 2, "%s", d.rt->disk_note);
	if (d.rt->memory_note[0])
		dlog(&d, ALLM_LOG_INFO, "%s", d.rt->memory_note);
	if (d.rt->default_model)
		dlog(&d, ALLM_LOG_INFO, "%s", ALLM_DEFAULT_MODEL_NOTE);
	struct allm_predictor_key key;
	allm_engine_predictor_key(d.rt->model, d.rt->kv, &key);
	struct allm_engine_config ec;
	allm_engine_config_from_opts(&o, &ec);
	ec.share_prefix_cache = d.share_prefix_cache;
	struct allm_engine_events ev = {.user = &d, .on_token = daemon_on_token,
					.on_finish = on_finish, .on_decision = on_decision, .on_pool = on_pool,
					.on_note = on_note};
	if (allm_predictor_create(&key, &d.pred) ||
	    allm_engine_create(d.rt->model, d.rt->kv, d.pred, &ec, &ev, &d.eng, &err) ||
	    allm_engine_prepare_predictor(d.eng, o.profile, o.calibrate_at_start, calib_progress, &d, note, sizeof(note), &err)) {
		dlog(&d, ALLM_LOG_ERROR, "%s", err.msg[0] ? err.msg : "out of memory");
		goto out;
	}
	if (note[0])
		dlog(&d, ALLM_LOG_INFO, "%s", note);
	if (daemon_prompt_limits(&d) || allm_shm_guard_install()) {
		dlog(&d, ALLM_LOG_ERROR, "out of memory");
		goto out;
	}
	if (o.profile)
		snprintf(d.profile_path, sizeof(d.profile_path), "%s", o.profile);
	else if (allm_predictor_default_path(&key, d.profile_path, sizeof(d.profile_path)))
		d.profile_path[0] = 0;
	if (allm_loop_create(o.kv_env.no_io_uring, &d.loop, &err)) {
		dlog(&d, ALLM_LOG_ERROR, "%s", err.msg);
		goto out;
	}
	if (allm_loop_uring_error(d.loop))
		dlog(&d, ALLM_LOG_WARN, "io_uring unavailable (%s): using epoll", strerror(-allm_loop_uring_error(d.loop)));
	/* A handler, not signalfd: libraries start threads before main (OpenBLAS
	 * does, in a constructor) that no mask set here would cover, and a signal
	 * may land on any of them. The handler only bumps an eventfd the loop watches. */
	d.signal_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	g_signal_fd = d.signal_fd;
	struct sigaction sa = {.sa_handler = on_posix_signal};
	sigemptyset(&sa.sa_mask);
	if (d.signal_fd < 0 || sigaction(SIGTERM, &sa, NULL) || sigaction(SIGINT, &sa, NULL) || allm_loop_watch(d.loop, d.signal_fd, POLLIN, on_signal, &d) ||
	    start_tick(&d) || listen_socket(&d)) {
		dlog(&d, ALLM_LOG_ERROR, "cannot start serving");
		goto out;
	}
	if (start_control(&d)) {
		dlog(&d, ALLM_LOG_ERROR, "cannot start the control plane");
		goto out;
	}
	reserve_fds(&d); /* with the control plane's own fds counted */
	daemon_listen_resume(&d);
	if (!d.listen_watched) {
		dlog(&d, ALLM_LOG_ERROR, "cannot watch %s", d.sock_path);
		goto out;
	}
	dlog(&d, ALLM_LOG_INFO, "serving %s (%s) on %s (control: %s/%s.ctl): %d GPU / %d CPU KV blocks of %d tokens, %s loop, "
		    "preempt %s, sched %s",
	     d.rt->model_desc, d.rt->be->iface->describe(d.rt->be), d.sock_path, d.runtime_dir, d.name,
	     d.rt->kv->gpu.n_total,
	     d.rt->kv->cpu.n_total, d.rt->kv->lay.block_size, allm_loop_backend(d.loop),
	     allm_preempt_name(o.preempt), allm_sched_name(o.sched));
	if (publish_socket(&d))
		goto out;
	rc = serve(&d);
	/* tests read this line: every block back in its pool after the last request */
	dlog(&d, ALLM_LOG_INFO, "stopped; KV blocks in use: GPU %d, CPU %d; clients served: %u",
	     allm_block_pool_used(&d.rt->kv->gpu), allm_block_pool_used(&d.rt->kv->cpu),
	     d.next_client_id);
out:
	stop_listening(&d);
	daemon_close_clients(&d);
	ctl_server_stop_events(d.ctl); /* they watch the engine's prefix cache */
	allm_engine_free(d.eng);
	stop_control(&d); /* after the engine: its last finishes publish */
	if (d.signal_fd >= 0)
		close(d.signal_fd);
	if (d.tick_fd >= 0)
		close(d.tick_fd);
	allm_loop_free(d.loop);
	allm_predictor_free(d.pred);
	allm_runtime_close(d.rt);
	allm_free(d.prompt_buf);
	allm_free(d.piece);
	allm_grammar_cache_free(d.grammars);
	allm_grammar_vocab_free(d.gvocab);
	allm_free(d.grammar_buf);
	if (d.runtime_fd >= 0)
		close(d.runtime_fd);
	return rc;
}
