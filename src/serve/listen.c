/* The proxy's one listening socket.  Its directory is root's and writable by
   root only, so nobody else can swap the socket; the socket itself is 0660
   root:GROUP, so the operator decides which agents may connect.  */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <sealed-probe/cleanup.h>
#include <sealed-probe/fileio.h>

#include "serve.h"

#define SP_SOCKET_MODE     0660
#define SP_SOCKET_DIR_MODE 0755
#define SP_LISTEN_BACKLOG  128

/* Opens the socket's directory, making it (root's, 0755) when absent.  A
   directory that anyone but root could write is refused.  */
static int
open_socket_dir (const char *dir, sp_error_t *err)
{
  cleanup_close int fd = -1;
  struct stat st;

  if (mkdir (dir, SP_SOCKET_DIR_MODE) < 0 && errno != EEXIST)
    return sp_make_error (err, errno, "--socket: make its directory `%s`", dir);
  fd = open (dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return sp_make_error (err, errno, "--socket: open its directory `%s`", dir);
  if (fstat (fd, &st) < 0)
    return sp_make_error (err, errno, "--socket: stat its directory `%s`", dir);
  if (st.st_uid != 0 || (st.st_mode & 022))
    return sp_make_error (err, 0, "--socket: its directory `%s` must be root's and writable by root only",
                          dir);
  return get_and_reset_fd (&fd);
}

int
sp_serve_listen (const char *path, gid_t group, int *out, sp_error_t *err)
{
  cleanup_free char *dir = NULL;
  cleanup_close int dirfd = -1;
  cleanup_close int fd = -1;
  struct sockaddr_un addr = { .sun_family = AF_UNIX };
  const char *name;
  struct stat st;
  mode_t old_umask;
  int ret;

  if (path[0] != '/' || strlen (path) >= sizeof (addr.sun_path))
    return sp_make_error (err, 0, "--socket: `%s` must be an absolute path of at most %zu bytes", path,
                          sizeof (addr.sun_path) - 1);
  if (sp_path_split (path, &dir, &name, err) < 0)
    return sp_error_wrap (err, "--socket");
  dirfd = open_socket_dir (dir, err);
  if (dirfd < 0)
    return -1;

  /* Only one serve runs per state directory (it holds the ledger's lock), but
     two could share a socket path: replace only a stale socket, never
     another kind of file.  */
  if (fstatat (dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0)
    {
      if (!S_ISSOCK (st.st_mode))
        return sp_make_error (err, 0, "--socket: `%s` exists and is not a socket", path);
      if (unlinkat (dirfd, name, 0) < 0)
        return sp_make_error (err, errno, "--socket: remove the stale `%s`", path);
    }

  fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0)
    return sp_make_error (err, errno, "--socket: socket");
  memcpy (addr.sun_path, path, strlen (path));
  /* Born 0600, so that nobody can connect before owner and mode are set.  */
  old_umask = umask (0177);
  ret = bind (fd, (struct sockaddr *)&addr, sizeof (addr));
  umask (old_umask);
  if (ret < 0)
    return sp_make_error (err, errno, "--socket: bind `%s`", path);
  if (fchownat (dirfd, name, 0, group, AT_SYMLINK_NOFOLLOW) < 0
      || fchmodat (dirfd, name, SP_SOCKET_MODE, 0) < 0)
    {
      ret = errno;
      unlinkat (dirfd, name, 0);
      return sp_make_error (err, ret, "--socket: set owner and mode of `%s`", path);
    }
  if (listen (fd, SP_LISTEN_BACKLOG) < 0)
    {
      ret = errno;
      unlinkat (dirfd, name, 0);
      return sp_make_error (err, ret, "--socket: listen on `%s`", path);
    }
  *out = get_and_reset_fd (&fd);
  return 0;
}
