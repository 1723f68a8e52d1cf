/*
 * server_files.h
 *		Reading files on the database server, for the roles allowed to.
 */
#ifndef SERVER_FILES_H
#define SERVER_FILES_H

#include "postgres.h"

/*
 * Refuse unless the current user is a superuser or has the privileges of
 * pg_read_server_files; `alternative` names the function that takes the
 * bytes from the client instead.
 */
extern void CheckServerFileAccess(const char *alternative);

/*
 * Open a regular file of at most max_bytes for reading (AllocateFile, so
 * it is closed at abort); its size goes to *size.  It is opened without
 * blocking and checked before it is read: a FIFO, a device, a socket or a
 * directory is refused, and, unless within is NULL, a file whose real path
 * (symlinks resolved) lies outside directory within.
 */
extern FILE *OpenServerFile(const char *path, const char *within, Size max_bytes, Size *size);

/* The whole file as a palloc'd buffer (NUL-terminated), at most max_bytes. */
extern char *ReadServerFile(const char *path, const char *within, Size max_bytes, Size *len);

#endif							/* SERVER_FILES_H */
