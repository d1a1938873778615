/* See src/os/state_lock.h.  */
#define _GNU_SOURCE
#include "os/state_lock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "base/cleanup.h"

/* A holder writes its name just after it takes the lock: a reader that
   finds the lock held but the content not yet there tries again, this many
   times, this far apart, before it says "another process".  */
#define OWNER_READ_TRIES    50
#define OWNER_READ_PAUSE_NS (2 * 1000 * 1000)
#define OWNER_TEXT_MAX      64
/* A taker whose file a releasing holder unlinked tries again, at most this
   many times (each try is one open and one lock, never a wait).  */
#define LOCK_TAKE_TRIES 16

static struct flock
whole_file (short type)
{
  return (struct flock){ .l_type = type, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0 };
}

/* "VERB PID\n", with VERB of lowercase letters.  */
static bool
owner_parse (const char *text, struct sp_state_owner *owner)
{
  const char *space = strchr (text, ' ');
  size_t verb_len = space ? (size_t)(space - text) : 0;
  char *end;
  long pid;

  if (verb_len == 0 || verb_len >= sizeof (owner->verb))
    return false;
  for (size_t i = 0; i < verb_len; i++)
    if (text[i] < 'a' || text[i] > 'z')
      return false;
  errno = 0;
  pid = strtol (space + 1, &end, 10);
  if (errno != 0 || end == space + 1 || pid <= 0 || strcmp (end, "\n") != 0)
    return false;
  memcpy (owner->verb, text, verb_len);
  owner->verb[verb_len] = '\0';
  owner->pid = (pid_t)pid;
  owner->known = true;
  return true;
}

static void
owner_read (int fd, struct sp_state_owner *owner)
{
  const struct timespec pause = { .tv_sec = 0, .tv_nsec = OWNER_READ_PAUSE_NS };

  *owner = (struct sp_state_owner){ 0 };
  for (int i = 0; i < OWNER_READ_TRIES; i++)
    {
      char text[OWNER_TEXT_MAX];
      ssize_t n = pread (fd, text, sizeof (text) - 1, 0);

      if (n > 0)
        {
          text[n] = '\0';
          if (owner_parse (text, owner))
            return;
        }
      nanosleep (&pause, NULL);
    }
}

void
sp_state_owner_describe (const struct sp_state_owner *owner, char *buf, size_t size)
{
  if (owner->known)
    snprintf (buf, size, "`%s` (pid %ld)", owner->verb, (long)owner->pid);
  else
    snprintf (buf, size, "another process");
}

static int
open_lock_file (int state_dirfd, int flags, sp_error_t *err)
{
  cleanup_close int fd = -1;
  struct stat st;

  fd = openat (state_dirfd, SP_STATE_LOCK_FILE, flags | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY, 0600);
  if (fd < 0)
    {
      if (errno == ENOENT && !(flags & O_CREAT))
        return -2;
      return sp_make_error (err, errno, "open `%s`", SP_STATE_LOCK_FILE);
    }
  if (fstat (fd, &st) < 0)
    return sp_make_error (err, errno, "stat `%s`", SP_STATE_LOCK_FILE);
  if (!S_ISREG (st.st_mode) || st.st_uid != geteuid ())
    return sp_make_error (err, 0, "`%s` must be a regular file of the state directory's owner",
                          SP_STATE_LOCK_FILE);
  return get_and_reset_fd (&fd);
}

/* Whether fd is still the file the lock's name names: a holder that
   releases unlinks it, so a taker that locked the old file first must try
   again on the new one.  */
static bool
still_named (int state_dirfd, int fd)
{
  struct stat held, named;

  return fstat (fd, &held) == 0 && held.st_nlink > 0
         && fstatat (state_dirfd, SP_STATE_LOCK_FILE, &named, AT_SYMLINK_NOFOLLOW) == 0
         && held.st_dev == named.st_dev && held.st_ino == named.st_ino;
}

