/* The OCI bundle generator: see src/bundle/bundle.h and
   docs/bundle.md.  Every hardening choice is a line here, in the order of
   config.json, so that a reviewer reads the policy top to bottom.  */
#define _GNU_SOURCE
#include "bundle/bundle.h"

#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/bounds.h"
#include "base/cleanup.h"
#include "base/sha256.h"
#include "os/fileio.h"
#include "text/yajl_util.h"

#include "build_config.h"

/* Inside the sandbox.  */
#define PROBE_DIR         "/probe"
#define PROBE_REPO_PATH   PROBE_DIR "/" SP_BUNDLE_REPO
#define PROBE_SCRIPT_PATH PROBE_DIR "/" SP_BUNDLE_SCRIPT
#define PROBE_OUT_PATH    PROBE_DIR "/" SP_BUNDLE_OUT

/* The interpreter runs isolated (-I: no user site, no PYTHON* variables, no
   script directory on sys.path), without site (-S) and writes no bytecode
   (-B).  */
static const char *const python3_args[] = { "/usr/bin/python3", "-I", "-S", "-B", PROBE_SCRIPT_PATH, NULL };
/* The same interpreter started ahead: the same flags, and waiter.py in
   place of the script's path, which it then runs.  */
#define PYTHON3_WAITER_ARGS                                                                                  \
  {                                                                                                          \
    "/usr/bin/python3", "-I", "-S", "-B", "-c", (const char *)sp_bundle_waiter_py, NULL                      \
  }

/* A fixed environment: nothing from the host or the request.  */
static const char *const probe_env[] = { "PATH=/usr/bin", "LANG=C.UTF-8", "HOME=/tmp", NULL };

/* Host-wide state: what a probe reads of /proc and /sys is only what belongs
   to its own sandbox (docs/threat-model.md, "Host-wide state").  The policy
   is an allowlist: of /proc's top level a probe keeps exactly the entries
   below and its own processes' directories (the pid namespace holds only the
   sandbox's); every other entry the host's kernel lists when the bundle is
   written is masked, and so are /proc/sys and the whole of /sys.  Nothing in
   CPython's standard library needs more: os.cpu_count() falls back to
   sched_getaffinity, subprocess reads /proc/self/fd, and sysinfo(), which
   would tell host-wide memory and task counts, is refused by the seccomp
   profile (docs/seccomp.md).  */
static const char *const proc_allowed[] = {
  "self",        /* the reading process: its own status, maps, fds */
  "thread-self", /* the reading thread */
  "mounts",      /* a link to self/mounts, the sandbox's own mount table */
  "net",         /* a link to self/net, the sandbox's network namespace (loopback only) */
  NULL,
};
/* Always masked, whether or not the host lists them: top-level names some
   kernels have (runc's defaults among them), and the two trees that are
   host-wide as a whole.  */
static const char *const masked_always[] = {
  "/proc/acpi",
  "/proc/asound",
  "/proc/buddyinfo",
  "/proc/cmdline",
  "/proc/config.gz",
  "/proc/diskstats",
  "/proc/interrupts",
  "/proc/iomem",
  "/proc/ioports",
  "/proc/kallsyms",
  "/proc/kcore",
  "/proc/key-users",
  "/proc/keys",
  "/proc/latency_stats",
  "/proc/loadavg",
  "/proc/meminfo",
  "/proc/modules",
  "/proc/partitions",
  "/proc/pressure",
  "/proc/sched_debug",
  "/proc/scsi",
  "/proc/softirqs",
  "/proc/stat",
  "/proc/swaps",
  "/proc/sys",
  "/proc/timer_list",
  "/proc/timer_stats",
  "/proc/uptime",
  "/proc/vmstat",
  "/proc/zoneinfo",
  "/sys",
  NULL,
};
static const char *const readonly_paths[] = {
  "/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger", NULL,
};

/* The five capability sets, all empty.  */
static const char *const capability_sets[]
    = { "bounding", "effective", "inheritable", "permitted", "ambient", NULL };

/* Every namespace but user: the probe runs as a real unprivileged uid.  A new
   network namespace holds only loopback.  */
static const char *const namespaces[] = { "pid", "network", "ipc", "uts", "mount", "cgroup", "user", NULL };

