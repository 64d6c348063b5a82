/* Safetensors headers: parsing with full validation, sharded directories, reading
 * tensor data through file-reader.h; see safetensors.h (writing: safetensors-write.c).
 *
 * Layout: 8-byte little-endian header length N, N bytes of JSON mapping each tensor
 * name to {"dtype", "shape", "data_offsets": [begin, end]} (offsets relative to the
 * first byte after the header) plus an optional "__metadata__" string map, then the
 * data. */
#include "safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "file-reader.h"

/* The raw bytes are handed out as they are in the file. */
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "safetensors data is little-endian");

/* Headers of real checkpoints are a few hundred KiB; anything this large is a corrupt
 * length field, and we must not allocate what a bad file asks for. */
#define ST_MAX_HEADER ((uint64_t)100 << 20)
/* Same bound for model.safetensors.index.json. */
#define ST_MAX_INDEX ((off_t)100 << 20)
#define ST_INDEX_NAME "model.safetensors.index.json"
#define ST_SINGLE_NAME "model.safetensors"

/* The index under construction, with the capacities of its growing arrays. */
struct st_build {
	struct allm_st_index *idx;
	size_t cap_names; /* entries allocated in idx->names */
	size_t cap_paths; /* in idx->paths */
	size_t cap_sizes; /* in idx->file_sizes */
	size_t cap_tensors; /* in idx->tensors */
};

void allm_st_close(struct allm_st_index *idx)
{
	if (!idx)
		return;
	for (int32_t i = 0; i < idx->n_files; i++) {
		allm_free(idx->names[i]);
		allm_free(idx->paths[i]);
	}
	for (int32_t i = 0; i < idx->n_tensors; i++)
		allm_free(idx->tensors[i].name);
	allm_free((char *)idx->dir.path);
	allm_free(idx->names);
	allm_free(idx->paths);
	allm_free(idx->file_sizes);
	allm_free(idx->tensors);
	allm_free(idx);
}

static char *st_strdup(const char *s)
{
	size_t n = strlen(s) + 1;
	char *d = allm_malloc(n);

	if (d)
		memcpy(d, s, n);
	return d;
}

/* Grows *arr (of elem-sized items, *cap of them) to hold at least need. */
static int st_grow(void *arr, size_t *cap, size_t need, size_t elem)
{
	void **p = arr, *np;
	size_t ncap = *cap ? *cap : 16, bytes;

	if (need <= *cap)
		return 0;
	while (ncap < need)
		ncap *= 2;
	if (!allm_mul_size(ncap, elem, &bytes))
		return -ENOMEM;
	np = allm_realloc(*p, bytes);
	if (!np)
		return -ENOMEM;
	*p = np;
	*cap = ncap;
	return 0;
}

/* pread() of exactly len bytes; -EIO when the file ends first. */
static int st_pread_all(int fd, void *buf, size_t len, uint64_t off)
{
	uint8_t *p = buf;

	while (len > 0) {
		ssize_t n = pread(fd, p, len, (off_t)off);

		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EIO;
		p += n;
		len -= (size_t)n;
		off += (uint64_t)n;
	}
	return 0;
}

static int st_parse_dtype(const char *s, enum allm_dtype *ret)
{
	if (strcmp(s, "F32") == 0)
		*ret = ALLM_DTYPE_F32;
	else if (strcmp(s, "F16") == 0)
		*ret = ALLM_DTYPE_F16;
	else if (strcmp(s, "BF16") == 0)
		*ret = ALLM_DTYPE_BF16;
	else
		return -EINVAL;
	return 0;
}

/* Validates one header entry and fills t (name not set). data_start is the absolute
 * offset of the data section, file_size the size of the file. */
