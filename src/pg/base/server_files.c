/*
 * server_files.c
 *		Reading server-side files, as pg_read_binary_file() does: only for
 *		superusers and members of pg_read_server_files, sizes checked before
 *		allocating.
 */
#include "postgres.h"

#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include "catalog/pg_authid.h"
#include "miscadmin.h"
#include "storage/fd.h"
#include "utils/acl.h"

#include "server_files.h"

void
CheckServerFileAccess(const char *alternative)
{
	if (!superuser() && !has_privs_of_role(GetUserId(), ROLE_PG_READ_SERVER_FILES))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied to read server files"),
				 errdetail("Only superusers and roles with the privileges of pg_read_server_files may read files on the server."),
				 errhint("Use %s to send the file contents from the client.", alternative)));
}

/*
 * Whether the file open on fd lies inside directory dir (real paths
 * compared: symlinks resolved, "..", and so on).  Hugging Face's cache is
 * let through: a snapshot's files are links to ../../blobs/ of the same
 * model (huggingface_hub's file_download.py lays it out so).
 */
static bool
file_within(int fd, const char *path, const char *dir, char *real, size_t realsize)
{
	char		link[64];
	char		real_dir[PATH_MAX];
	char		blobs[PATH_MAX];
	ssize_t		n;

	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	n = readlink(link, real, realsize - 1);
	if (n > 0 && real[0] == '/')
		real[n] = '\0';
	else if (realpath(path, real) == NULL)	/* no /proc: the path as it is now */
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not resolve the real path of \"%s\": %m", path)));
	if (realpath(dir, real_dir) == NULL)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not resolve the real path of directory \"%s\": %m", dir)));
	if (path_is_prefix_of_path(real_dir, real) && strcmp(real_dir, real) != 0)
		return true;
	/* dir is .../models--org--name/snapshots/<revision> */
	strlcpy(blobs, real_dir, sizeof(blobs));
	get_parent_directory(blobs);
	if (strrchr(blobs, '/') == NULL || strcmp(strrchr(blobs, '/') + 1, "snapshots") != 0)
		return false;
	snprintf(blobs, sizeof(blobs), "%s/../../blobs", real_dir);
	if (realpath(blobs, real_dir) != NULL &&
		path_is_prefix_of_path(real_dir, real) && strcmp(real_dir, real) != 0)
		return true;
	return false;
}

/*
 * Open path read-only as a regular file: opened without blocking (a FIFO
 * would wait for a writer), then fstat'ed, so that a FIFO, a device, a
 * socket or a directory is refused at once; with within, only if its real
 * path lies inside that directory.  The fd is a transient file (closed at
 * abort).
 */
static int
open_regular_file(const char *path, const char *within, struct stat *st)
{
	int			fd = OpenTransientFile(path, O_RDONLY | O_NONBLOCK | PG_BINARY);
	char		real[PATH_MAX];

	if (fd < 0)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not open file \"%s\" for reading: %m", path)));
	if (fstat(fd, st) != 0)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not stat file \"%s\": %m", path)));
	if (!S_ISREG(st->st_mode))
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("\"%s\" is not a regular file", path),
				 errdetail("It is %s.",
						   S_ISDIR(st->st_mode) ? "a directory" :
						   S_ISFIFO(st->st_mode) ? "a FIFO" :
						   S_ISSOCK(st->st_mode) ? "a socket" :
						   S_ISCHR(st->st_mode) || S_ISBLK(st->st_mode) ? "a device" : "not a file")));
	if (within != NULL && !file_within(fd, path, within, real, sizeof(real)))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("file \"%s\" lies outside directory \"%s\"", path, within),
				 errdetail("Its real path is \"%s\".", real),
				 errhint("Copy the file into the directory instead of linking to it.")));
	return fd;
}

FILE *
OpenServerFile(const char *path, const char *within, Size max_bytes, Size *size)
{
	FILE	   *f;
	struct stat st;
	struct stat again;
	int			fd = open_regular_file(path, within, &st);
	char		self[64];

	if ((uint64) st.st_size > (uint64) max_bytes)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("file \"%s\" is too large", path),
				 errdetail("It has %lld bytes; the limit is %zu.",
						   (long long) st.st_size, (size_t) max_bytes)));
	/* the very file checked, as a stream: reopened through /proc where there is one */
	snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
	f = AllocateFile(access(self, R_OK) == 0 ? self : path, PG_BINARY_R);
	if (f == NULL)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not open file \"%s\" for reading: %m", path)));
	if (fstat(fileno(f), &again) != 0 || again.st_dev != st.st_dev || again.st_ino != st.st_ino)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("file \"%s\" was replaced while it was being opened", path)));
	CloseTransientFile(fd);
	*size = (Size) st.st_size;
	return f;
}

char *
ReadServerFile(const char *path, const char *within, Size max_bytes, Size *len)
{
	Size		size;
	FILE	   *f = OpenServerFile(path, within, max_bytes, &size);
	char	   *buf;

	buf = palloc(size + 1);
	if (fread(buf, 1, size, f) != size || ferror(f))
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not read file \"%s\": %m", path)));
	FreeFile(f);
	buf[size] = '\0';
	*len = size;
	return buf;
}