struct mount_entry
{
  const char *destination;
  const char *type;
  const char *source; /* NULL: bundle_dir/<bundle_file> */
  const char *bundle_file;
  const char *const *options;
};

static const char *const proc_options[] = { "nosuid", "noexec", "nodev", NULL };
static const char *const dev_options[]
    = { "nosuid", "noexec", "strictatime", "mode=755", "size=" SP_SANDBOX_DEV_SIZE, NULL };
static const char *const sys_options[] = { "nosuid", "noexec", "nodev", "ro", NULL };
static const char *const tmp_options[] = {
  "nosuid", "noexec", "nodev", "mode=1777", "size=" SP_SANDBOX_TMP_SIZE, "nr_inodes=" SP_SANDBOX_TMP_INODES,
  NULL
};
/* The repository copy and the answer file are writable; nothing in them may
   execute natively or act as a device or setuid file.  */
static const char *const rw_bind_options[] = { "bind", "rw", "nosuid", "nodev", "noexec", NULL };
static const char *const ro_bind_options[] = { "bind", "ro", "nosuid", "nodev", "noexec", NULL };

/* No /dev/pts (no terminal), no /dev/shm or /dev/mqueue (no POSIX IPC), no
   cgroupfs: a probe needs none of them.  */
static const struct mount_entry mounts[] = {
  { "/proc", "proc", "proc", NULL, proc_options },
  { "/dev", "tmpfs", "tmpfs", NULL, dev_options },
  { "/sys", "sysfs", "sysfs", NULL, sys_options },
  { "/tmp", "tmpfs", "tmpfs", NULL, tmp_options },
  { PROBE_REPO_PATH, "bind", NULL, SP_BUNDLE_REPO, rw_bind_options },
  { PROBE_SCRIPT_PATH, "bind", NULL, SP_BUNDLE_SCRIPT, ro_bind_options },
  { PROBE_OUT_PATH, "bind", NULL, SP_BUNDLE_OUT, rw_bind_options },
};

/* runsc 2022 ignores maskedPaths and readonlyPaths, and its sentry makes
   /dev/net/tun, /dev/pts and /dev/shm whatever the bundle says: under
   rules.masks_by_mount an empty read-only tmpfs covers each tree, and /sys
   is one instead of a sysfs.  The top-level files of the sentry's /proc are
   its own, per sandbox (docs/runtimes.md, "gVisor's named gaps").  */
static const char *const cover_options[] = { "ro", "nosuid", "nodev", "noexec", "mode=555", "size=4k", NULL };
static const struct mount_entry covers[] = {
  { "/proc/sys", "tmpfs", "tmpfs", NULL, cover_options },
  { "/dev/net", "tmpfs", "tmpfs", NULL, cover_options },
  { "/dev/pts", "tmpfs", "tmpfs", NULL, cover_options },
  { "/dev/shm", "tmpfs", "tmpfs", NULL, cover_options },
};

struct rlimit_entry
{
  const char *type;
  unsigned long long value; /* soft and hard alike */
};

static const struct rlimit_entry rlimits[] = {
  { "RLIMIT_CORE", 0 },
  { "RLIMIT_FSIZE", SP_SANDBOX_FSIZE_BYTES },
  { "RLIMIT_NOFILE", SP_SANDBOX_NOFILE },
  { "RLIMIT_NPROC", SP_SANDBOX_NPROC },
};

int
sp_bundle_id_check (const char *id, sp_error_t *err)
{
  if (!sp_bundle_id_valid (id))
    return sp_make_error (err, 0, "must be 1 to %d characters of a-z, 0-9 and -", SP_ID_MAX_CHARS);
  return 0;
}

/* The highest id a range may reach: ids above 2^31 - 1 are not portable
   (some tools read them as signed).  */
#define PROBE_ID_CEILING 0x7fffffffU
/* Distributions hand out ids up to 65535 (and 65534 is nobody).  */
#define PROBE_ID_FLOOR 65536U

int
sp_bundle_id_range_check (uint32_t base, sp_error_t *err)
{
  if (base < PROBE_ID_FLOOR || base > PROBE_ID_CEILING - SP_PROBE_ID_RANGE)
    return sp_make_error (err, 0, "the probe id range must start between %u and %u (it is %u ids long)",
                          PROBE_ID_FLOOR, PROBE_ID_CEILING - SP_PROBE_ID_RANGE, SP_PROBE_ID_RANGE);
  return 0;
}