static int st_parse_entry(const char *path, const char *name, json_t *v, uint64_t data_start,
			  uint64_t file_size, struct allm_st_tensor *t, struct allm_err *err)
{
	json_t *dtype = json_object_get(v, "dtype"), *shape = json_object_get(v, "shape");
	json_t *offs = json_object_get(v, "data_offsets");
	size_t numel = 1, nbytes;
	uint64_t begin, end, abs_end;

	if (!json_is_object(v))
		return allm_err_set(err, -EINVAL, "tensor %s in %s: entry is not an object", name,
				    path);
	if (!json_is_string(dtype))
		return allm_err_set(err, -EINVAL, "tensor %s in %s: missing or non-string dtype",
				    name, path);
	if (st_parse_dtype(json_string_value(dtype), &t->dtype) < 0)
		return allm_err_set(err, -EINVAL, "unsupported dtype %s for tensor %s in %s",
				    json_string_value(dtype), name, path);

	if (!json_is_array(shape))
		return allm_err_set(err, -EINVAL, "tensor %s in %s: missing or non-array shape",
				    name, path);
	if (json_array_size(shape) > ALLM_ST_MAX_DIMS)
		return allm_err_set(err, -EINVAL, "tensor %s in %s: shape has %zu dims, at most %d",
				    name, path, json_array_size(shape), ALLM_ST_MAX_DIMS);
	t->n_dims = (int32_t)json_array_size(shape);
	for (int32_t d = 0; d < t->n_dims; d++) {
		json_t *e = json_array_get(shape, (size_t)d);

		if (!json_is_integer(e) || json_integer_value(e) < 0)
			return allm_err_set(err, -EINVAL,
					    "tensor %s in %s: shape[%d] is not a non-negative integer",
					    name, path, d);
		t->shape[d] = (int64_t)json_integer_value(e);
		if (!allm_mul_size(numel, (size_t)t->shape[d], &numel))
			return allm_err_set(err, -EINVAL, "tensor %s in %s: shape overflows", name,
					    path);
	}
	if (!allm_mul_size(numel, allm_dtype_size(t->dtype), &nbytes))
		return allm_err_set(err, -EINVAL, "tensor %s in %s: size overflows", name, path);

	if (!json_is_array(offs) || json_array_size(offs) != 2 ||
	    !json_is_integer(json_array_get(offs, 0)) || !json_is_integer(json_array_get(offs, 1)) ||
	    json_integer_value(json_array_get(offs, 0)) < 0 ||
	    json_integer_value(json_array_get(offs, 1)) < 0)
		return allm_err_set(err, -EINVAL,
				    "tensor %s in %s: data_offsets is not two non-negative integers",
				    name, path);
	begin = (uint64_t)json_integer_value(json_array_get(offs, 0));
	end = (uint64_t)json_integer_value(json_array_get(offs, 1));
	if (begin > end)
		return allm_err_set(err, -EINVAL, "tensor %s in %s: data_offsets begin %llu > end %llu",
				    name, path, (unsigned long long)begin, (unsigned long long)end);
	if (end - begin != nbytes)
		return allm_err_set(err, -EINVAL,
				    "tensor %s in %s: data_offsets span %llu bytes but shape and dtype %s need %zu",
				    name, path, (unsigned long long)(end - begin),
				    json_string_value(dtype), nbytes);
	if (__builtin_add_overflow(data_start, end, &abs_end) || abs_end > file_size)
		return allm_err_set(err, -EINVAL,
				    "truncated: tensor %s needs bytes up to %llu but %s has %llu bytes",
				    name, (unsigned long long)data_start + end, path,
				    (unsigned long long)file_size);
	t->offset = data_start + begin;
	t->nbytes = nbytes;
	return 0;
}

/* Reads and parses the header of file name of dir (path: its full name, for
 * messages): *ret_root (a JSON object, the caller's), the header length and the
 * file size. */
static int st_load_header(const struct allm_vdir *dir, const char *name, const char *path,
			  json_t **ret_root, uint64_t *ret_hlen, uint64_t *ret_fsize,
			  struct allm_err *err)
{
	int fd, ret;
	struct stat st;
	uint8_t lenbuf[8];
	uint64_t hlen = 0, fsize;
	char *hdr = NULL;
	json_t *root = NULL;
	json_error_t jerr;

