/* Description: common/safe-file (issue 37 item 3): a file is replaced whole through a name no one can guess (no leftover, no temp name of the pid), a symlink planted at its name is replaced and its target untouched, a planted temp-style symlink is never followed, directories writable by others or symlinked are refused, a FIFO or symlink is never opened for reading; a scratch file (the disk KV tier) has no name left, and its named fallback is refused where others could swap the name (o+w, no sticky bit). */
#include "safe-file.h"
#include "test-check.h"

#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char root[64];

static void path_of(char *ret, size_t len, const char *name)
{
	snprintf(ret, len, "%s/%s", root, name);
}

static int count_entries(const char *dir)
{
	DIR *d = opendir(dir);
	int n = 0;
	for (struct dirent *e; d && (e = readdir(d));)
		n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
	if (d)
		closedir(d);
	return n;
}

static void slurp(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "r");
	size_t n = f ? fread(buf, 1, len - 1, f) : 0;
	buf[n] = 0;
	if (f)
		fclose(f);
}

static void test_replace(void)
{
	char d[128], p[160], target[160], buf[64];
	struct allm_err err = {{0}};
	struct stat st;
	int fd = -1;
	path_of(d, sizeof(d), "priv");
	mkdir(d, 0700);
	CHECK(allm_dir_open_private(d, "the test directory", &fd, &err) == 0, "%s", err.msg);
	CHECK(allm_file_replace(fd, "f.json", 0600, "one\n", 4, &err) == 0, "%s", err.msg);
	snprintf(p, sizeof(p), "%s/f.json", d);
	slurp(p, buf, sizeof(buf));
	CHECK(!strcmp(buf, "one\n"), "content '%s'", buf);
	CHECK(stat(p, &st) == 0 && (st.st_mode & 0777) == 0600, "mode %o", (unsigned)st.st_mode);
	CHECK(allm_file_replace(fd, "f.json", 0600, "two\n", 4, &err) == 0, "%s", err.msg);
	slurp(p, buf, sizeof(buf));
	CHECK(!strcmp(buf, "two\n"), "replaced: '%s'", buf);
	CHECK(count_entries(d) == 1, "a temp file left behind: %d entries", count_entries(d));

	/* a symlink at the name: replaced by the file, its target untouched */
	path_of(target, sizeof(target), "target");
	FILE *t = fopen(target, "w");
	fputs("secret\n", t);
	fclose(t);
	unlink(p);
	CHECK(symlink(target, p) == 0, "symlink");
	CHECK(allm_file_replace(fd, "f.json", 0600, "three\n", 6, &err) == 0, "%s", err.msg);
	slurp(target, buf, sizeof(buf));
	CHECK(!strcmp(buf, "secret\n"), "the symlink's target was written: '%s'", buf);
	CHECK(lstat(p, &st) == 0 && S_ISREG(st.st_mode), "the name is not a regular file now");

	/* the old engine's predictable temp name, planted: never followed */
	char planted[200];
	snprintf(planted, sizeof(planted), "%s/f.json.tmp.%ld", d, (long)getpid());
	CHECK(symlink(target, planted) == 0, "symlink");
	CHECK(allm_file_replace(fd, "f.json", 0600, "four\n", 5, &err) == 0, "%s", err.msg);
	slurp(target, buf, sizeof(buf));
	CHECK(!strcmp(buf, "secret\n"), "a planted temp symlink was followed: '%s'", buf);
	unlink(planted);

	/* reading: a symlink and a FIFO are refused, a regular file opens */
	int rfd = -1;
	unlink(p);
	CHECK(symlink(target, p) == 0, "symlink");
	CHECK(allm_file_open_read(fd, "f.json", &rfd, &err) == -ELOOP, "a symlink opened: %s", err.msg);
	unlink(p);
	CHECK(mkfifo(p, 0600) == 0, "mkfifo");
	CHECK(allm_file_open_read(fd, "f.json", &rfd, &err) == -EINVAL, "a FIFO opened: %s", err.msg);
	unlink(p);
	CHECK(allm_file_open_read(fd, "f.json", &rfd, &err) == -ENOENT, "missing: %s", err.msg);
	CHECK(allm_file_replace(fd, "f.json", 0600, "five\n", 5, &err) == 0, "%s", err.msg);
	CHECK(allm_file_open_read(fd, "f.json", &rfd, &err) == 0 && rfd >= 0, "%s", err.msg);
	if (rfd >= 0)
		close(rfd);
	CHECK(allm_file_replace(fd, "a/b", 0600, "x", 1, &err) == -EINVAL, "a name with '/'");
	close(fd);
}

