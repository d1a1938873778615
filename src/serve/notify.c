/* Readiness signals: a ready file and systemd's sd_notify datagram, written
   here rather than linked from libsystemd (one datagram, no dependency).  */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "os/log.h"
#include "base/cleanup.h"
#include "os/fileio.h"

#include "serve/serve.h"

int
sp_notify_open (struct sp_notify *n, sp_error_t *err)
{
  const char *path = getenv ("NOTIFY_SOCKET");
  struct sockaddr_un addr = { .sun_family = AF_UNIX };
  size_t len;
  int fd;

  n->fd = -1;
  if (path == NULL || *path == '\0')
    return 0;
  len = strlen (path);
  if ((path[0] != '/' && path[0] != '@') || len >= sizeof (addr.sun_path))
    return sp_make_error (
        err, 0, "NOTIFY_SOCKET: must be an absolute path or @abstract name that fits a socket address");
  memcpy (addr.sun_path, path, len);
  if (path[0] == '@')
    addr.sun_path[0] = '\0';
  fd = socket (AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return sp_make_error (err, errno, "NOTIFY_SOCKET: socket");
  if (connect (fd, (struct sockaddr *)&addr, offsetof (struct sockaddr_un, sun_path) + len) < 0)
    {
      int saved = errno;
      close (fd);
      return sp_make_error (err, saved, "NOTIFY_SOCKET: connect");
    }
  n->fd = fd;
  return 0;
}

void
sp_notify_send (struct sp_notify *n, const char *state)
{
  char msg[SP_NOTIFY_STATE_MAX + 32];
  int len;

  if (n->fd < 0)
    return;
  len = snprintf (msg, sizeof (msg), "%s\nMAINPID=%ld\n", state, (long)getpid ());
  /* Best effort, as sd_notify is: readiness is also in the ready file.  */
  if (len > 0)
    (void)send (n->fd, msg, (size_t)len, MSG_NOSIGNAL | MSG_DONTWAIT);
}

void
sp_notify_close (struct sp_notify *n)
{
  sp_closep (&n->fd);
}

/* Whether pid is another live process running this same program: a
   ready file naming one belongs to another serve.  */
static bool
another_live_proxy (pid_t pid)
{
  char exe[64];
  struct stat mine, theirs;

  if (pid <= 0 || pid == getpid () || (kill (pid, 0) < 0 && errno == ESRCH))
    return false;
  snprintf (exe, sizeof (exe), "/proc/%ld/exe", (long)pid);
  return stat ("/proc/self/exe", &mine) == 0 && stat (exe, &theirs) == 0 && mine.st_dev == theirs.st_dev
         && mine.st_ino == theirs.st_ino;
}

int
sp_ready_file_claim (const char *path, sp_error_t *err)
{
  cleanup_free char *dir = NULL;
  cleanup_close int dirfd = -1;
  cleanup_close int fd = -1;
  const char *base;
  char text[32];
  ssize_t n;
  long pid = 0;

  if (sp_path_split (path, &dir, &base, err) < 0)
    return sp_error_wrap (err, "--ready-file");
  dirfd = open (dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dirfd < 0)
    return sp_make_error (err, errno, "--ready-file: `%s`: its directory", path);
  fd = openat (dirfd, base, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0 && errno == ENOENT)
    return 0;
  if (fd >= 0 && (n = read (fd, text, sizeof (text) - 1)) > 0)
    {
      text[n] = '\0';
      pid = strtol (text, NULL, 10);
      if (pid > 0 && another_live_proxy ((pid_t)pid))
        return sp_make_error (err, 0, "--ready-file: `%s` belongs to a running serve (pid %ld)", path, pid);
    }
  /* Stale: its serve is gone (or it is not a ready file at all).  */
  if (unlinkat (dirfd, base, 0) < 0)
    return errno == ENOENT ? 0 : sp_make_error (err, errno, "--ready-file: remove the stale `%s`", path);
  /* Said, as every other leftover a start removes (docs/operations.md, "A
     start after kill -9").  */
  if (pid > 0)
    sp_log (SP_LOG_NOTICE,
            "sealed-probe-proxy: serve: removed the stale ready file `%s`, which named pid %ld, no serve now",
            path, pid);
  else
    sp_log (SP_LOG_NOTICE, "sealed-probe-proxy: serve: removed the stale ready file `%s`, which named no pid",
            path);
  return 0;
}

int
sp_ready_file_write (const char *path, struct sp_serve_owned *owned, sp_error_t *err)
{
  cleanup_free char *dir = NULL;
  cleanup_close int dirfd = -1;
  const char *base;
  struct stat st;
  char text[32];
  int len;

  if (sp_path_split (path, &dir, &base, err) < 0)
    return sp_error_wrap (err, "--ready-file");
  dirfd = open (dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dirfd < 0)
    return sp_make_error (err, errno, "--ready-file: `%s`: its directory", path);
  len = snprintf (text, sizeof (text), "%ld\n", (long)getpid ());
  if (sp_write_file_atomic_at (dirfd, base, text, (size_t)len, 0644, err) < 0)
    return sp_error_wrap (err, "--ready-file: `%s`", path);
  if (fstatat (dirfd, base, &st, AT_SYMLINK_NOFOLLOW) < 0)
    return sp_make_error (err, errno, "--ready-file: `%s`", path);
  *owned = (struct sp_serve_owned){ .made = true, .dev = st.st_dev, .ino = st.st_ino };
  return 0;
}

void
sp_ready_file_remove (const char *path, const struct sp_serve_owned *owned)
{
  cleanup_free char *dir = NULL;
  cleanup_close int dirfd = -1;
  cleanup_error sp_error_t err = NULL;
  const char *base;

  if (!owned->made || sp_path_split (path, &dir, &base, &err) < 0)
    return;
  dirfd = open (dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dirfd >= 0 && sp_serve_path_owned (dirfd, base, owned))
    unlinkat (dirfd, base, 0);
}