	fd = allm_vdir_open(dir, name);
	if (fd < 0) {
		ret = allm_err_set(err, fd, "cannot open %s: %s", path, strerror(-fd));
		goto out;
	}
	if (fstat(fd, &st) < 0) {
		ret = allm_err_set(err, -errno, "cannot open %s: %s", path, strerror(errno));
		goto out;
	}
	fsize = (uint64_t)st.st_size;
	if (!S_ISREG(st.st_mode) || fsize < 8) {
		ret = allm_err_set(err, -EINVAL, "%s is not a file or too short for a safetensors header (%llu bytes)",
				   path, (unsigned long long)fsize);
		goto out;
	}
	ret = st_pread_all(fd, lenbuf, 8, 0);
	if (ret < 0) {
		allm_err_set(err, ret, "cannot read %s: %s", path, strerror(-ret));
		goto out;
	}
	for (int i = 7; i >= 0; i--)
		hlen = hlen << 8 | lenbuf[i];
	if (hlen > ST_MAX_HEADER) {
		ret = allm_err_set(err, -EINVAL, "header length %llu of %s is above the %llu MiB limit",
				   (unsigned long long)hlen, path,
				   (unsigned long long)(ST_MAX_HEADER >> 20));
		goto out;
	}
	if (hlen > fsize - 8) {
		ret = allm_err_set(err, -EINVAL,
				   "header length %llu of %s runs past the end of the file (%llu bytes)",
				   (unsigned long long)hlen, path, (unsigned long long)fsize);
		goto out;
	}
	hdr = allm_malloc(hlen + 1);
	if (!hdr) {
		ret = allm_err_set(err, -ENOMEM, "out of memory for the header of %s", path);
		goto out;
	}
	ret = st_pread_all(fd, hdr, hlen, 8);
	if (ret < 0) {
		allm_err_set(err, ret, "cannot read the header of %s: %s", path, strerror(-ret));
		goto out;
	}
	root = json_loadb(hdr, hlen, JSON_REJECT_DUPLICATES, &jerr);
	if (!root && json_error_code(&jerr) == json_error_duplicate_key)
		/* jansson's text names the key: duplicate object key near '"w"'. */
		ret = allm_err_set(err, -EINVAL, "duplicate tensor name in the header of %s: %s",
				   path, jerr.text);
	else if (!root)
		ret = allm_err_set(err, -EINVAL, "header of %s is not valid JSON: %s (byte %d)", path,
				   jerr.text, jerr.position);
	else if (!json_is_object(root))
		ret = allm_err_set(err, -EINVAL, "header of %s is not a JSON object", path);
	else
		ret = 0;
	if (ret == 0) {
		*ret_root = root;
		root = NULL;
		*ret_hlen = hlen;
		*ret_fsize = fsize;
	}
out:
	if (fd >= 0)
		close(fd);
	allm_free(hdr);
	json_decref(root);
	return ret;
}

/* "__metadata__" is a string -> string map; the reference reader rejects anything
 * else, so we do too. */
static int st_check_metadata(const char *path, json_t *v, struct allm_err *err)
{
	const char *k;
	json_t *mv;

	if (!json_is_object(v))
		return allm_err_set(err, -EINVAL, "__metadata__ of %s is not an object", path);
	json_object_foreach(v, k, mv) {
		if (!json_is_string(mv))
			return allm_err_set(err, -EINVAL, "__metadata__ entry %s of %s is not a string",
					    k, path);
	}
	return 0;
}

/* Parses the header of file fname of the index's directory and appends the file
 * and its tensors to bld. */
