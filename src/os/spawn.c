/* Starting helper programs: see src/os/spawn.h.  Between fork
   and execve the child runs only async-signal-safe calls: the proxy is
   multi-threaded, so another thread may hold malloc's or stdio's lock.  */
#define _GNU_SOURCE
#include "os/spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <dirent.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/clock.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_close_range
#define SYS_close_range 436
#endif
#ifndef PR_CAP_AMBIENT
#define PR_CAP_AMBIENT           47
#define PR_CAP_AMBIENT_CLEAR_ALL 4
#endif

/* Where the child parks the fds it needs while it rearranges 0..3: above any
   fd number the rearranging can produce.  */
#define CHILD_PARK_FD 10
/* The error pipe's fd in the child: it is closed by execve (FD_CLOEXEC), and
   close_range starts just above it.  */
#define CHILD_ERR_FD 3
/* The capability numbers to drop from the bounding set: far above
   CAP_LAST_CAP; the kernel's EINVAL ends the loop earlier.  */
#define CAP_SCAN_MAX 64
/* Without a pidfd, the wait polls this often.  */
#define WAIT_POLL_NS (10 * 1000 * 1000)

/* The children this process waits for by pid, spawned or adopted: any
   other child is a stray (a runtime's helper, orphaned and reparented to
   the proxy as the subreaper), which sp_reap_strays reaps once it exited.
   A spawn holds the lock from fork to registration, so that no sweep sees
   its child unregistered.  */
static pthread_mutex_t known_lock = PTHREAD_MUTEX_INITIALIZER;
static pid_t *known;
static size_t known_len, known_cap;

/* Under known_lock.  A failed allocation leaves the pid unregistered: a
   sweep may then reap it first, and the owner's wait fails (ECHILD), an
   error, never a wrong status.  */
static void
known_add (pid_t pid)
{
  if (known_len == known_cap)
    {
      size_t cap = known_cap ? known_cap * 2 : 32;
      pid_t *grown = realloc (known, cap * sizeof (*known));

      if (grown == NULL)
        return;
      known = grown;
      known_cap = cap;
    }
  known[known_len++] = pid;
}

static void
known_remove (pid_t pid)
{
  pthread_mutex_lock (&known_lock);
  for (size_t i = 0; i < known_len; i++)
    if (known[i] == pid)
      {
        known[i] = known[--known_len];
        break;
      }
  pthread_mutex_unlock (&known_lock);
}

static bool
known_has (pid_t pid)
{
  for (size_t i = 0; i < known_len; i++)
    if (known[i] == pid)
      return true;
  return false;
}

static void __attribute__ ((noreturn)) child_fail (int errfd, int error)
{
  /* A failed write leaves the parent reading EOF: it then sees exit 127.  */
  if (write (errfd, &error, sizeof (error)) < 0)
    _exit (127);
  _exit (127);
}

static void
child_close_from (int lowfd)
{
  struct rlimit rl;
  long max;

  if (syscall (SYS_close_range, (unsigned int)lowfd, ~0U, 0) == 0)
    return;
  /* Kernels before 5.9: close one by one up to the fd limit.  */
  max = getrlimit (RLIMIT_NOFILE, &rl) == 0 && rl.rlim_max != RLIM_INFINITY ? (long)rl.rlim_max : 65536;
  if (max > INT_MAX)
    max = INT_MAX;
  for (long fd = lowfd; fd < max; fd++)
    close ((int)fd);
}

/* No capability survives the execve: an empty bounding set means a uid-0
   exec gains none, and the empty permitted set drops what the child has.
   Plain syscalls only.  */
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

