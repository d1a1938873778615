/* The precompiled standard library: see pyc.h.  The builder is a
   single-threaded program, so the child may do more than async-signal-safe
   work; it still keeps to plain syscalls between fork and execve.  */
#define _GNU_SOURCE
#include "pyc.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/capability.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sealed-probe/bounds.h>
#include <sealed-probe/cleanup.h>
#include <sealed-probe/clock.h>
#include <sealed-probe/quote.h>
#include <sealed-probe/spawn.h>
#include <sealed-probe/tree_walk.h>

#ifndef SYS_close_range
#define SYS_close_range 436
#endif
#ifndef PR_CAP_AMBIENT
#define PR_CAP_AMBIENT           47
#define PR_CAP_AMBIENT_CLEAR_ALL 4
#endif

/* Where the child parks its fds while it rearranges 0..3 (as spawn.c).  */
#define CHILD_PARK_FD 10
#define CHILD_ERR_FD  3
/* The capability numbers to drop from the bounding set: far above
   CAP_LAST_CAP; the kernel's EINVAL ends the loop earlier.  */
#define CAP_SCAN_MAX 64

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

static void __attribute__ ((noreturn)) child_fail (int errfd, int error)
{
  /* A failed write leaves the parent reading EOF: it then sees exit 127.  */
  if (write (errfd, &error, sizeof (error)) < 0)
    _exit (127);
  _exit (127);
}

/* No capability survives the execve: an empty bounding set means a uid-0
   exec gains none, and the empty permitted set drops what the child has.
   The interpreter comes from the pinned lock, but it is a program of the
   packages running as root on the build host: it gets its chroot and no
   more.  */
static int
drop_all_capabilities (void)
{
  struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
  struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];

  for (int cap = 0; cap < CAP_SCAN_MAX; cap++)
    if (prctl (PR_CAPBSET_DROP, cap, 0, 0, 0) < 0)
      {
        if (errno == EINVAL)
          break;
        return -1;
      }
  prctl (PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); /* EINVAL before Linux 4.3: none to clear */
  memset (data, 0, sizeof (data));
  if (syscall (SYS_capset, &hdr, data) < 0)
    return -1;
  return prctl (PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
}

static void __attribute__ ((noreturn)) child_exec (int rootfd, int devnull, int outfd, int errfd,
                                                   pid_t parent, char *const argv[], char *const envp[])
{
  sigset_t none;
  int null_hi, out_hi, err_hi;

  err_hi = fcntl (errfd, F_DUPFD_CLOEXEC, CHILD_PARK_FD);
  if (err_hi < 0)
    _exit (127);
  errfd = err_hi;
  if (setpgid (0, 0) < 0 || prctl (PR_SET_PDEATHSIG, SIGKILL) < 0)
    child_fail (errfd, errno);
  if (getppid () != parent)
    _exit (127);

  /* Into the tree first: rootfd is closed with the rest below.  */
  if (fchdir (rootfd) < 0 || chroot (".") < 0 || chdir ("/") < 0)
    child_fail (errfd, errno);

  null_hi = fcntl (devnull, F_DUPFD_CLOEXEC, CHILD_PARK_FD);
  out_hi = fcntl (outfd, F_DUPFD_CLOEXEC, CHILD_PARK_FD);
  if (null_hi < 0 || out_hi < 0)
    child_fail (errfd, errno);
  if (dup2 (null_hi, STDIN_FILENO) < 0 || dup2 (out_hi, STDOUT_FILENO) < 0 || dup2 (out_hi, STDERR_FILENO) < 0
      || dup3 (errfd, CHILD_ERR_FD, O_CLOEXEC) < 0)
    child_fail (errfd, errno);
  errfd = CHILD_ERR_FD;
  if (syscall (SYS_close_range, (unsigned)CHILD_ERR_FD + 1, ~0U, 0) < 0)
    for (int fd = CHILD_ERR_FD + 1; fd < 1024; fd++)
      close (fd);

  sigemptyset (&none);
  if (sigprocmask (SIG_SETMASK, &none, NULL) < 0 || drop_all_capabilities () < 0)
    child_fail (errfd, errno);
  umask (022);
  execve (argv[0], argv, envp);
  child_fail (errfd, errno);
}

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
  cleanup_close int devnull = -1;
  cleanup_close int out_rd = -1, out_wr = -1;
  cleanup_close int err_rd = -1, err_wr = -1;
  struct sp_child child = { -1, -1 };
  int64_t deadline = sp_monotonic_ms () + SP_ROOTFS_COMPILE_TIMEOUT_MS;
  int pipefd[2];
  int child_errno = 0;
  pid_t parent = getpid ();
  pid_t pid;
  ssize_t n;
  int ret;

  devnull = TEMP_FAILURE_RETRY (open ("/dev/null", O_RDWR | O_CLOEXEC));
  if (devnull < 0)
    return sp_make_error (err, errno, "open `/dev/null`");
  if (pipe2 (pipefd, O_CLOEXEC) < 0)
    return sp_make_error (err, errno, "pipe");
  out_rd = pipefd[0];
  out_wr = pipefd[1];
  if (pipe2 (pipefd, O_CLOEXEC) < 0)
    return sp_make_error (err, errno, "pipe");
  err_rd = pipefd[0];
  err_wr = pipefd[1];

  pid = fork ();
  if (pid < 0)
    return sp_make_error (err, errno, "fork");
  if (pid == 0)
    child_exec (rootfd, devnull, out_wr, err_wr, parent, argv, envp);
  setpgid (pid, pid); /* as spawn.c: a group kill reaches it before its own setpgid */
  sp_closep (&out_wr);
  sp_closep (&err_wr);

  n = TEMP_FAILURE_RETRY (read (err_rd, &child_errno, sizeof (child_errno)));
  if (n != 0)
    {
      int st;
      TEMP_FAILURE_RETRY (waitpid (pid, &st, 0));
      if (n == (ssize_t)sizeof (child_errno))
        return sp_make_error (err, child_errno, "run `%s` chrooted into the tree without capabilities",
                              SP_ROOTFS_PYTHON);
      return sp_make_error (err, 0, "run `%s`: the child failed before exec", SP_ROOTFS_PYTHON);
    }
  /* Ours by fork: the spawn helpers' bounded wait and group kill apply.  */
  if (sp_child_adopt (pid, &child, err) < 0)
    {
      kill (-pid, SIGKILL);
      TEMP_FAILURE_RETRY (waitpid (pid, &child_errno, 0));
      return -1;
    }
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
