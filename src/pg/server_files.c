/*
 * server_files.c
 *		Reading server-side files, as pg_read_binary_file() does: only for
 *		superusers and members of pg_read_server_files, sizes checked before
 *		allocating.
 */
#include "postgres.h"

#include <sys/stat.h>

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

FILE *
OpenServerFile(const char *path, Size max_bytes, Size *size)
{
	FILE	   *f;
	struct stat st;

	f = AllocateFile(path, PG_BINARY_R);
	if (f == NULL)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not open file \"%s\" for reading: %m", path)));
	if (fstat(fileno(f), &st) != 0)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not stat file \"%s\": %m", path)));
	if (!S_ISREG(st.st_mode))
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("\"%s\" is not a regular file", path)));
	if ((uint64) st.st_size > (uint64) max_bytes)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("file \"%s\" is too large", path),
				 errdetail("It has %lld bytes; the limit is %zu.",
						   (long long) st.st_size, (size_t) max_bytes)));
	*size = (Size) st.st_size;
	return f;
}

char *
ReadServerFile(const char *path, Size max_bytes, Size *len)
{
	Size		size;
	FILE	   *f = OpenServerFile(path, max_bytes, &size);
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
