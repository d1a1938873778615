/* The precompiled standard library: see pyc.h.  The compiler is started
   with sp_spawn_with: chrooted into the tree, without capabilities.  */
#define _GNU_SOURCE
#include "rootfs/pyc.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/bounds.h"
#include "base/cleanup.h"
#include "base/clock.h"
#include "base/quote.h"
#include "os/spawn.h"
#include "tree/walk.h"

/* Every regular *.py below argv[1], in byte order of names, __pycache__
   skipped, in one process (a pyc's marshal output may depend on what the
   process compiled before: one fixed order gives one output).  A failure is
   one line on stderr naming the file, and exit status 1; success prints the
   count.  py_compile follows a symlinked .py (the _sysconfigdata alias) and
   names the pyc after the link.  */
static const char compile_script[]
    = "import os, sys, py_compile\n"
      "def fail(e): raise e\n"
      "mode = py_compile.PycInvalidationMode.UNCHECKED_HASH\n"
      "n = 0\n"
      "path = sys.argv[1]\n"
      "try:\n"
      "    for top, dirs, files in os.walk(sys.argv[1], onerror=fail):\n"
      "        dirs[:] = sorted(d for d in dirs if d != '__pycache__')\n"
      "        for f in sorted(files):\n"
      "            if f.endswith('.py'):\n"
      "                path = os.path.join(top, f)\n"
      "                py_compile.compile(path, doraise=True, invalidation_mode=mode)\n"
      "                n += 1\n"
      "except py_compile.PyCompileError as e:\n"
      "    sys.exit('%s: %s: %s' % (path, e.exc_type_name, e.exc_value))\n"
      "except OSError as e:\n"
      "    sys.exit('%s: %s' % (path, e))\n"
      "print(n)\n";

/* Keeps the last cap bytes of what the child writes: a failure's reason is
   at the end.  */
struct tail
{
  char buf[SP_ROOTFS_COMPILE_OUTPUT_MAX + 1];
  size_t used;
};

static int
read_into_tail (int fd, struct tail *t)
{
  char chunk[4096];
  ssize_t n = TEMP_FAILURE_RETRY (read (fd, chunk, sizeof (chunk)));
  size_t cap = SP_ROOTFS_COMPILE_OUTPUT_MAX;

  if (n <= 0)
    return (int)n;
  if ((size_t)n >= cap)
    {
      memcpy (t->buf, chunk + (size_t)n - cap, cap);
      t->used = cap;
    }
  else
    {
      if (t->used + (size_t)n > cap)
        {
          size_t drop = t->used + (size_t)n - cap;
          memmove (t->buf, t->buf + drop, t->used - drop);
          t->used -= drop;
        }
      memcpy (t->buf + t->used, chunk, (size_t)n);
      t->used += (size_t)n;
    }
  t->buf[t->used] = '\0';
  return 1;
}

/* The last non-empty line of the child's output, quoted (it holds paths
   from the tree).  */
static const char *
last_line (struct tail *t, char q[SP_QUOTE_BUF_SIZE])
{
  char *end = t->buf + t->used;
  char *start;

  while (end > t->buf && (end[-1] == '\n' || end[-1] == '\r'))
    *--end = '\0';
  if (end == t->buf)
    return "(no output)";
  start = memrchr (t->buf, '\n', (size_t)(end - t->buf));
  return sp_quote_name (start ? start + 1 : t->buf, q);
}

/* Reads the child's output until EOF or the deadline, then reaps it.
   Returns 1 when it exited in time (*status filled), 0 when time ran out
   (it is killed and reaped), -1 on error (likewise).  */
static int
collect (struct sp_child *child, int outfd, int64_t deadline, struct tail *t, int *status, sp_error_t *err)
{
  for (;;)
    {
      struct pollfd pfd = { .fd = outfd, .events = POLLIN };
      int64_t left = deadline - sp_monotonic_ms ();
      int ready, r;

      if (left <= 0)
        {
          sp_child_kill_and_reap (child);
          return 0;
        }
      ready = poll (&pfd, 1, left > INT_MAX ? INT_MAX : (int)left);
      if (ready < 0 && errno == EINTR)
        continue;
      if (ready < 0)
        {
          sp_make_error (err, errno, "poll the compiler's output");
          sp_child_kill_and_reap (child);
          return -1;
        }
      if (ready == 0)
        continue;
      r = read_into_tail (outfd, t);
      if (r < 0 && errno == EAGAIN)
        continue;
      if (r < 0)
        {
          sp_make_error (err, errno, "read the compiler's output");
          sp_child_kill_and_reap (child);
          return -1;
        }
      if (r == 0)
        break;
    }
  int64_t left = deadline - sp_monotonic_ms ();
  int ret = sp_child_wait (child, left <= 0 ? 0 : left > INT_MAX ? INT_MAX : (int)left, status, err);
  if (ret != 1)
    sp_child_kill_and_reap (child);
  return ret;
}

