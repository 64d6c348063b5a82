/* Files the engine creates where another user could have a say: checked
 * directories, names no one can predict, no symlink followed (issue 37 item 3).
 * Everything works on an open directory (openat, renameat), never on a second
 * lookup of a path that someone could redirect in between. Library code: 0 or
 * -errno, with the reason in err. */
#ifndef ALLM_SAFE_FILE_H
#define ALLM_SAFE_FILE_H

#include "common.h"

#include <sys/stat.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Whether a directory with this stat is one only we (and root) can change: owned
 * by our euid or by root, and not writable by others (o+w) nor by a group other
 * than our own egid. 0, or -EPERM with why ("mode 1777 lets other users create
 * files in it", "it belongs to uid 65534"). */
int allm_dir_check_private(const struct stat *st, char *why, size_t why_len);

/* Opens directory path (O_DIRECTORY, O_NOFOLLOW: its last component must not be a
 * symlink) and checks it with allm_dir_check_private. 0 with *ret_fd (the caller
 * closes it); -ENOENT, -ENOTDIR, -ELOOP (a symlink), -EPERM (not private), with
 * err naming the directory and why. what names the file's purpose in messages
 * ("the profile directory"). */
int allm_dir_open_private(const char *path, const char *what, int *ret_fd, struct allm_err *err);

/* Splits path into its directory ("." when it has none) and last component, into
 * dir (dir_len bytes) and *ret_name (a pointer into path). -ENAMETOOLONG, -EINVAL
 * (empty, or ends with '/'). */
int allm_path_split(const char *path, char *dir, size_t dir_len, const char **ret_name);

/* Writes file `name` in dirfd whole or not at all: the bytes go to a file no one
 * else can name (O_TMPFILE, linked under a random name once complete; or, where
 * the filesystem lacks O_TMPFILE, a random name made with O_EXCL|O_NOFOLLOW), are
 * synced, then renamed over name (renameat replaces a symlink planted there, it
 * never follows it). mode: the new file's (e.g. 0600). 0 or -errno with err. */
int allm_file_replace(int dirfd, const char *name, mode_t mode, const void *data, size_t len,
		      struct allm_err *err);

/* A file with no name in dirfd, for scratch data (the disk KV tier): O_TMPFILE,
 * or where the filesystem lacks it (or no_tmpfile asks) a random name made with
 * O_EXCL|O_NOFOLLOW and unlinked at once — in a directory others can write
 * without the sticky bit that name could be swapped before it is unlinked, so
 * there the named way is refused (-EPERM). flags: added to O_RDWR (O_DIRECT).
 * The fd, *ret_named saying which way; or -errno. */
int allm_file_unnamed(int dirfd, int flags, bool no_tmpfile, bool *ret_named);

/* Makes the directory dir and its missing parents with mode (those that exist are
 * left as they are). 0 or -errno. */
int allm_mkdir_p(const char *dir, unsigned mode);

/* Opens name in dirfd for reading: O_NOFOLLOW, and a regular file. 0 with
 * *ret_fd, or -errno with err (-ENOENT quietly: err says "no such file"). */
int allm_file_open_read(int dirfd, const char *name, int *ret_fd, struct allm_err *err);

#ifdef __cplusplus
}
#endif

#endif