int
sp_bundle_id_make (const char *prefix, char out[SP_ID_MAX_CHARS + 1], sp_error_t *err)
{
  uint8_t bytes[SP_RUN_ID_RANDOM_BYTES];
  size_t at;

  at = (size_t)snprintf (out, SP_ID_MAX_CHARS + 1, "%s", prefix ? prefix : "");
  if (at + 2 * sizeof (bytes) > SP_ID_MAX_CHARS)
    return sp_make_error (err, 0, "run id prefix `%s` is too long", prefix);
  if (getrandom (bytes, sizeof (bytes), 0) != (ssize_t)sizeof (bytes))
    return sp_make_error (err, errno, "getrandom");
  for (size_t i = 0; i < sizeof (bytes); i++)
    snprintf (out + at + 2 * i, 3, "%02x", bytes[i]);
  return 0;
}

char *
sp_bundle_container_id (const struct sp_bundle_spec *spec)
{
  char *id = NULL;

  if (asprintf (&id, "sp-%s-%s", spec->run_id, spec->invocation_id) < 0)
    return NULL;
  return id;
}

char *
sp_bundle_cgroup_path (const struct sp_bundle_spec *spec)
{
  char *path = NULL;

  if (asprintf (&path, "/%s/%s-%s", SP_BUNDLE_CGROUP_PARENT, spec->run_id, spec->invocation_id) < 0)
    return NULL;
  return path;
}

static unsigned
gen_str (yajl_gen g, const char *s)
{
  return yajl_gen_string (g, (const unsigned char *)s, strlen (s));
}

static unsigned
gen_str_member (yajl_gen g, const char *key, const char *value)
{
  return gen_str (g, key) | gen_str (g, value);
}

static unsigned
gen_int_member (yajl_gen g, const char *key, long long value)
{
  return gen_str (g, key) | yajl_gen_integer (g, value);
}

static unsigned
gen_str_array (yajl_gen g, const char *const *items)
{
  unsigned st = yajl_gen_array_open (g);

  for (; *items; items++)
    st |= gen_str (g, *items);
  return st | yajl_gen_array_close (g);
}

static unsigned
gen_process (yajl_gen g, const struct sp_bundle_spec *spec)
{
  unsigned st = 0;

  st |= gen_str (g, "process");
  st |= yajl_gen_map_open (g);
  st |= gen_str (g, "terminal");
  st |= yajl_gen_bool (g, 0);
  st |= gen_str (g, "user");
  st |= yajl_gen_map_open (g);
  st |= gen_int_member (g, "uid",
                        spec->rules.host_ids_direct ? (long long)spec->host_probe_id : SP_PROBE_UID);
  st |= gen_int_member (g, "gid",
                        spec->rules.host_ids_direct ? (long long)spec->host_probe_id : SP_PROBE_GID);
  st |= gen_str (g, "additionalGids");
  st |= yajl_gen_array_open (g) | yajl_gen_array_close (g);
  st |= yajl_gen_map_close (g);
  st |= gen_str (g, "args");
  /* One interpreter today; the switch keeps a new one from slipping by.  */
  switch (spec->interpreter)
    {
    case SP_INTERPRETER_PYTHON3:
      if (spec->interpreter_waits)
        {
          const char *const waiter_args[] = PYTHON3_WAITER_ARGS;

          st |= gen_str_array (g, waiter_args);
        }
      else
        st |= gen_str_array (g, python3_args);
      break;
    default:
      return yajl_gen_invalid_string;
    }
  st |= gen_str (g, "env");
  st |= gen_str_array (g, probe_env);
  st |= gen_str_member (g, "cwd", PROBE_REPO_PATH);
  st |= gen_str (g, "capabilities");
  st |= yajl_gen_map_open (g);
  for (const char *const *set = capability_sets; *set; set++)
    {
      st |= gen_str (g, *set);
      st |= yajl_gen_array_open (g) | yajl_gen_array_close (g);
    }
  st |= yajl_gen_map_close (g);
  st |= gen_str (g, "rlimits");
  st |= yajl_gen_array_open (g);
  for (size_t i = 0; i < sizeof (rlimits) / sizeof (rlimits[0]); i++)
    {
      st |= yajl_gen_map_open (g);
      unsigned long long value = rlimits[i].value;

      if (spec->rules.tasks_counted_by_kernel && strcmp (rlimits[i].type, "RLIMIT_NPROC") == 0)
        value = SP_SANDBOX_PIDS_MAX;
      st |= gen_str_member (g, "type", rlimits[i].type);
      st |= gen_int_member (g, "hard", (long long)value);
      st |= gen_int_member (g, "soft", (long long)value);
      st |= yajl_gen_map_close (g);
    }
  st |= yajl_gen_array_close (g);
  st |= gen_str (g, "noNewPrivileges");
  st |= yajl_gen_bool (g, 1);
  st |= gen_int_member (g, "oomScoreAdj", SP_SANDBOX_OOM_SCORE_ADJ);
  return st | yajl_gen_map_close (g);
}