static int
run_compiler (int rootfd, struct tail *t, int *status, sp_error_t *err)
{
  char *argv[] = {
    (char *)SP_ROOTFS_PYTHON,
    /* -I would ignore PYTHONHASHSEED: its parts, with the environment
       scrubbed to exactly envp instead of ignored.  -B: nothing but the
       explicit writes of py_compile.  */
    (char *)"-s",
    (char *)"-S",
    (char *)"-B",
    (char *)"-P",
    (char *)"-c",
    (char *)compile_script,
    (char *)SP_ROOTFS_STDLIB_DIR,
    NULL,
  };
  /* A fixed hash seed: no output may depend on the process's randomness.  */
  char *envp[] = { (char *)"PYTHONHASHSEED=0", (char *)"LC_ALL=C.UTF-8", (char *)"PATH=/usr/bin", NULL };
  cleanup_close int out_rd = -1, out_wr = -1;
  struct sp_child child = { -1, -1 };
  int64_t deadline = sp_monotonic_ms () + SP_ROOTFS_COMPILE_TIMEOUT_MS;
  int pipefd[2];
  int ret;

  if (pipe2 (pipefd, O_CLOEXEC) < 0)
    return sp_make_error (err, errno, "pipe");
  out_rd = pipefd[0];
  out_wr = pipefd[1];
  /* The interpreter comes from the pinned lock, but it is a program of the
     packages running as root on the build host: it gets its chroot and no
     capability.  */
  if (sp_spawn_with (SP_ROOTFS_PYTHON, argv, envp,
                     &(struct sp_spawn_options){ .input_fd = -1,
                                                 .output_fd = out_wr,
                                                 .output_stderr_too = true,
                                                 .root_dirfd = rootfd,
                                                 .drop_capabilities = true },
                     &child, err)
      < 0)
    return sp_error_wrap (err, "run `%s` chrooted into the tree without capabilities", SP_ROOTFS_PYTHON);
  sp_closep (&out_wr);
  ret = collect (&child, out_rd, deadline, t, status, err);
  if (ret == 0)
    return sp_make_error (err, ETIMEDOUT, "`%s` did not finish within %d ms", SP_ROOTFS_PYTHON,
                          SP_ROOTFS_COMPILE_TIMEOUT_MS);
  return ret < 0 ? -1 : 0;
}

struct tree_size
{
  unsigned long long entries;
  unsigned long long bytes;
};

static int
count_entry (int dirfd, const char *name, const char *path, const struct stat *st,
             enum sp_tree_walk_event event, void *ctx, sp_error_t *err)
{
  struct tree_size *size = ctx;

  if (event != SP_TREE_WALK_ENTRY)
    return 0;
  size->entries++;
  if (S_ISREG (st->st_mode))
    size->bytes += (unsigned long long)st->st_size;
  return 0;
}

/* Extraction held the packages to the rootfs bounds; the pycs come after
   it, and the tree must still fit them (serve's private copy is a tmpfs of
   exactly that size).  */
static int
check_bounds (int rootfd, sp_error_t *err)
{
  struct tree_size size = { 0, 0 };

  if (sp_tree_walk (rootfd, count_entry, &size, err) < 0)
    return -1;
  if (size.entries > SP_ROOTFS_MAX_ENTRIES || size.bytes > (unsigned long long)SP_ROOTFS_MAX_BYTES)
    return sp_make_error (err, EFBIG,
                          "with its pycs the tree holds %llu entries and %llu bytes, over the bounds "
                          "(%d entries, %lld bytes)",
                          size.entries, size.bytes, SP_ROOTFS_MAX_ENTRIES, (long long)SP_ROOTFS_MAX_BYTES);
  return 0;
}

int
sp_rootfs_compile_stdlib (int rootfd, unsigned *compiled, sp_error_t *err)
{
  struct tail t = { .used = 0 };
  char q[SP_QUOTE_BUF_SIZE];
  unsigned long count;
  char *end;
  int status = 0;

  *compiled = 0;
  t.buf[0] = '\0';
  if (run_compiler (rootfd, &t, &status, err) < 0)
    return sp_error_wrap (err, "compile the standard library");
  if (!WIFEXITED (status) || WEXITSTATUS (status) != 0)
    {
      if (WIFSIGNALED (status))
        return sp_make_error (err, 0, "compile the standard library: `%s` was killed by signal %d: %s",
                              SP_ROOTFS_PYTHON, WTERMSIG (status), last_line (&t, q));
      return sp_make_error (err, 0, "compile the standard library: `%s` exited with status %d: %s",
                            SP_ROOTFS_PYTHON, WEXITSTATUS (status), last_line (&t, q));
    }
  /* Success prints exactly the count: anything else is not this script.  */
  errno = 0;
  count = strtoul (t.buf, &end, 10);
  if (end == t.buf || strcmp (end, "\n") != 0 || errno != 0 || count > SP_ROOTFS_MAX_ENTRIES)
    return sp_make_error (err, 0, "compile the standard library: unexpected output from `%s`: %s",
                          SP_ROOTFS_PYTHON, last_line (&t, q));
  if (count == 0)
    return sp_make_error (err, 0, "compile the standard library: `%s` holds no module", SP_ROOTFS_STDLIB_DIR);
  if (check_bounds (rootfd, err) < 0)
    return sp_error_wrap (err, "compile the standard library");
  *compiled = (unsigned)count;
  return 0;
}