int
sp_state_lock_take (int state_dirfd, const char *shown, const char *verb, int *lock_fd, sp_error_t *err)
{
  struct flock lock = whole_file (F_WRLCK);
  char text[OWNER_TEXT_MAX];
  int len;

  *lock_fd = -1;
  for (int attempt = 0; attempt < LOCK_TAKE_TRIES; attempt++)
    {
      cleanup_close int fd = open_lock_file (state_dirfd, O_RDWR | O_CREAT, err);

      if (fd < 0)
        return sp_error_wrap (err, "`%s`", shown);
      if (fcntl (fd, F_OFD_SETLK, &lock) < 0)
        {
          struct sp_state_owner owner;
          char who[64];

          if (errno != EAGAIN && errno != EACCES)
            return sp_make_error (err, errno, "`%s`: lock `%s`", shown, SP_STATE_LOCK_FILE);
          owner_read (fd, &owner);
          sp_state_owner_describe (&owner, who, sizeof (who));
          sp_make_error (err, 0,
                         "`%s` is in use by %s: one stage, unstage, serve or check at a time on a "
                         "state directory (`status` reads beside them)",
                         shown, who);
          if (owner.known)
            return sp_error_hint (err,
                                  "wait for it to end, or stop it (kill %ld, or systemctl stop the unit "
                                  "that runs it) and try again",
                                  (long)owner.pid);
          return sp_error_hint (err, "wait for it to end, or stop it, and try again");
        }
      if (!still_named (state_dirfd, fd))
        continue;
      len = snprintf (text, sizeof (text), "%s %ld\n", verb, (long)getpid ());
      if (len < 0 || (size_t)len >= sizeof (text) || ftruncate (fd, 0) < 0
          || pwrite (fd, text, (size_t)len, 0) != (ssize_t)len)
        return sp_make_error (err, errno, "`%s`: write `%s`", shown, SP_STATE_LOCK_FILE);
      *lock_fd = get_and_reset_fd (&fd);
      return 0;
    }
  return sp_make_error (err, 0, "`%s`: `%s` was replaced %d times while it was being locked", shown,
                        SP_STATE_LOCK_FILE, LOCK_TAKE_TRIES);
}

void
sp_state_lock_release (int state_dirfd, int *lock_fd)
{
  if (*lock_fd < 0)
    return;
  /* Gone while still held, so that a state directory nobody holds is as
     it was before; a taker that opened it meanwhile finds it unnamed and
     tries again (still_named).  */
  if (still_named (state_dirfd, *lock_fd))
    (void)unlinkat (state_dirfd, SP_STATE_LOCK_FILE, 0);
  sp_closep (lock_fd);
}

int
sp_state_lock_holder (int state_dirfd, struct sp_state_owner *owner, sp_error_t *err)
{
  cleanup_close int fd = -1;
  struct flock probe = whole_file (F_WRLCK);

  *owner = (struct sp_state_owner){ 0 };
  fd = open_lock_file (state_dirfd, O_RDONLY, err);
  if (fd == -2)
    return 0; /* never taken: nobody holds it */
  if (fd < 0)
    return -1;
  /* F_OFD_GETLK asks without taking: a stage or serve starting now is
     never refused because status looked.  */
  if (fcntl (fd, F_OFD_GETLK, &probe) < 0)
    return sp_make_error (err, errno, "ask about the lock on `%s`", SP_STATE_LOCK_FILE);
  if (probe.l_type == F_UNLCK)
    return 0;
  owner_read (fd, owner);
  return 1;
}

pid_t
sp_flock_holder_pid (int fd)
{
  cleanup_file FILE *locks = NULL;
  char line[256];
  struct stat st;

  if (fstat (fd, &st) < 0)
    return 0;
  locks = fopen ("/proc/locks", "re");
  if (locks == NULL)
    return 0;
  /* "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF"; a waiter's line has
     "->" before FLOCK and is not the holder.  */
  while (fgets (line, sizeof (line), locks) != NULL)
    {
      char kind[16];
      unsigned dev_major, dev_minor;
      unsigned long long ino;
      long pid;

      if (sscanf (line, "%*d: %15s %*s %*s %ld %x:%x:%llu", kind, &pid, &dev_major, &dev_minor, &ino) == 5
          && strcmp (kind, "FLOCK") == 0 && pid > 0 && ino == (unsigned long long)st.st_ino
          && dev_major == major (st.st_dev) && dev_minor == minor (st.st_dev))
        return (pid_t)pid;
    }
  return 0;
}