/* The mount hint that gives /probe/repo, and no other mount, to the
   sandbox alone (bundle.h, repo_exclusive).  runsc finds the mount by its
   source, which is exactly the one gen_mounts writes.  */
static unsigned
gen_repo_hint (yajl_gen g, const struct sp_bundle_spec *spec)
{
  cleanup_free char *source = NULL;
  unsigned st = 0;

  if (asprintf (&source, "%s/%s", spec->bundle_dir, SP_BUNDLE_REPO) < 0)
    {
      source = NULL;
      return yajl_gen_invalid_string;
    }
  st |= gen_str_member (g, SP_GVISOR_REPO_HINT "share", "container");
  st |= gen_str_member (g, SP_GVISOR_REPO_HINT "type", "bind");
  st |= gen_str_member (g, SP_GVISOR_REPO_HINT "source", source);
  return st;
}

static unsigned
gen_mounts (yajl_gen g, const struct sp_bundle_spec *spec)
{
  unsigned st = gen_str (g, "mounts");

  st |= yajl_gen_array_open (g);
  for (size_t i = 0; i < sizeof (mounts) / sizeof (mounts[0]); i++)
    {
      cleanup_free char *source = NULL;
      struct mount_entry m = mounts[i];

      if (spec->rules.tmp_on_host && strcmp (m.destination, "/tmp") == 0)
        m = (struct mount_entry){ "/tmp", "bind", NULL, SP_BUNDLE_TMP, rw_bind_options };
      if (spec->rules.masks_by_mount && strcmp (m.destination, "/sys") == 0)
        m = (struct mount_entry){ "/sys", "tmpfs", "tmpfs", NULL, cover_options };
      if (m.source == NULL && asprintf (&source, "%s/%s", spec->bundle_dir, m.bundle_file) < 0)
        return yajl_gen_invalid_string;
      st |= yajl_gen_map_open (g);
      st |= gen_str_member (g, "destination", m.destination);
      st |= gen_str_member (g, "type", m.type);
      st |= gen_str_member (g, "source", source ? source : m.source);
      st |= gen_str (g, "options");
      st |= gen_str_array (g, m.options);
      st |= yajl_gen_map_close (g);
    }
  for (size_t i = 0; spec->rules.masks_by_mount && i < sizeof (covers) / sizeof (covers[0]); i++)
    {
      st |= yajl_gen_map_open (g);
      st |= gen_str_member (g, "destination", covers[i].destination);
      st |= gen_str_member (g, "type", covers[i].type);
      st |= gen_str_member (g, "source", covers[i].source);
      st |= gen_str (g, "options");
      st |= gen_str_array (g, covers[i].options);
      st |= yajl_gen_map_close (g);
    }
  return st | yajl_gen_array_close (g);
}