/* The child's side.  Only async-signal-safe calls from here to execve.  */
static void __attribute__ ((noreturn))
child_exec (const char *path, char *const argv[], char *const envp[], pid_t parent, int devnull,
            const struct sp_spawn_options *opt, int errfd)
{
  struct sigaction dfl;
  sigset_t none;
  int null_hi, in_hi, out_hi, err_hi;

  /* The error pipe first, so that every later failure can be reported.  */
  err_hi = fcntl (errfd, F_DUPFD_CLOEXEC, CHILD_PARK_FD);
  if (err_hi < 0)
    _exit (127);
  errfd = err_hi;

  if (setpgid (0, 0) < 0)
    child_fail (errfd, errno);
  if (prctl (PR_SET_PDEATHSIG, SIGKILL) < 0)
    child_fail (errfd, errno);
  /* The parent died before the prctl: nobody would kill us later.  */
  if (getppid () != parent)
    _exit (127);
  /* Into the tree first: root_dirfd is closed with the rest below.  */
  if (opt->root_dirfd >= 0 && (fchdir (opt->root_dirfd) < 0 || chroot (".") < 0 || chdir ("/") < 0))
    child_fail (errfd, errno);

  null_hi = fcntl (devnull, F_DUPFD_CLOEXEC, CHILD_PARK_FD);
  if (null_hi < 0)
    child_fail (errfd, errno);
  in_hi = null_hi;
  if (opt->input_fd >= 0)
    {
      in_hi = fcntl (opt->input_fd, F_DUPFD_CLOEXEC, CHILD_PARK_FD);
      if (in_hi < 0)
        child_fail (errfd, errno);
    }
  out_hi = null_hi;
  if (opt->output_fd >= 0)
    {
      out_hi = fcntl (opt->output_fd, F_DUPFD_CLOEXEC, CHILD_PARK_FD);
      if (out_hi < 0)
        child_fail (errfd, errno);
    }
  /* dup2 clears FD_CLOEXEC on 0, 1 and 2; the error pipe keeps it on 3.  */
  if (dup2 (in_hi, STDIN_FILENO) < 0 || dup2 (out_hi, STDOUT_FILENO) < 0
      || dup2 (opt->output_stderr_too ? out_hi : null_hi, STDERR_FILENO) < 0)
    child_fail (errfd, errno);
  if (dup3 (errfd, CHILD_ERR_FD, O_CLOEXEC) < 0)
    child_fail (errfd, errno);
  errfd = CHILD_ERR_FD;
  child_close_from (CHILD_ERR_FD + 1);

  memset (&dfl, 0, sizeof (dfl));
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; sig++)
    sigaction (sig, &dfl, NULL); /* EINVAL for SIGKILL, SIGSTOP and libc's own: fine */
  sigemptyset (&none);
  if (sigprocmask (SIG_SETMASK, &none, NULL) < 0)
    child_fail (errfd, errno);
  if (opt->drop_capabilities && drop_all_capabilities () < 0)
    child_fail (errfd, errno);

  execve (path, argv, envp);
  child_fail (errfd, errno);
}

int
sp_spawn_with (const char *path, char *const argv[], char *const envp[],
               const struct sp_spawn_options *options, struct sp_child *child, sp_error_t *err)
{
  cleanup_close int devnull = -1;
  cleanup_close int err_rd = -1;
  cleanup_close int err_wr = -1;
  int pipefd[2];
  sigset_t all, old;
  pid_t parent = getpid ();
  pid_t pid;
  int child_errno = 0;
  ssize_t n;

  child->pid = -1;
  child->pidfd = -1;
  if (path == NULL || path[0] != '/')
    return sp_make_error (err, 0, "spawn: `%s` is not an absolute path", path ? path : "(null)");
  if (argv == NULL || argv[0] == NULL || envp == NULL || options == NULL)
    return sp_make_error (err, 0, "spawn `%s`: argv, envp and options are required", path);

  devnull = open ("/dev/null", O_RDWR | O_CLOEXEC);
  if (devnull < 0)
    return sp_make_error (err, errno, "open `/dev/null`");
  if (pipe2 (pipefd, O_CLOEXEC) < 0)
    return sp_make_error (err, errno, "spawn `%s`: pipe", path);
  err_rd = pipefd[0];
  err_wr = pipefd[1];

  /* No handler of ours may run in the child before it resets them.  */
  sigfillset (&all);
  pthread_sigmask (SIG_SETMASK, &all, &old);
  pthread_mutex_lock (&known_lock);
  pid = fork ();
  if (pid == 0)
    child_exec (path, argv, envp, parent, devnull, options, err_wr);
  int fork_errno = errno;
  if (pid > 0)
    known_add (pid);
  pthread_mutex_unlock (&known_lock);
  pthread_sigmask (SIG_SETMASK, &old, NULL);
  if (pid < 0)
    return sp_make_error (err, fork_errno, "spawn `%s`: fork", path);

  /* Also from here, so that a group kill reaches it even before the child's
     own setpgid ran (one of the two wins; the other fails harmlessly).  */
  setpgid (pid, pid);
  child->pid = pid;
  child->pidfd = (int)syscall (SYS_pidfd_open, pid, 0); /* always O_CLOEXEC; -1 falls back to polling */

  sp_closep (&err_wr);
  n = TEMP_FAILURE_RETRY (read (err_rd, &child_errno, sizeof (child_errno)));
  if (n != 0)
    {
      /* execve failed (or the child could not even report why).  */
      int status;

      TEMP_FAILURE_RETRY (waitpid (pid, &status, 0));
      known_remove (pid);
      if (child->pidfd >= 0)
        close (child->pidfd);
      child->pid = -1;
      child->pidfd = -1;
      if (n == (ssize_t)sizeof (child_errno))
        return sp_make_error (err, child_errno, "spawn `%s`", path);
      return sp_make_error (err, 0, "spawn `%s`: the child failed before exec", path);
    }
  return 0;
}