static void test_dirs(void)
{
	char d[128], l[128];
	struct allm_err err = {{0}};
	int fd = -1;
	path_of(d, sizeof(d), "open");
	mkdir(d, 0700);
	chmod(d, 01777);
	CHECK(allm_dir_open_private(d, "the test directory", &fd, &err) == -EPERM && strstr(err.msg, "1777"),
	      "a 1777 directory: %s", err.msg);
	chmod(d, 0757);
	CHECK(allm_dir_open_private(d, "the test directory", &fd, &err) == -EPERM, "o+w: %s", err.msg);
	chmod(d, 0755);
	CHECK(allm_dir_open_private(d, "the test directory", &fd, &err) == 0, "0755: %s", err.msg);
	close(fd);
	path_of(l, sizeof(l), "link");
	CHECK(symlink(d, l) == 0, "symlink");
	CHECK(allm_dir_open_private(l, "the test directory", &fd, &err) == -ELOOP && strstr(err.msg, "symlink"),
	      "a symlinked directory: %s", err.msg);
	CHECK(allm_dir_open_private("/nonexistent/x", "the test directory", &fd, &err) == -ENOENT, "%s", err.msg);

	struct stat st = {.st_mode = S_IFDIR | 0775, .st_uid = geteuid(), .st_gid = getegid()};
	char why[160];
	CHECK(allm_dir_check_private(&st, why, sizeof(why)) == 0, "g+w, our own group: %s", why);
	st.st_gid = getegid() + 1;
	CHECK(allm_dir_check_private(&st, why, sizeof(why)) == -EPERM, "g+w, another group");
	st = (struct stat){.st_mode = S_IFDIR | 0700, .st_uid = geteuid() + 1};
	CHECK(allm_dir_check_private(&st, why, sizeof(why)) == (geteuid() + 1 == 0 ? 0 : -EPERM) &&
		      (geteuid() + 1 == 0 || strstr(why, "belongs to uid")),
	      "another owner: %s", why);

	char dir[64];
	const char *name;
	CHECK(allm_path_split("a/b/c.json", dir, sizeof(dir), &name) == 0 && !strcmp(dir, "a/b") &&
		      !strcmp(name, "c.json"), "split");
	CHECK(allm_path_split("c.json", dir, sizeof(dir), &name) == 0 && !strcmp(dir, ".") && !strcmp(name, "c.json"),
	      "split, no directory");
	CHECK(allm_path_split("/c", dir, sizeof(dir), &name) == 0 && !strcmp(dir, "/") && !strcmp(name, "c"),
	      "split, the root");
	CHECK(allm_path_split("a/", dir, sizeof(dir), &name) == -EINVAL, "split, no name");
}

static void test_unnamed(void)
{
	char d[128];
	bool named;
	path_of(d, sizeof(d), "scratch");
	mkdir(d, 0700);
	int dfd = open(d, O_RDONLY | O_DIRECTORY);
	int fd = allm_file_unnamed(dfd, 0, false, &named);
	CHECK(fd >= 0 && count_entries(d) == 0, "O_TMPFILE (or its fallback): %d, %d entries", fd, count_entries(d));
	if (fd >= 0)
		close(fd);
	fd = allm_file_unnamed(dfd, 0, true, &named);
	CHECK(fd >= 0 && named && count_entries(d) == 0, "named then unlinked: %d, %d entries", fd, count_entries(d));
	if (fd >= 0)
		close(fd);
	chmod(d, 0777);
	CHECK(allm_file_unnamed(dfd, 0, true, &named) == -EPERM, "a name others could swap (o+w, no sticky bit)");
	chmod(d, 01777);
	fd = allm_file_unnamed(dfd, 0, true, &named);
	CHECK(fd >= 0 && named, "sticky: a name only we can remove: %d", fd);
	if (fd >= 0)
		close(fd);
	close(dfd);
}

int main(void)
{
	snprintf(root, sizeof(root), "/tmp/test-safe-file-XXXXXX");
	if (!mkdtemp(root)) {
		perror("mkdtemp");
		return 1;
	}
	test_replace();
	test_dirs();
	test_unnamed();
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", root);
	if (n_fail)
		fprintf(stderr, "%d failures\n", n_fail);
	return n_fail ? 1 : 0;
}