static int st_parse_file(struct st_build *bld, const char *fname, struct allm_err *err)
{
	struct allm_st_index *idx = bld->idx;
	int32_t file_idx = idx->n_files;
	uint64_t hlen = 0, fsize = 0;
	json_t *root = NULL, *v;
	const char *name;
	char path[4096];
	int ret;

	allm_vdir_join(&idx->dir, fname, path, sizeof(path));
	ret = st_load_header(&idx->dir, fname, path, &root, &hlen, &fsize, err);
	if (ret < 0)
		return ret;
	json_object_foreach(root, name, v) {
		struct allm_st_tensor t = { .file_idx = file_idx };

		if (strcmp(name, "__metadata__") == 0) {
			ret = st_check_metadata(path, v, err);
			if (ret < 0)
				goto out;
			continue;
		}
		ret = st_parse_entry(path, name, v, 8 + hlen, fsize, &t, err);
		if (ret < 0)
			goto out;
		if (st_grow(&idx->tensors, &bld->cap_tensors, (size_t)idx->n_tensors + 1,
			    sizeof(t)) < 0 || !(t.name = st_strdup(name))) {
			ret = allm_err_set(err, -ENOMEM, "out of memory");
			goto out;
		}
		idx->tensors[idx->n_tensors++] = t;
	}
	/* The tensors above already refer to this file by the next index. */
	char *p = st_strdup(path), *nm = st_strdup(fname);
	if (!p || !nm ||
	    st_grow(&idx->paths, &bld->cap_paths, (size_t)file_idx + 1, sizeof(*idx->paths)) < 0 ||
	    st_grow(&idx->names, &bld->cap_names, (size_t)file_idx + 1, sizeof(*idx->names)) < 0 ||
	    st_grow(&idx->file_sizes, &bld->cap_sizes, (size_t)file_idx + 1,
		    sizeof(*idx->file_sizes)) < 0) {
		allm_free(p);
		allm_free(nm);
		ret = allm_err_set(err, -ENOMEM, "out of memory");
		goto out;
	}
	idx->paths[file_idx] = p;
	idx->names[file_idx] = nm;
	idx->file_sizes[file_idx] = fsize;
	idx->n_files++;
out:
	json_decref(root);
	return ret;
}

static int st_cmp_tensor(const void *a, const void *b)
{
	return strcmp(((const struct allm_st_tensor *)a)->name,
		      ((const struct allm_st_tensor *)b)->name);
}

/* Sorts the tensors by name for allm_st_find(); a name in two files is an error
 * (within one file the JSON parser already rejects it). */
static int st_sort(struct allm_st_index *idx, struct allm_err *err)
{
	if (idx->n_tensors > 1)
		qsort(idx->tensors, (size_t)idx->n_tensors, sizeof(*idx->tensors), st_cmp_tensor);
	for (int32_t i = 1; i < idx->n_tensors; i++) {
		const struct allm_st_tensor *a = &idx->tensors[i - 1], *b = &idx->tensors[i];

		if (strcmp(a->name, b->name) == 0)
			return allm_err_set(err, -EINVAL, "duplicate tensor %s in %s and %s", a->name,
					    idx->paths[a->file_idx], idx->paths[b->file_idx]);
	}
	return 0;
}

/* A new, empty index over dir (its path copied). */
static struct allm_st_index *st_new_index(const struct allm_vdir *dir)
{
	struct allm_st_index *idx = allm_calloc(1, sizeof(*idx));
	char *path = st_strdup(dir->path ? dir->path : "");
	if (!idx || !path) {
		allm_free(idx);
		allm_free(path);
		return NULL;
	}
	idx->dir = *dir;
	idx->dir.path = path;
	return idx;
}

int allm_st_open_file(const char *path, struct allm_st_index **ret, struct allm_err *err)
{
	struct st_build bld = { 0 };
	struct allm_vdir here = allm_vdir_disk(""); /* the name is the path */
	int r;

	bld.idx = st_new_index(&here);
	if (!bld.idx)
		return allm_err_set(err, -ENOMEM, "out of memory");
	r = st_parse_file(&bld, path, err);
	if (r == 0)
		r = st_sort(bld.idx, err);
	if (r < 0) {
		allm_st_close(bld.idx);
		return r;
	}
	*ret = bld.idx;
	return 0;
}

/* A shard name comes from a file we did not write: it must name a file inside the
 * model directory, nothing else. */
static bool st_shard_name_ok(const char *s)
{
	return s[0] != '\0' && !strchr(s, '/') && !strchr(s, '\\') && !strstr(s, "..");
}

/* Loads and validates dir/model.safetensors.index.json; *ret_root owns the JSON and
 * *ret_map points into it. */
