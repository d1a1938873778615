/* Starting a helper program (a runtime's CLI) from the trusted proxy, which
   is multi-threaded: fork, then only async-signal-safe calls until exec.
   The child gets /dev/null on stdin, stdout and stderr, every other fd
   closed (close_range; the CVE-2024-21626 class), exactly the given
   environment, its own process group, and SIGKILL when the proxy dies.  */
#ifndef SP_OS_SPAWN_H
#define SP_OS_SPAWN_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/error.h"

struct sp_child
{
  pid_t pid;
  int pidfd; /* O_CLOEXEC; -1 once reaped */
};

/* Starts path (absolute) with argv and envp.  An execve failure (a missing
   binary, say) is reported here, as an error naming path, not as an exit
   status.  PR_SET_PDEATHSIG fires when the *thread* that called sp_spawn
   exits: spawn from a thread that outlives the child.  */
int sp_spawn (const char *path, char *const argv[], char *const envp[], struct sp_child *child,
              sp_error_t *err);

/* What sp_spawn_with changes in the child from sp_spawn's.  */
struct sp_spawn_options
{
  /* The child's stdin; -1: /dev/null, as sp_spawn.  */
  int input_fd;
  /* The child's stdout, and its stderr too when output_stderr_too; -1:
     /dev/null, as sp_spawn.  */
  int output_fd;
  bool output_stderr_too;
  /* A directory the child chroots into before execve, so that path names a
     file of that tree; -1: none.  */
  int root_dirfd;
  /* No capability survives the execve: an empty bounding set, the
     permitted, effective, inheritable and ambient sets cleared, and
     no_new_privs.  */
  bool drop_capabilities;
};

/* sp_spawn with those changes.  */
int sp_spawn_with (const char *path, char *const argv[], char *const envp[],
                   const struct sp_spawn_options *options, struct sp_child *child, sp_error_t *err);

/* Takes hold of pid, a process that became this process's child otherwise
   than by sp_spawn (an orphan reparented to it as the subreaper), so that
   sp_child_wait and sp_child_kill_and_reap work on it.  Refuses a pid that
   is not a child of this process.  */
int sp_child_adopt (pid_t pid, struct sp_child *child, sp_error_t *err);

/* Waits for the child up to timeout_ms (-1: no limit).  Returns 1 and fills
   *status (as waitpid's) when it exited, 0 when the time ran out (the child
   still runs), -1 on error.  */
int sp_child_wait (struct sp_child *child, int timeout_ms, int *status, sp_error_t *err);

/* SIGKILL to the child's whole process group, then reaps it: 1 when this
   call reaped it, 0 when waitpid failed (it is forgotten all the same).  A
   no-op returning 0 on a child already reaped (its pid may be reused).  */
int sp_child_kill_and_reap (struct sp_child *child);

/* Reaps every child of this process that exited and that neither
   sp_spawn made nor sp_child_adopt took: the strays a subreaper inherits
   (a runtime's helpers, orphaned), which would otherwise stay zombies.
   Returns how many.  */
unsigned sp_reap_strays (void);

/* Runs path to completion with a limit, capturing at most cap bytes of its
   stdout into out (NUL-terminated, *len bytes) for version probes; stderr
   goes to /dev/null.  Exceeding the limit kills it and is an error.
   out must hold cap + 1 bytes.  Writing more than cap bytes kills its whole
   process group and is an error; so is running past timeout_ms.  A program
   that cannot be exec'd is an error; a non-zero exit is not (see *status).  */
int sp_spawn_capture (const char *path, char *const argv[], char *const envp[], int timeout_ms, char *out,
                      size_t cap, size_t *len, int *status, sp_error_t *err);

#endif