static unsigned
gen_resources (yajl_gen g, const struct sp_bundle_spec *spec)
{
  unsigned st = gen_str (g, "resources");

  st |= yajl_gen_map_open (g);
  /* Deny every device; runc still creates its default /dev nodes.  */
  st |= gen_str (g, "devices");
  st |= yajl_gen_array_open (g);
  st |= yajl_gen_map_open (g);
  st |= gen_str (g, "allow");
  st |= yajl_gen_bool (g, 0);
  st |= gen_str_member (g, "access", "rwm");
  st |= yajl_gen_map_close (g);
  st |= yajl_gen_array_close (g);
  /* swap is memory+swap in OCI terms: equal to the limit means no swap.  */
  st |= gen_str (g, "memory");
  st |= yajl_gen_map_open (g);
  st |= gen_int_member (g, "limit", (long long)spec->memory_limit_bytes);
  st |= gen_int_member (g, "swap", (long long)spec->memory_limit_bytes);
  st |= yajl_gen_map_close (g);
  st |= gen_str (g, "cpu");
  st |= yajl_gen_map_open (g);
  st |= gen_int_member (g, "quota", SP_SANDBOX_CPU_QUOTA_US);
  st |= gen_int_member (g, "period", SP_SANDBOX_CPU_PERIOD_US);
  st |= yajl_gen_map_close (g);
  st |= gen_str (g, "pids");
  st |= yajl_gen_map_open (g);
  st |= gen_int_member (g, "limit",
                        spec->rules.tasks_counted_by_kernel ? SP_GVISOR_HOST_TASKS_MAX : SP_SANDBOX_PIDS_MAX);
  st |= yajl_gen_map_close (g);
  return st | yajl_gen_map_close (g);
}

/* The user namespace's two mappings: its root, which exists only while the
   runtime sets the sandbox up, and the probe.  Nothing else in it maps to a
   host id, so a file of any other host owner shows as the overflow id.  */
static unsigned
gen_id_mappings (yajl_gen g, const char *key, const struct sp_bundle_spec *spec)
{
  const struct
  {
    uint32_t container;
    uint32_t host;
  } maps[] = { { 0, spec->host_root_id }, { SP_PROBE_UID, spec->host_probe_id } };
  unsigned st = gen_str (g, key) | yajl_gen_array_open (g);

  for (size_t i = 0; i < sizeof (maps) / sizeof (maps[0]); i++)
    {
      st |= yajl_gen_map_open (g);
      st |= gen_int_member (g, "containerID", maps[i].container);
      st |= gen_int_member (g, "hostID", maps[i].host);
      st |= gen_int_member (g, "size", 1);
      st |= yajl_gen_map_close (g);
    }
  return st | yajl_gen_array_close (g);
}

struct path_list
{
  char **items;
  size_t n, cap;
};

static void
path_list_release (struct path_list *l)
{
  for (size_t i = 0; i < l->n; i++)
    free (l->items[i]);
  free (l->items);
  l->items = NULL;
  l->n = l->cap = 0;
}
#define cleanup_path_list __attribute__ ((cleanup (path_list_release)))

/* Appends a copy of path and keeps the list NULL-terminated.  */
static int
path_list_add (struct path_list *l, const char *path)
{
  if (l->n + 1 >= l->cap)
    {
      size_t cap = l->cap ? 2 * l->cap : 64;
      char **items = reallocarray (l->items, cap, sizeof (*items));
      if (items == NULL)
        return -1;
      l->items = items;
      l->cap = cap;
    }
  l->items[l->n] = strdup (path);
  if (l->items[l->n] == NULL)
    return -1;
  l->items[++l->n] = NULL;
  return 0;
}

static int
compare_paths (const void *a, const void *b)
{
  return strcmp (*(char *const *)a, *(char *const *)b);
}

static bool
proc_name_allowed (const char *name)
{
  if (strcmp (name, ".") == 0 || strcmp (name, "..") == 0)
    return true;
  if (strspn (name, "0123456789") == strlen (name))
    return true; /* a process of the sandbox's pid namespace */
  for (size_t i = 0; proc_allowed[i] != NULL; i++)
    if (strcmp (name, proc_allowed[i]) == 0)
      return true;
  return false;
}

/* maskedPaths: masked_always, plus every top-level entry of the host's /proc
   that proc_allowed does not name, sorted and without repeats.  Read when
   the bundle is written, so a kernel's entry this list never heard of is
   masked too.  */