static int st_load_index(const struct allm_vdir *dir, const char *index_path, json_t **ret_root,
			 json_t **ret_map, struct allm_err *err)
{
	json_t *root = NULL, *map, *v;
	json_error_t jerr;
	const char *name;
	char *text = NULL;
	size_t len = 0;
	int r;

	r = allm_vdir_read(dir, ST_INDEX_NAME, (size_t)ST_MAX_INDEX, &text, &len);
	if (r == -EFBIG)
		return allm_err_set(err, -EINVAL, "%s is larger than %lld MiB", index_path,
				    (long long)(ST_MAX_INDEX >> 20));
	if (r)
		return allm_err_set(err, r, "cannot open %s: %s", index_path, strerror(-r));
	root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
	allm_free(text);
	if (!root)
		return allm_err_set(err, -EINVAL, "%s is not valid JSON: %s (line %d)%s", index_path,
				    jerr.text, jerr.line,
				    json_error_code(&jerr) == json_error_duplicate_key ?
					    " (a tensor listed twice in weight_map?)" : "");
	map = json_object_get(root, "weight_map");
	if (!json_is_object(map)) {
		r = allm_err_set(err, -EINVAL, "%s has no \"weight_map\" object", index_path);
		goto fail;
	}
	json_object_foreach(map, name, v) {
		if (!json_is_string(v)) {
			r = allm_err_set(err, -EINVAL,
					 "weight_map entry for tensor %s in %s is not a string", name,
					 index_path);
			goto fail;
		}
		if (!st_shard_name_ok(json_string_value(v))) {
			r = allm_err_set(err, -EINVAL,
					 "weight_map entry for tensor %s in %s names shard \"%s\" outside the model directory",
					 name, index_path, json_string_value(v));
			goto fail;
		}
	}
	*ret_root = root;
	*ret_map = map;
	return 0;
fail:
	/* After the message: name and v point into root. */
	json_decref(root);
	return r;
}

/* Opens every distinct shard of the weight_map once, then checks that each listed
 * tensor is in the shard the map names. */
static int st_open_sharded(const char *index_path, struct st_build *bld, struct allm_err *err)
{
	struct allm_st_index *idx = bld->idx;
	json_t *root = NULL, *map, *v;
	const char *name;
	char path[4096];
	int ret;

	ret = st_load_index(&idx->dir, index_path, &root, &map, err);
	if (ret < 0)
		return ret;
	json_object_foreach(map, name, v) {
		const char *shard = json_string_value(v);
		bool seen = false;

		/* Shards are few (tens); a linear scan over the ones opened is cheap. */
		for (int32_t f = 0; f < idx->n_files && !seen; f++)
			seen = strcmp(idx->names[f], shard) == 0;
		if (seen)
			continue;
		if ((ret = allm_vdir_access(&idx->dir, shard)) < 0) {
			ret = allm_err_set(err, ret, "shard %s listed in %s is missing: %s",
					   allm_vdir_join(&idx->dir, shard, path, sizeof(path)),
					   index_path, strerror(-ret));
			goto out;
		}
		ret = st_parse_file(bld, shard, err);
		if (ret < 0)
			goto out;
	}
	ret = st_sort(idx, err);
	if (ret < 0)
		goto out;
	json_object_foreach(map, name, v) {
		const struct allm_st_tensor *t = allm_st_find(idx, name);
		const char *shard = json_string_value(v), *in, *base;

		if (!t) {
			ret = allm_err_set(err, -EINVAL, "tensor %s listed in %s is not in shard %s",
					   name, index_path, shard);
			goto out;
		}
		in = idx->paths[t->file_idx];
		base = idx->names[t->file_idx];
		if (strcmp(base, shard) != 0) {
			ret = allm_err_set(err, -EINVAL, "tensor %s listed in %s for shard %s is in %s",
					   name, index_path, shard, in);
			goto out;
		}
	}
out:
	json_decref(root);
	return ret;
}

int allm_st_open_dir(const char *model_dir, struct allm_st_index **ret, struct allm_err *err)
{
	struct allm_vdir d = allm_vdir_disk(model_dir);
	return allm_st_open_from(&d, ret, err);
}

