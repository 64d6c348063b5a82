/* Who a peer of the engine's sockets may trust (DESIGN §8, "Clients verify the
 * engine"). The sockets live in a runtime directory; anyone who can create files
 * there can pose as the engine and read every prompt sent to it. So a client
 * connects only when that directory is owned by the uid it expects the engine to
 * run as, is not a symlink and gives no one else write access, and then checks
 * the listening peer's uid (SO_PEERCRED) too, which no file trick can fake.
 *
 * The engine's uid is the caller's own unless $ALLM_ENGINE_UID names another
 * (a client of an engine started with --allow-uid).
 *
 * Library code: returns 0 / -errno with a one-line reason in err, never prints. */
#ifndef ALLM_SHM_TRUST_H
#define ALLM_SHM_TRUST_H

#include <stddef.h>
#include <sys/types.h>

/* The one rule for the directories both sides agree on: an XDG variable counts
 * only when it holds an absolute path (the XDG base directory specification: a
 * relative one is invalid and ignored); our own ALLM_RUNTIME_DIR is taken as
 * given, like --runtime-dir.
 *
 * The runtime directory (sockets, control endpoints): $ALLM_RUNTIME_DIR, else
 * $XDG_RUNTIME_DIR/adaptivellm, else /tmp/adaptivellm-$UID. 0 or -ENAMETOOLONG. */
int allm_shm_runtime_dir(char *ret, size_t cap);
/* The cache directory (predictor profiles, the disk KV tier's default):
 * $XDG_CACHE_HOME/adaptivellm, else $HOME/.cache/adaptivellm (HOME absolute);
 * -ENOENT when neither is set, -ENAMETOOLONG. Nothing is created. */
int allm_shm_cache_dir(char *ret, size_t cap);

/* The uid the engine must run as: $ALLM_ENGINE_UID when set (a decimal uid), else
 * getuid(). -EINVAL (reason in err) when the variable is not a uid. */
int allm_shm_engine_uid(uid_t *ret, char *err, size_t errlen);

/* Checks the runtime directory `dir` before we talk to what lives in it: it must
 * be a directory, not a symlink, owned by `owner`, writable by its owner only
 * (the engine makes it 0700, or 0711 with --allow-uid so others can reach the
 * socket it lets them use).
 * Returns 0, -ENOENT (it does not exist: nobody is serving there yet), or -EPERM
 * with the reason in err. */
int allm_shm_check_dir(const char *dir, uid_t owner, char *err, size_t errlen);

/* Checks that the file `path` (a socket of the engine) is a socket owned by
 * `owner` and not a symlink. 0, -ENOENT, or -EPERM with the reason in err. */
int allm_shm_check_socket_file(const char *path, uid_t owner, char *err, size_t errlen);

/* The uid of the process at the other end of the connected Unix socket fd (its
 * credentials when it called listen() or connect()). 0 or -errno. */
int allm_shm_peer_uid(int fd, uid_t *ret);

#endif
