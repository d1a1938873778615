/* One owner per state directory (docs/operations.md, "One owner per state
   directory"): stage, unstage, serve and check each hold an exclusive lock
   on STATE/owner.lock for as long as they run, and a second one refuses at
   once, naming the holder's verb and pid.  status only asks whether it is
   held, and by whom, without taking it.

   The lock is an open file description lock (F_OFD_SETLK): it belongs to
   the fd, not the process, so a thread or a spawned child never drops it,
   and the kernel drops it when the holder dies, kill -9 included.  The
   file's content names the holder for the others; it is trusted only while
   the lock is held.  */
#ifndef SP_OS_STATE_LOCK_H
#define SP_OS_STATE_LOCK_H

#include <stdbool.h>
#include <sys/types.h>

#include "base/error.h"

#define SP_STATE_LOCK_FILE "owner.lock"

/* Who holds the lock, as its content says.  */
struct sp_state_owner
{
  bool known;    /* the content named a verb and a pid */
  char verb[16]; /* "serve", "stage", ... */
  pid_t pid;
};

/* Takes the lock on state_dirfd for verb, or refuses at once (never
   waits): "`STATE` is in use by `serve` (pid 1234)".  On success *lock_fd
   holds it until sp_state_lock_release, or until the process ends.  */
int sp_state_lock_take (int state_dirfd, const char *shown, const char *verb, int *lock_fd, sp_error_t *err);

/* Drops the lock and removes the file: a state directory nobody holds has
   none.  */
void sp_state_lock_release (int state_dirfd, int *lock_fd);

/* Whether the lock is held now: 1 (*owner filled, known when the content
   named the holder), 0 when free, -1 on error.  Takes nothing, creates
   nothing and writes nothing.  */
int sp_state_lock_holder (int state_dirfd, struct sp_state_owner *owner, sp_error_t *err);

/* "`serve` (pid 1234)", or "another process" when the content is unknown,
   into buf.  */
void sp_state_owner_describe (const struct sp_state_owner *owner, char *buf, size_t size);

/* The pid of a process holding a flock(2) lock on fd's file, from
   /proc/locks (the kernel's own table: a flock lock, unlike this file's,
   names no owner in any file), or 0 when none is listed or it cannot be
   read.  For naming the holder of a lock this process was refused.  */
pid_t sp_flock_holder_pid (int fd);

#endif