static int
masked_paths_collect (struct path_list *out, sp_error_t *err)
{
  cleanup_dir DIR *proc = opendir ("/proc");
  struct dirent *de;
  size_t kept = 0;

  if (proc == NULL)
    return sp_make_error (err, errno, "maskedPaths: read the host's /proc");
  for (size_t i = 0; masked_always[i] != NULL; i++)
    if (path_list_add (out, masked_always[i]) < 0)
      return sp_make_error (err, ENOMEM, "maskedPaths");
  errno = 0;
  while ((de = readdir (proc)) != NULL)
    {
      char path[NAME_MAX + sizeof ("/proc/")];

      if (proc_name_allowed (de->d_name))
        continue;
      snprintf (path, sizeof (path), "/proc/%s", de->d_name);
      if (path_list_add (out, path) < 0)
        return sp_make_error (err, ENOMEM, "maskedPaths");
      errno = 0;
    }
  if (errno != 0)
    return sp_make_error (err, errno, "maskedPaths: read the host's /proc");
  qsort (out->items, out->n, sizeof (*out->items), compare_paths);
  for (size_t i = 0; i < out->n; i++)
    {
      if (kept > 0 && strcmp (out->items[kept - 1], out->items[i]) == 0)
        {
          free (out->items[i]);
          continue;
        }
      out->items[kept++] = out->items[i];
    }
  out->n = kept;
  out->items[kept] = NULL;
  return 0;
}

static unsigned
gen_linux (yajl_gen g, const struct sp_bundle_spec *spec, const char *const *masked_paths)
{
  cleanup_free char *cgroups_path = NULL;
  unsigned st = 0;

  cgroups_path = sp_bundle_cgroup_path (spec);
  if (cgroups_path == NULL)
    return yajl_gen_invalid_string;

  st |= gen_str (g, "linux");
  st |= yajl_gen_map_open (g);
  st |= gen_str (g, "namespaces");
  st |= yajl_gen_array_open (g);
  for (const char *const *ns = namespaces; *ns; ns++)
    {
      if (spec->rules.host_ids_direct && strcmp (*ns, "user") == 0)
        continue;
      st |= yajl_gen_map_open (g);
      st |= gen_str_member (g, "type", *ns);
      st |= yajl_gen_map_close (g);
    }
  st |= yajl_gen_array_close (g);
  if (!spec->rules.host_ids_direct)
    {
      st |= gen_id_mappings (g, "uidMappings", spec);
      st |= gen_id_mappings (g, "gidMappings", spec);
    }
  st |= gen_resources (g, spec);
  st |= gen_str_member (g, "cgroupsPath", cgroups_path);
  st |= gen_str (g, "maskedPaths");
  st |= gen_str_array (g, masked_paths);
  st |= gen_str (g, "readonlyPaths");
  st |= gen_str_array (g, readonly_paths);
  /* Mounts made inside never propagate back to the host.  */
  st |= gen_str_member (g, "rootfsPropagation", "private");
  st |= gen_str (g, "seccomp");
  if ((spec->rules.seccomp_enosys_by_kernel ? sp_seccomp_profile_gen_enosys_by_kernel (spec->seccomp, g)
                                            : sp_seccomp_profile_gen (spec->seccomp, g))
      < 0)
    return yajl_gen_invalid_string;
  return st | yajl_gen_map_close (g);
}

static int
spec_check (const struct sp_bundle_spec *spec, sp_error_t *err)
{
  if (spec->bundle_dir == NULL || spec->bundle_dir[0] != '/')
    return sp_make_error (err, 0, "bundle directory: must be an absolute path");
  if (spec->rootfs_root == NULL || spec->rootfs_root[0] != '/')
    return sp_make_error (err, 0, "rootfs: must be an absolute path");
  if (spec->rootfs_digest == NULL
      || strncmp (spec->rootfs_digest, SP_DIGEST_PREFIX, strlen (SP_DIGEST_PREFIX)))
    return sp_make_error (err, 0, "rootfs digest: must start with `%s`", SP_DIGEST_PREFIX);
  if (spec->seccomp == NULL)
    return sp_make_error (err, 0, "seccomp: a profile is required");
  if (spec->memory_limit_bytes < SP_MEMORY_MIN_BYTES || spec->memory_limit_bytes > SP_MEMORY_MAX_BYTES)
    return sp_make_error (err, 0, "memory limit: out of range");
  if (sp_bundle_id_check (spec->run_id, err) < 0)
    return sp_error_wrap (err, "run id");
  if (sp_bundle_id_check (spec->invocation_id, err) < 0)
    return sp_error_wrap (err, "invocation id");
  /* Host ids a sandbox may never be: root, nobody, or one id for both. */
  if (spec->host_root_id < PROBE_ID_FLOOR || spec->host_probe_id < PROBE_ID_FLOOR
      || spec->host_root_id > PROBE_ID_CEILING || spec->host_probe_id > PROBE_ID_CEILING
      || spec->host_root_id == spec->host_probe_id)
    return sp_make_error (err, 0,
                          "host ids: the sandbox's root and probe need two ids of the probe id range");
  return 0;
}

