/* The proxy's one listening socket.  Its directory is root's and writable by
   root only, so nobody else can swap the socket; the socket itself is 0660
   root:GROUP, so the operator decides which agents may connect.  A socket
   that someone listens on belongs to another instance and is never
   replaced; on stop, only the socket this instance made (same device and
   inode) is removed.  */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "os/log.h"
#include "base/cleanup.h"
#include "os/fileio.h"

#include "serve/serve.h"

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
  bool made = mkdir (dir, SP_SOCKET_DIR_MODE) == 0;

  if (!made && errno != EEXIST)
    return sp_make_error (err, errno, "--socket: make its directory `%s`", dir);
  fd = open (dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return sp_make_error (err, errno, "--socket: open its directory `%s`", dir);
  if (fstat (fd, &st) < 0)
    return sp_make_error (err, errno, "--socket: stat its directory `%s`", dir);
  if (st.st_uid != 0 || (st.st_mode & 022))
    return sp_make_error (err, 0, "--socket: its directory `%s` must be root's and writable by root only",
                          dir);
  /* mkdir's mode passed through the umask; one serve made is 0755 exactly,
     so that the agent's account can reach the socket.  An existing
     directory's mode is the operator's.  */
  if (made && fchmod (fd, SP_SOCKET_DIR_MODE) < 0)
    return sp_make_error (err, errno, "--socket: make its directory `%s` mode 0755", dir);
  return get_and_reset_fd (&fd);
}

/* Whether someone listens on the socket at path: a connect answers.  A
   refused connect is a stale socket (its listener died); a full backlog
   (EAGAIN) is a live one.  */
static int
socket_is_live (const char *path, bool *live, sp_error_t *err)
{
  struct sockaddr_un addr = { .sun_family = AF_UNIX };
  cleanup_close int fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

  if (fd < 0)
    return sp_make_error (err, errno, "--socket: socket");
  memcpy (addr.sun_path, path, strlen (path));
  if (connect (fd, (struct sockaddr *)&addr, sizeof (addr)) == 0 || errno == EAGAIN || errno == EINPROGRESS)
    *live = true;
  else if (errno == ECONNREFUSED || errno == ENOENT)
    *live = false;
  else
    return sp_make_error (err, errno, "--socket: connect to the existing `%s` to see whether it is in use",
                          path);
  return 0;
}

/* What may already be at the socket's path: nothing, or a stale socket
   (removed when remove_stale).  Another kind of file, or a socket that
   another process listens on, is refused, named.  */
static int
check_path (int dirfd, const char *path, const char *name, bool remove_stale, sp_error_t *err)
{
  struct stat st;
  bool live = false;

  if (fstatat (dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
    return errno == ENOENT ? 0 : sp_make_error (err, errno, "--socket: stat `%s`", path);
  if (!S_ISSOCK (st.st_mode))
    return sp_make_error (err, 0, "--socket: `%s` exists and is not a socket", path);
  if (socket_is_live (path, &live, err) < 0)
    return -1;
  if (live)
    return sp_make_error (err, 0,
                          "--socket: `%s` is in use: another process listens on it (another serve?); "
                          "stop it or choose another --socket",
                          path);
  if (!remove_stale)
    return 0;
  if (unlinkat (dirfd, name, 0) < 0)
    return sp_make_error (err, errno, "--socket: remove the stale `%s`", path);
  /* Left by a serve that never stopped (kill -9): said, as every other
     leftover a start removes (docs/operations.md, "A start after kill -9").  */
  sp_log (SP_LOG_NOTICE, "sealed-probe-proxy: serve: removed the stale socket `%s` (nobody listened on it)",
          path);
  return 0;
}

/* The socket's directory, locked: every serve takes this lock around its
   check, replace and bind, and around its removal on stop, so that two
   instances never both take one stale path, nor remove each other's.  */
static int
open_locked_dir (const char *path, const char **name, char **dir, sp_error_t *err)
{
  cleanup_close int dirfd = -1;

  if (sp_path_split (path, dir, name, err) < 0)
    return sp_error_wrap (err, "--socket");
  dirfd = open_socket_dir (*dir, err);
  if (dirfd < 0)
    return -1;
  if (TEMP_FAILURE_RETRY (flock (dirfd, LOCK_EX)) < 0)
    return sp_make_error (err, errno, "--socket: lock its directory `%s`", *dir);
  return get_and_reset_fd (&dirfd);
}

static int
check_socket_path (const char *path, sp_error_t *err)
{
  struct sockaddr_un addr;

  if (path[0] != '/' || strlen (path) >= sizeof (addr.sun_path))
    return sp_make_error (err, 0, "--socket: `%s` must be an absolute path of at most %zu bytes", path,
                          sizeof (addr.sun_path) - 1);
  return 0;
}

int
sp_serve_socket_available (const char *path, sp_error_t *err)
{
  cleanup_free char *dir = NULL;
  cleanup_close int dirfd = -1;
  const char *name;

  if (check_socket_path (path, err) < 0)
    return -1;
  dirfd = open_locked_dir (path, &name, &dir, err);
  if (dirfd < 0)
    return -1;
  return check_path (dirfd, path, name, false, err);
}

int
sp_serve_listen (const char *path, gid_t group, int *out, struct sp_serve_owned *owned, sp_error_t *err)
{
  cleanup_free char *dir = NULL;
  cleanup_close int dirfd = -1;
  cleanup_close int fd = -1;
  struct sockaddr_un addr = { .sun_family = AF_UNIX };
  const char *name;
  struct stat st;
  mode_t old_umask;
  int ret;

  if (check_socket_path (path, err) < 0)
    return -1;
  dirfd = open_locked_dir (path, &name, &dir, err);
  if (dirfd < 0)
    return -1;
  if (check_path (dirfd, path, name, true, err) < 0)
    return -1;

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
  if (fstatat (dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0
      || fchownat (dirfd, name, 0, group, AT_SYMLINK_NOFOLLOW) < 0
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
  *owned = (struct sp_serve_owned){ .made = true, .dev = st.st_dev, .ino = st.st_ino };
  *out = get_and_reset_fd (&fd);
  return 0;
}

int
sp_serve_path_owned (int dirfd, const char *name, const struct sp_serve_owned *owned)
{
  struct stat st;

  return owned->made && fstatat (dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && st.st_dev == owned->dev
         && st.st_ino == owned->ino;
}

void
sp_serve_unlisten (const char *path, const struct sp_serve_owned *owned)
{
  cleanup_free char *dir = NULL;
  cleanup_close int dirfd = -1;
  cleanup_error sp_error_t err = NULL;
  const char *name;

  if (!owned->made)
    return;
  dirfd = open_locked_dir (path, &name, &dir, &err);
  /* Another instance's socket at the path now stays where it is.  */
  if (dirfd >= 0 && sp_serve_path_owned (dirfd, name, owned))
    unlinkat (dirfd, name, 0);
}