int
sp_spawn (const char *path, char *const argv[], char *const envp[], struct sp_child *child, sp_error_t *err)
{
  static const struct sp_spawn_options defaults = { .input_fd = -1, .output_fd = -1, .root_dirfd = -1 };

  return sp_spawn_with (path, argv, envp, &defaults, child, err);
}

static void
child_reaped (struct sp_child *child)
{
  known_remove (child->pid);
  if (child->pidfd >= 0)
    close (child->pidfd);
  child->pidfd = -1;
  child->pid = -1;
}

int
sp_child_adopt (pid_t pid, struct sp_child *child, sp_error_t *err)
{
  siginfo_t info;

  child->pid = -1;
  child->pidfd = -1;
  /* A child of ours, so its pid cannot be reused until it is reaped here.  */
  memset (&info, 0, sizeof (info));
  if (pid <= 1 || waitid (P_PID, (id_t)pid, &info, WEXITED | WNOHANG | WNOWAIT) < 0)
    return sp_make_error (err, pid <= 1 ? ECHILD : errno, "pid %d is not this process's child", (int)pid);
  pthread_mutex_lock (&known_lock);
  known_add (pid);
  pthread_mutex_unlock (&known_lock);
  child->pid = pid;
  child->pidfd = (int)syscall (SYS_pidfd_open, pid, 0); /* -1 falls back to polling */
  return 0;
}

/* The pids listed in one /proc/self/task/TID/children file, reaped when
   they are strays that exited.  */
static unsigned
reap_strays_of (const char *children_path)
{
  char buf[4096];
  unsigned reaped = 0;
  ssize_t n;
  int fd = open (children_path, O_RDONLY | O_CLOEXEC);

  if (fd < 0)
    return 0;
  n = read (fd, buf, sizeof (buf) - 1);
  close (fd);
  if (n <= 0)
    return 0;
  buf[n] = '\0';
  for (char *p = buf, *end; *p; p = end)
    {
      long pid = strtol (p, &end, 10);
      int st;

      if (end == p)
        break;
      /* WNOHANG: one still running is left alone.  */
      if (pid > 1 && !known_has ((pid_t)pid) && waitpid ((pid_t)pid, &st, WNOHANG) == (pid_t)pid)
        reaped++;
    }
  return reaped;
}

unsigned
sp_reap_strays (void)
{
  DIR *tasks;
  struct dirent *de;
  unsigned reaped = 0;

  pthread_mutex_lock (&known_lock);
  tasks = opendir ("/proc/self/task");
  if (tasks != NULL)
    {
      /* An orphan goes to any live thread of the subreaper: each one's list.  */
      while ((de = readdir (tasks)) != NULL)
        {
          char path[320];

          if (de->d_name[0] < '1' || de->d_name[0] > '9')
            continue;
          snprintf (path, sizeof (path), "/proc/self/task/%s/children", de->d_name);
          reaped += reap_strays_of (path);
        }
      closedir (tasks);
    }
  pthread_mutex_unlock (&known_lock);
  return reaped;
}

int
sp_child_wait (struct sp_child *child, int timeout_ms, int *status, sp_error_t *err)
{
  int64_t deadline = timeout_ms < 0 ? -1 : sp_monotonic_ms () + timeout_ms;
  int st = 0;

  if (child->pid <= 0)
    return sp_make_error (err, ECHILD, "wait: no child");
  for (;;)
    {
      int left = -1;
      pid_t r;

      if (deadline >= 0)
        {
          int64_t d = deadline - sp_monotonic_ms ();
          left = d < 0 ? 0 : d > INT_MAX ? INT_MAX : (int)d;
        }
      if (child->pidfd >= 0)
        {
          struct pollfd pfd = { .fd = child->pidfd, .events = POLLIN };
          int ready = poll (&pfd, 1, left);

          if (ready < 0 && errno != EINTR)
            return sp_make_error (err, errno, "wait for pid %d: poll", (int)child->pid);
          if (ready == 0)
            return 0;
          if (ready < 0)
            continue;
        }
      r = TEMP_FAILURE_RETRY (waitpid (child->pid, &st, child->pidfd >= 0 ? 0 : WNOHANG));
      if (r < 0)
        return sp_make_error (err, errno, "wait for pid %d", (int)child->pid);
      if (r == child->pid)
        {
          child_reaped (child);
          if (status)
            *status = st;
          return 1;
        }
      /* No pidfd: poll waitpid.  */
      if (left == 0)
        return 0;
      struct timespec nap = { 0, WAIT_POLL_NS };
      nanosleep (&nap, NULL);
    }
}

