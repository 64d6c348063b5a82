/* Reading and writing Hugging Face safetensors files.
 *
 * A model directory holds either model.safetensors or shards listed by
 * model.safetensors.index.json ("weight_map": tensor name -> shard file). Opening
 * parses and validates every header (dtype, shape, offsets inside the file, sizes
 * that agree with the shape) before any data is read, so a bad file fails with one
 * clear message naming the file and the tensor and nothing half-loaded. Tensor data
 * is then read with io_uring, many large reads in flight, straight into the
 * caller's destination (file-reader.h). */
#ifndef ALLM_SAFETENSORS_H
#define ALLM_SAFETENSORS_H

#include "common.h"
#include "vdir.h"

#define ALLM_ST_MAX_DIMS 8

struct allm_st_tensor {
	char *name;
	enum allm_dtype dtype;
	int32_t n_dims;
	int64_t shape[ALLM_ST_MAX_DIMS];
	int32_t file_idx; /* index into allm_st_index.paths */
	uint64_t offset; /* absolute byte offset of the data in its file */
	uint64_t nbytes; /* = product(shape) * dtype size, checked */
};

struct allm_st_index {
	struct allm_vdir dir; /* where the files are (path owned by the index) */
	int32_t n_files;
	char **names; /* the shard files' names in dir */
	char **paths; /* and their full paths, for messages */
	uint64_t *file_sizes;
	int32_t n_tensors;
	struct allm_st_tensor *tensors; /* sorted by name */
};

/* Opens model_dir/model.safetensors, or the shards of
 * model_dir/model.safetensors.index.json when that exists. Returns 0 and a new
 * index the caller frees with allm_st_close(), or -errno with err naming the file
 * and the problem. */
int allm_st_open_dir(const char *model_dir, struct allm_st_index **ret,
		     struct allm_err *err);
/* The same for a directory on disk or embedded (common/vdir.h); an embedded
 * directory's file table must outlive the index. */
int allm_st_open_from(const struct allm_vdir *dir, struct allm_st_index **ret,
		      struct allm_err *err);
/* Opens one .safetensors file. */
int allm_st_open_file(const char *path, struct allm_st_index **ret, struct allm_err *err);
void allm_st_close(struct allm_st_index *idx);

/* NULL when absent. O(log n). */
const struct allm_st_tensor *allm_st_find(const struct allm_st_index *idx,
					  const char *name);

/* One tensor to read: its raw bytes (file dtype) go to dst, which has t->nbytes. */
struct allm_st_read {
	const struct allm_st_tensor *t;
	void *dst;
};

/* Called after each completed chunk: bytes done so far of total. */
typedef void (*allm_progress_fn)(void *user, uint64_t done, uint64_t total);

/* Reads all requested tensors (io_uring, queued in parallel; falls back to pread
 * where io_uring is unavailable; no_io_uring: pread, ALLM_NO_IO_URING as the
 * program read it). 0 or -errno with err set. */
int allm_st_read_tensors(const struct allm_st_index *idx, const struct allm_st_read *reqs,
			 size_t n, bool no_io_uring, allm_progress_fn progress, void *user,
			 struct allm_err *err);

/* --- writing (allm-mkmodel, tests) ---------------------------------------- */

struct allm_st_out {
	const char *name;
	enum allm_dtype dtype;
	int32_t n_dims;
	int64_t shape[ALLM_ST_MAX_DIMS];
	const void *data; /* product(shape) elements of dtype */
};

/* Writes one safetensors file with the tensors in the given order (data 8-byte
 * aligned, header padded with spaces as the reference writer does). metadata may
 * be NULL or a list of n_meta key/value string pairs for "__metadata__". */
int allm_st_write_file(const char *path, const struct allm_st_out *tensors, size_t n,
		       const char *const *metadata, size_t n_meta, struct allm_err *err);

#endif