int
sp_bundle_render_config (const struct sp_bundle_spec *spec, char **json, size_t *len, sp_error_t *err)
{
  cleanup_yajl_gen yajl_gen g = NULL;
  cleanup_path_list struct path_list masked = { 0 };
  const unsigned char *buf;
  size_t buf_len;
  unsigned st = 0;

  if (spec_check (spec, err) < 0 || masked_paths_collect (&masked, err) < 0)
    return -1;

  g = yajl_gen_alloc (NULL);
  if (g == NULL)
    return sp_make_error (err, ENOMEM, "config.json");
  /* Indented, so that an operator reviews the same bytes the runtime reads.  */
  yajl_gen_config (g, yajl_gen_beautify, 1);
  yajl_gen_config (g, yajl_gen_indent_string, "  ");

  st |= yajl_gen_map_open (g);
  st |= gen_str_member (g, "ociVersion", "1.0.2");
  st |= gen_process (g, spec);
  st |= gen_str (g, "root");
  st |= yajl_gen_map_open (g);
  st |= gen_str_member (g, "path", spec->rootfs_root);
  st |= gen_str (g, "readonly");
  st |= yajl_gen_bool (g, 1);
  st |= yajl_gen_map_close (g);
  st |= gen_str_member (g, "hostname", "probe");
  st |= gen_str_member (g, "domainname", SP_BUNDLE_DOMAINNAME);
  st |= gen_mounts (g, spec);
  st |= gen_str (g, "annotations");
  st |= yajl_gen_map_open (g);
  st |= gen_str_member (g, SP_ANNOTATION_RUN, spec->run_id);
  st |= gen_str_member (g, SP_ANNOTATION_INVOCATION, spec->invocation_id);
  st |= gen_str_member (g, SP_ANNOTATION_ROOTFS, spec->rootfs_digest);
  st |= gen_str_member (g, SP_ANNOTATION_VERSION, PACKAGE_VERSION);
  if (spec->rules.repo_exclusive)
    st |= gen_repo_hint (g, spec);
  st |= yajl_gen_map_close (g);
  st |= gen_linux (g, spec, (const char *const *)masked.items);
  st |= yajl_gen_map_close (g);

  if (st != yajl_gen_status_ok || yajl_gen_get_buf (g, &buf, &buf_len) != yajl_gen_status_ok)
    return sp_make_error (err, 0, "config.json: cannot render");
  *json = malloc (buf_len + 1);
  if (*json == NULL)
    return sp_make_error (err, ENOMEM, "config.json");
  memcpy (*json, buf, buf_len);
  (*json)[buf_len] = '\0';
  *len = buf_len;
  return 0;
}

/* Creates dirfd/name exclusively, writes data, sets mode and owner, and syncs.  */
static int
write_new_file (int dirfd, const char *name, const void *data, size_t len, mode_t mode, uid_t uid, gid_t gid,
                sp_error_t *err)
{
  cleanup_close int fd = -1;

  fd = openat (dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0)
    return sp_make_error (err, errno, "%s: create", name);
  if (len > 0 && sp_write_all (fd, data, len, err) < 0)
    return sp_error_wrap (err, "%s", name);
  if (fchown (fd, uid, gid) < 0)
    return sp_make_error (err, errno, "%s: give to %u:%u", name, (unsigned)uid, (unsigned)gid);
  if (fchmod (fd, mode) < 0)
    return sp_make_error (err, errno, "%s: chmod", name);
  if (fsync (fd) < 0)
    return sp_make_error (err, errno, "%s: fsync", name);
  return 0;
}

