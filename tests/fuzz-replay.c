/* Description: replays fuzz inputs (files or folders given as arguments) through a
 * libFuzzer target without libFuzzer, so gcc builds and meson run the regression
 * corpus; each input must return without crashing. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <stdbool.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
extern bool replaying;

static int run_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		perror(path);
		return 1;
	}
	uint8_t *buf = malloc(1 << 20);
	size_t n = buf ? fread(buf, 1, 1 << 20, f) : 0;
	fclose(f);
	LLVMFuzzerTestOneInput(buf, n);
	free(buf);
	return 0;
}

int main(int argc, char **argv)
{
	int files = 0, bad = 0;
	replaying = true;
	for (int i = 1; i < argc; i++) {
		struct stat st;
		if (stat(argv[i], &st)) {
			perror(argv[i]);
			return 1;
		}
		if (!S_ISDIR(st.st_mode)) {
			bad += run_file(argv[i]);
			files++;
			continue;
		}
		DIR *dir = opendir(argv[i]);
		struct dirent *de;
		while (dir && (de = readdir(dir))) {
			if (de->d_name[0] == '.')
				continue;
			char p[4096];
			snprintf(p, sizeof(p), "%s/%s", argv[i], de->d_name);
			bad += run_file(p);
			files++;
		}
		if (dir)
			closedir(dir);
	}
	printf("replayed %d inputs\n", files);
	return bad || files == 0;
}