int
sp_child_kill_and_reap (struct sp_child *child)
{
  pid_t pid = child->pid;
  int st;
  pid_t r;

  if (pid <= 0)
    return 0;
  /* The pgid is the pid (setpgid (0, 0)), and it cannot be reused while the
     unreaped child holds it.  */
  kill (-pid, SIGKILL);
  kill (pid, SIGKILL);
  r = TEMP_FAILURE_RETRY (waitpid (pid, &st, 0));
  child_reaped (child);
  return r == pid;
}

int
sp_spawn_capture (const char *path, char *const argv[], char *const envp[], int timeout_ms, char *out,
                  size_t cap, size_t *len, int *status, sp_error_t *err)
{
  struct sp_child child = { -1, -1 };
  cleanup_close int rd = -1;
  cleanup_close int wr = -1;
  int pipefd[2];
  int64_t deadline = sp_monotonic_ms () + (timeout_ms < 0 ? 0 : timeout_ms);
  size_t used = 0;
  int ret;

  *len = 0;
  if (out == NULL)
    return sp_make_error (err, EINVAL, "capture `%s`: no buffer", path ? path : "(null)");
  out[0] = '\0';
  if (pipe2 (pipefd, O_CLOEXEC) < 0)
    return sp_make_error (err, errno, "capture `%s`: pipe", path ? path : "(null)");
  rd = pipefd[0];
  wr = pipefd[1];
  if (sp_spawn_with (path, argv, envp,
                     &(struct sp_spawn_options){ .input_fd = -1, .output_fd = wr, .root_dirfd = -1 }, &child,
                     err)
      < 0)
    return -1;
  sp_closep (&wr);

  for (;;)
    {
      struct pollfd pfd = { .fd = rd, .events = POLLIN };
      int64_t d = deadline - sp_monotonic_ms ();
      int ready;
      ssize_t n;
      char sink;

      if (d <= 0)
        {
          sp_child_kill_and_reap (&child);
          return sp_make_error (err, 0, "`%s` did not finish within %d ms", path, timeout_ms);
        }
      ready = poll (&pfd, 1, d > INT_MAX ? INT_MAX : (int)d);
      if (ready < 0 && errno == EINTR)
        continue;
      if (ready < 0)
        {
          int e = errno;
          sp_child_kill_and_reap (&child);
          return sp_make_error (err, e, "capture `%s`: poll", path);
        }
      if (ready == 0)
        continue;
      /* One byte past cap is enough to know the output is too long.  */
      n = used < cap ? read (rd, out + used, cap - used) : read (rd, &sink, 1);
      if (n < 0 && (errno == EINTR || errno == EAGAIN))
        continue;
      if (n < 0)
        {
          int e = errno;
          sp_child_kill_and_reap (&child);
          return sp_make_error (err, e, "capture `%s`: read", path);
        }
      if (n == 0)
        break;
      if (used >= cap)
        {
          sp_child_kill_and_reap (&child);
          out[used] = '\0';
          return sp_make_error (err, 0, "`%s` wrote more than %zu bytes", path, cap);
        }
      used += (size_t)n;
    }
  out[used] = '\0';
  *len = used;

  /* Its stdout is closed; it may still run (or a grandchild held the pipe).  */
  int64_t d = deadline - sp_monotonic_ms ();
  ret = sp_child_wait (&child, d < 0 ? 0 : d > INT_MAX ? INT_MAX : (int)d, status, err);
  if (ret < 0)
    {
      sp_child_kill_and_reap (&child);
      return -1;
    }
  if (ret == 0)
    {
      sp_child_kill_and_reap (&child);
      return sp_make_error (err, 0, "`%s` did not finish within %d ms", path, timeout_ms);
    }
  return 0;
}