int
sp_bundle_write (int dirfd, const struct sp_bundle_spec *spec, const void *script, size_t script_len,
                 sp_error_t *err)
{
  cleanup_free char *json = NULL;
  cleanup_close int repo_fd = -1;
  size_t json_len;

  /* Render first: an invalid spec leaves the directory untouched.  */
  if (sp_bundle_render_config (spec, &json, &json_len, err) < 0)
    return -1;

  if (mkdirat (dirfd, SP_BUNDLE_REPO, 0700) < 0)
    return sp_make_error (err, errno, "%s: mkdir", SP_BUNDLE_REPO);
  repo_fd = openat (dirfd, SP_BUNDLE_REPO, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (repo_fd < 0)
    return sp_make_error (err, errno, "%s: open", SP_BUNDLE_REPO);
  if (fchown (repo_fd, spec->host_probe_id, spec->host_probe_id) < 0)
    return sp_make_error (err, errno, "%s: give to %" PRIu32 ":%" PRIu32, SP_BUNDLE_REPO, spec->host_probe_id,
                          spec->host_probe_id);

  if (write_new_file (dirfd, SP_BUNDLE_SCRIPT, script, script_len, 0444, 0, 0, err) < 0
      || write_new_file (dirfd, SP_BUNDLE_OUT, NULL, 0, 0600, spec->host_probe_id, spec->host_probe_id, err)
             < 0
      || write_new_file (dirfd, SP_BUNDLE_CONFIG, json, json_len, 0444, 0, 0, err) < 0)
    return -1;
  if (fsync (dirfd) < 0)
    return sp_make_error (err, errno, "bundle directory: fsync");
  return 0;
}

int
sp_bundle_open_script (int dirfd, int *fd_out, sp_error_t *err)
{
  cleanup_close int fd = -1;
  struct stat st;

  *fd_out = -1;
  fd = openat (dirfd, SP_BUNDLE_SCRIPT, O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return sp_make_error (err, errno, "%s: open", SP_BUNDLE_SCRIPT);
  /* Only the placeholder sp_bundle_write left: a script goes in once.  */
  if (fstat (fd, &st) < 0)
    return sp_make_error (err, errno, "%s: stat", SP_BUNDLE_SCRIPT);
  if (!S_ISREG (st.st_mode) || st.st_size != 0 || st.st_uid != 0 || (st.st_mode & 07777) != 0444)
    return sp_make_error (err, 0, "%s: not the empty placeholder the bundle was written with",
                          SP_BUNDLE_SCRIPT);
  *fd_out = get_and_reset_fd (&fd);
  return 0;
}

int
sp_bundle_put_script (int script_fd, const void *script, size_t script_len, sp_error_t *err)
{
  struct stat st;

  /* Still empty: nothing wrote through another way since the open.  */
  if (fstat (script_fd, &st) < 0)
    return sp_make_error (err, errno, "%s: stat", SP_BUNDLE_SCRIPT);
  if (!S_ISREG (st.st_mode) || st.st_size != 0)
    return sp_make_error (err, 0, "%s: no longer the empty placeholder", SP_BUNDLE_SCRIPT);
  if (script_len > 0 && sp_write_all (script_fd, script, script_len, err) < 0)
    return sp_error_wrap (err, "%s", SP_BUNDLE_SCRIPT);
  return 0;
}

int
sp_bundle_mount_tmp (int dirfd, const char *bundle_dir, sp_error_t *err)
{
  cleanup_free char *target = NULL;

  if (mkdirat (dirfd, SP_BUNDLE_TMP, 0755) < 0)
    return sp_make_error (err, errno, "%s: mkdir", SP_BUNDLE_TMP);
  if (asprintf (&target, "%s/%s", bundle_dir, SP_BUNDLE_TMP) < 0)
    {
      target = NULL;
      return sp_make_error (err, ENOMEM, "allocate");
    }
  if (mount ("sealed-probe-tmp", target, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
             "mode=1777,size=" SP_SANDBOX_TMP_SIZE ",nr_inodes=" SP_SANDBOX_TMP_INODES)
      < 0)
    return sp_make_error (err, errno, "%s: mount its tmpfs", SP_BUNDLE_TMP);
  return 0;
}
