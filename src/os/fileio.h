/* File I/O helpers that touch the OS.  Paths are opened relative to directory
   fds; every fd is O_CLOEXEC.  */
#ifndef SP_OS_FILEIO_H
#define SP_OS_FILEIO_H

#include <stddef.h>
#include <sys/types.h>

#include "base/error.h"

/* Reads fd to end of file.  Fails, without reading further, once more than cap
   bytes arrive.  *out is NUL-terminated for convenience; *len excludes it.  */
int sp_read_fd_capped (int fd, size_t cap, char **out, size_t *len, sp_error_t *err);

/* Reads a whole file, or standard input when path is "-", through the same
   code path, so both behave identically.  */
int sp_read_path_capped (const char *path, size_t cap, char **out, size_t *len, sp_error_t *err);

/* The type of a file of this mode, as a message says it: "a regular file",
   "a directory", "a symbolic link", "a FIFO", "a socket", "a character
   device", "a block device", or "of an unknown file type".  */
const char *sp_file_type_name (mode_t mode);

/* Writes all of buf to fd, retrying short writes and EINTR.  */
int sp_write_all (int fd, const void *buf, size_t len, sp_error_t *err);

/* Replaces dirfd/name atomically: writes name.tmp, fsyncs it, renames it over
   name and fsyncs the directory, as crun's status.c does.  The file gets
   exactly mode, whatever the umask.  */
int sp_write_file_atomic_at (int dirfd, const char *name, const void *buf, size_t len, mode_t mode,
                             sp_error_t *err);

/* Splits path into its directory (allocated: "/" or "." when the path has no
   other) and its last component (*base points into path).  A path that names
   no file (empty, or ending in '/') is an error.  */
int sp_path_split (const char *path, char **dir, const char **base, sp_error_t *err);

#endif