int allm_st_open_from(const struct allm_vdir *dir, struct allm_st_index **ret,
		      struct allm_err *err)
{
	struct st_build bld = { 0 };
	char index_path[4096];
	int r;

	bld.idx = st_new_index(dir);
	if (!bld.idx)
		return allm_err_set(err, -ENOMEM, "out of memory");
	allm_vdir_join(dir, ST_INDEX_NAME, index_path, sizeof(index_path));
	/* The index wins, as in transformers: a stale model.safetensors next to it is
	 * not what the index describes. */
	if (allm_vdir_access(dir, ST_INDEX_NAME) == 0) {
		r = st_open_sharded(index_path, &bld, err);
	} else if (allm_vdir_access(dir, ST_SINGLE_NAME) == 0) {
		r = st_parse_file(&bld, ST_SINGLE_NAME, err);
		if (r == 0)
			r = st_sort(bld.idx, err);
	} else {
		r = allm_err_set(err, -ENOENT, "no model.safetensors or model.safetensors.index.json in %s",
				 dir->path);
	}
	if (r < 0) {
		allm_st_close(bld.idx);
		return r;
	}
	*ret = bld.idx;
	return 0;
}

static int st_cmp_key(const void *key, const void *elem)
{
	return strcmp(key, ((const struct allm_st_tensor *)elem)->name);
}

const struct allm_st_tensor *allm_st_find(const struct allm_st_index *idx, const char *name)
{
	if (!idx || !name || idx->n_tensors == 0)
		return NULL;
	return bsearch(name, idx->tensors, (size_t)idx->n_tensors, sizeof(*idx->tensors),
		       st_cmp_key);
}

int allm_st_read_tensors(const struct allm_st_index *idx, const struct allm_st_read *reqs,
			 size_t n, bool no_io_uring, allm_progress_fn progress, void *user,
			 struct allm_err *err)
{
	struct allm_fr *fr = NULL;
	int *fds = NULL, ret;

	/* Each file is opened once per call rather than kept open in the index: an index
	 * may live long after loading and should not pin descriptors. */
	fds = allm_malloc(sizeof(*fds) * (size_t)(idx->n_files > 0 ? idx->n_files : 1));
	if (!fds)
		return allm_err_set(err, -ENOMEM, "out of memory");
	for (int32_t f = 0; f < idx->n_files; f++)
		fds[f] = -1;
	ret = allm_fr_create(0, 0, &fr, err);
	if (ret < 0)
		goto out;
	if (no_io_uring)
		allm_fr_force_pread(fr);
	for (size_t i = 0; i < n; i++) {
		const struct allm_st_tensor *t = reqs[i].t;
		int32_t f;

		if (!t || t < idx->tensors || t >= idx->tensors + idx->n_tensors ||
		    (!reqs[i].dst && t->nbytes > 0)) {
			ret = allm_err_set(err, -EINVAL, "read request %zu: tensor not from this index or NULL destination",
					   i);
			goto out;
		}
		if (t->nbytes == 0)
			continue;
		f = t->file_idx;
		if (fds[f] < 0) {
			fds[f] = allm_vdir_open(&idx->dir, idx->names[f]);
			if (fds[f] < 0) {
				ret = allm_err_set(err, fds[f], "cannot open %s: %s", idx->paths[f],
						   strerror(-fds[f]));
				goto out;
			}
			/* Weights are read front to back once: ask for aggressive readahead. */
			posix_fadvise(fds[f], 0, 0, POSIX_FADV_SEQUENTIAL);
		}
		ret = allm_fr_add(fr, fds[f], t->offset, t->nbytes, reqs[i].dst, idx->paths[f], err);
		if (ret < 0)
			goto out;
	}
	ret = allm_fr_run(fr, progress, user, err);
out:
	allm_fr_destroy(fr);
	for (int32_t f = 0; f < idx->n_files; f++)
		if (fds[f] >= 0)
			close(fds[f]);
	allm_free(fds);
	return ret;
}
