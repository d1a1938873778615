/* The container-create body, mapped field by field from the bundle the
   proxy generated (docs/runtimes.md, "Docker: the field mapping").  A field
   Docker has no equivalent for, or a value this mapping does not know, is
   refused with its name: the container never runs weaker than the bundle
   says.  */
#define _GNU_SOURCE
#include "runtimes/docker_create.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>

#include "base/cleanup.h"
#include "bundle/bundle.h"
#include "text/yajl_util.h"

#define G(call)                                                                                              \
  do                                                                                                         \
    {                                                                                                        \
      if ((call) != yajl_gen_status_ok)                                                                      \
        return sp_make_error (err, 0, "container body: yajl failed");                                        \
    }                                                                                                        \
  while (0)

/* The container's command: a fixed Python wrapper that points fds 1 and 2
   at /dev/null and execs the bundle's process.args with exactly its
   process.env.  dockerd adds HOSTNAME to every container's environment
   and hands fds 1 and 2 to the shim as pipes (which it and dockerd then
   drain, spending CPU outside the sandbox's cgroup); no create field
   turns either off.  fd 0 stays: the stdin pipe the attach holds open
   (docker.c), at its end once the probe runs, as on runc.  Its argv: the number of variables, the variables,
   then the bundle's argv.  The rootfs has no shell: python3 is what is
   there.  Only the wrapper ever runs with Docker's stdio and HOSTNAME,
   and it reads neither.  */
const char *const docker_wrapper_args[]
    = { "/usr/bin/python3", "-I", "-S", "-B", "-c", DOCKER_WRAPPER_CODE, NULL };

const char *const docker_checked_fields[] = {
  "Image",
  "Cmd",
  "Entrypoint",
  "OpenStdin",
  "StdinOnce",
  "WorkingDir",
  "Env",
  "User",
  "Hostname",
  "Domainname",
  "NetworkDisabled",
  "Labels",
  "HostConfig.NetworkMode",
  "HostConfig.ReadonlyRootfs",
  "HostConfig.CapDrop",
  "HostConfig.SecurityOpt",
  "HostConfig.Memory",
  "HostConfig.MemorySwap",
  "HostConfig.PidsLimit",
  "HostConfig.NanoCpus",
  "HostConfig.Ulimits",
  "HostConfig.Tmpfs",
  "HostConfig.MaskedPaths",
  "HostConfig.ReadonlyPaths",
  "HostConfig.Runtime",
  "HostConfig.OomScoreAdj",
  "HostConfig.IpcMode",
  "HostConfig.CgroupnsMode",
  "HostConfig.CgroupParent",
  "HostConfig.Mounts",
  "HostConfig.LogConfig",
  "HostConfig.Privileged",
  NULL,
};

bool
docker_json_equal (const struct sp_json *a, const struct sp_json *b)
{
  if (a == NULL || b == NULL || a->type != b->type)
    return a == b;
  switch (a->type)
    {
    case SP_JSON_NULL:
      return true;
    case SP_JSON_BOOL:
      return a->u.boolean == b->u.boolean;
    case SP_JSON_NUMBER:
      return strcmp (a->u.number, b->u.number) == 0;
    case SP_JSON_STRING:
      return a->u.string.len == b->u.string.len
             && memcmp (a->u.string.data, b->u.string.data, a->u.string.len) == 0;
    case SP_JSON_ARRAY:
      if (a->u.array.len != b->u.array.len)
        return false;
      for (size_t i = 0; i < a->u.array.len; i++)
        if (!docker_json_equal (a->u.array.items[i], b->u.array.items[i]))
          return false;
      return true;
    case SP_JSON_OBJECT:
      /* Every member of a must be in b with an equal value: the daemon may
         add members of its own, never drop or change ours.  A false it
         leaves out is false (Go's omitempty).  */
      for (size_t i = 0; i < a->u.object.len; i++)
        {
          const struct sp_json *want = a->u.object.members[i].value;
          const struct sp_json *have = sp_json_object_get (b, a->u.object.members[i].key);

          if (have == NULL && want->type == SP_JSON_BOOL && !want->u.boolean)
            continue;
          if (!docker_json_equal (want, have))
            return false;
        }
      return true;
    default:
      return false;
    }
}

/* Writes a parsed value back out, as it was (numbers by their text).  */
static int
json_gen (const struct sp_json *v, yajl_gen g)
{
  if (v == NULL)
    return -1;
  switch (v->type)
    {
    case SP_JSON_NULL:
      return yajl_gen_null (g) == yajl_gen_status_ok ? 0 : -1;
    case SP_JSON_BOOL:
      return yajl_gen_bool (g, v->u.boolean) == yajl_gen_status_ok ? 0 : -1;
    case SP_JSON_NUMBER:
      return yajl_gen_number (g, v->u.number, strlen (v->u.number)) == yajl_gen_status_ok ? 0 : -1;
    case SP_JSON_STRING:
      return yajl_gen_string (g, (const unsigned char *)v->u.string.data, v->u.string.len)
                     == yajl_gen_status_ok
                 ? 0
                 : -1;
    case SP_JSON_ARRAY:
      if (yajl_gen_array_open (g) != yajl_gen_status_ok)
        return -1;
      for (size_t i = 0; i < v->u.array.len; i++)
        if (json_gen (v->u.array.items[i], g) < 0)
          return -1;
      return yajl_gen_array_close (g) == yajl_gen_status_ok ? 0 : -1;
    case SP_JSON_OBJECT:
      if (yajl_gen_map_open (g) != yajl_gen_status_ok)
        return -1;
      for (size_t i = 0; i < v->u.object.len; i++)
        if (yajl_gen_string (g, (const unsigned char *)v->u.object.members[i].key,
                             strlen (v->u.object.members[i].key))
                != yajl_gen_status_ok
            || json_gen (v->u.object.members[i].value, g) < 0)
          return -1;
      return yajl_gen_map_close (g) == yajl_gen_status_ok ? 0 : -1;
    default:
      return -1;
    }
}

static const struct sp_json *
get (const struct sp_json *obj, const char *key)
{
  return sp_json_object_get (obj, key);
}

static const char *
str (const struct sp_json *v)
{
  return v != NULL && v->type == SP_JSON_STRING ? v->u.string.data : NULL;
}

static bool
is_true (const struct sp_json *v)
{
  return v != NULL && v->type == SP_JSON_BOOL && v->u.boolean;
}

static bool
is_false (const struct sp_json *v)
{
  return v != NULL && v->type == SP_JSON_BOOL && !v->u.boolean;
}

static bool
empty_array (const struct sp_json *v)
{
  return v != NULL && v->type == SP_JSON_ARRAY && v->u.array.len == 0;
}

static int
gen_str (yajl_gen g, const char *s)
{
  return yajl_gen_string (g, (const unsigned char *)s, strlen (s));
}

static int
gen_num (yajl_gen g, const struct sp_json *v)
{
  return yajl_gen_number (g, v->u.number, strlen (v->u.number));
}

/* Only the keys in allowed; another is a field this mapping does not know.  */
static int
only_keys (const struct sp_json *obj, const char *where, const char *const *allowed, sp_error_t *err)
{
  if (obj == NULL || obj->type != SP_JSON_OBJECT)
    return sp_make_error (err, 0, "bundle: `%s` is missing or not an object", where);
  for (size_t i = 0; i < obj->u.object.len; i++)
    {
      bool known = false;
      for (size_t j = 0; allowed[j] != NULL && !known; j++)
        known = strcmp (obj->u.object.members[i].key, allowed[j]) == 0;
      if (!known)
        return sp_make_error (err, 0,
                              "bundle: `%s.%.60s` has no Docker equivalent here; refusing to run weaker",
                              where, obj->u.object.members[i].key);
    }
  return 0;
}

static int
gen_str_array (yajl_gen g, const struct sp_json *v, const char *where, sp_error_t *err)
{
  if (v == NULL || v->type != SP_JSON_ARRAY)
    return sp_make_error (err, 0, "bundle: `%s` is not an array", where);
  G (yajl_gen_array_open (g));
  for (size_t i = 0; i < v->u.array.len; i++)
    {
      const char *s = str (v->u.array.items[i]);
      if (s == NULL)
        return sp_make_error (err, 0, "bundle: `%s[%zu]` is not a string", where, i);
      G (gen_str (g, s));
    }
  G (yajl_gen_array_close (g));
  return 0;
}

static int
options_have (const struct sp_json *options, const char *option)
{
  for (size_t i = 0; options && options->type == SP_JSON_ARRAY && i < options->u.array.len; i++)
    if (str (options->u.array.items[i]) && strcmp (str (options->u.array.items[i]), option) == 0)
      return 1;
  return 0;
}

/* The options of a mount as one comma list (for HostConfig.Tmpfs).  */
static char *
options_joined (const struct sp_json *options)
{
  size_t len = 1;
  char *out;

  for (size_t i = 0; i < options->u.array.len; i++)
    len += options->u.array.items[i]->u.string.len + 1;
  out = calloc (1, len);
  for (size_t i = 0; out && i < options->u.array.len; i++)
    {
      if (i)
        strcat (out, ",");
      strcat (out, options->u.array.items[i]->u.string.data);
    }
  return out;
}

/* A bind's source as the daemon sees it; it must be mounted with the
   bundle's nosuid, nodev and noexec (and read-only when read_only): a
   Docker read-write bind cannot add those flags, it keeps its source's.  */
static int
bind_source (const char *source, const struct docker_paths *paths, const struct sp_json *options,
             bool read_only, char **out, sp_error_t *err)
{
  size_t n = strlen (paths->state_dir);
  struct statvfs st;

  if (statvfs (source, &st) < 0)
    return sp_make_error (err, errno, "bundle: a bind source");
  if ((options_have (options, "noexec") && !(st.f_flag & ST_NOEXEC))
      || (options_have (options, "nosuid") && !(st.f_flag & ST_NOSUID))
      || (options_have (options, "nodev") && !(st.f_flag & ST_NODEV)))
    return sp_make_error (err, 0,
                          "bundle: a bind's source is not mounted with the bundle's nosuid, nodev and "
                          "noexec, which a Docker bind cannot add");
  if (read_only && !(st.f_flag & ST_RDONLY))
    return sp_make_error (err, 0, "bundle: a read-only bind's source is not a read-only mount");
  /* Under the state directory, the daemon's own path for it; elsewhere (a
     dry run's bundle), the path as it is.  */
  if (strncmp (source, paths->state_dir, n) != 0 || source[n] != '/')
    *out = strdup (source);
  else if (asprintf (out, "%s%s", paths->daemon_state_dir, source + n) < 0)
    *out = NULL;
  if (*out == NULL)
    return sp_make_error (err, ENOMEM, "allocate");
  return 0;
}

/* Whether source is bundle_dir's script, the one read-only bind.  */
static bool
is_script (const char *source, const char *bundle_dir)
{
  size_t n = bundle_dir != NULL ? strlen (bundle_dir) : 0;

  return n > 0 && strncmp (source, bundle_dir, n) == 0 && source[n] == '/'
         && strcmp (source + n + 1, SP_BUNDLE_SCRIPT) == 0;
}

static int
gen_mounts (yajl_gen g, const struct sp_json *mounts, const char *bundle_dir,
            const struct docker_paths *paths, sp_error_t *err)
{
  static const char *const mount_keys[] = { "destination", "type", "source", "options", NULL };

  if (mounts == NULL || mounts->type != SP_JSON_ARRAY)
    return sp_make_error (err, 0, "bundle: `mounts` is not an array");
  /* Tmpfs first: one object.  */
  G (gen_str (g, "Tmpfs"));
  G (yajl_gen_map_open (g));
  for (size_t i = 0; i < mounts->u.array.len; i++)
    {
      const struct sp_json *m = mounts->u.array.items[i];
      const char *dest = str (get (m, "destination")), *type = str (get (m, "type"));

      if (only_keys (m, "mounts[]", mount_keys, err) < 0)
        return -1;
      /* /dev too: a tmpfs of the user's there makes Docker drop every
         mount of its own under /dev (shm, pts, mqueue), which the bundle
         does not have.  Docker adds nodev to a Tmpfs entry; the bundle's
         /dev has device nodes, so a /dev without nodev says `dev`.  */
      if (dest && type && strcmp (type, "tmpfs") == 0
          && (strcmp (dest, "/tmp") == 0 || strcmp (dest, "/dev") == 0))
        {
          const struct sp_json *options = get (m, "options");
          cleanup_free char *opts = NULL;
          cleanup_free char *with_dev = NULL;

          for (size_t j = 0; options != NULL && options->type == SP_JSON_ARRAY && j < options->u.array.len;
               j++)
            if (str (options->u.array.items[j]) == NULL)
              options = NULL;
          if (options == NULL || options->type != SP_JSON_ARRAY)
            return sp_make_error (err, 0, "bundle: the options of the tmpfs at `%.60s` are not strings",
                                  dest);
          opts = options_joined (options);
          if (opts == NULL)
            return sp_make_error (err, ENOMEM, "allocate");
          if (!options_have (options, "nodev") && asprintf (&with_dev, "%s,dev", opts) < 0)
            {
              with_dev = NULL;
              return sp_make_error (err, ENOMEM, "allocate");
            }
          G (gen_str (g, dest));
          G (gen_str (g, with_dev ? with_dev : opts));
        }
    }
  /* The bundle mounts no cgroup file system; Docker mounts its
     hierarchies at /sys/fs/cgroup unless the user mounts there.  An
     empty read-only tmpfs is what the bundle's sysfs shows there.  */
  G (gen_str (g, DOCKER_CGROUP_MOUNT));
  G (gen_str (g, DOCKER_CGROUP_MOUNT_OPTIONS));
  G (yajl_gen_map_close (g));
  G (gen_str (g, "Mounts"));
  G (yajl_gen_array_open (g));
  for (size_t i = 0; i < mounts->u.array.len; i++)
    {
      const struct sp_json *m = mounts->u.array.items[i];
      const struct sp_json *options = get (m, "options");
      const char *dest = str (get (m, "destination")), *type = str (get (m, "type"));
      const char *source = str (get (m, "source"));

      if (dest == NULL || type == NULL || options == NULL || options->type != SP_JSON_ARRAY)
        return sp_make_error (err, 0, "bundle: `mounts[%zu]` is malformed", i);
      /* Docker's own /proc and /sys are what the bundle asks: proc nosuid,
         noexec, nodev; sysfs read-only, nosuid, noexec, nodev.  /dev is
         Docker's tmpfs (mode 755: only root could write it, and the probe
         is not root); /tmp is HostConfig.Tmpfs, above.  */
      if ((strcmp (dest, "/proc") == 0 && strcmp (type, "proc") == 0)
          || (strcmp (dest, "/sys") == 0 && strcmp (type, "sysfs") == 0)
          || (strcmp (dest, "/dev") == 0 && strcmp (type, "tmpfs") == 0)
          || (strcmp (dest, "/tmp") == 0 && strcmp (type, "tmpfs") == 0))
        continue;
      if (strcmp (type, "bind") != 0 || source == NULL)
        return sp_make_error (err, 0, "bundle: the mount at `%.60s` has no Docker equivalent here", dest);
      {
        cleanup_free char *daemon_source = NULL;
        bool ro = options_have (options, "ro");

        if (!ro && !options_have (options, "rw"))
          return sp_make_error (err, 0, "bundle: the bind at `%.60s` is neither ro nor rw", dest);
        /* Read-only binds go in read-write (below): the script is made a
           read-only mount at start (docker.c), any other one must be one
           already.  */
        if (bind_source (source, paths, options, ro && !is_script (source, bundle_dir), &daemon_source, err)
            < 0)
          return -1;
        G (yajl_gen_map_open (g));
        G (gen_str (g, "Type"));
        G (gen_str (g, "bind"));
        G (gen_str (g, "Source"));
        G (gen_str (g, daemon_source));
        G (gen_str (g, "Target"));
        G (gen_str (g, dest));
        /* Docker remounts a ReadOnly bind with MS_RDONLY alone, which
           clears nosuid, nodev and noexec: the script became mappable
           PROT_EXEC.  A read-write bind is not remounted and keeps its
           source's flags, so the script goes in read-write from a source
           that docker.c makes a read-only bind of itself (seal_script)
           before the start: ro, nosuid, nodev, noexec inside.  */
        G (gen_str (g, "ReadOnly"));
        G (yajl_gen_bool (g, 0));
        G (yajl_gen_map_close (g));
      }
    }
  G (yajl_gen_array_close (g));
  return 0;
}

static int
gen_ulimits (yajl_gen g, const struct sp_json *rlimits, sp_error_t *err)
{
  static const char *const names[][2] = {
    { "RLIMIT_CORE", "core" },
    { "RLIMIT_FSIZE", "fsize" },
    { "RLIMIT_NOFILE", "nofile" },
    { "RLIMIT_NPROC", "nproc" },
  };

  if (rlimits == NULL || rlimits->type != SP_JSON_ARRAY)
    return sp_make_error (err, 0, "bundle: `process.rlimits` is not an array");
  G (gen_str (g, "Ulimits"));
  G (yajl_gen_array_open (g));
  for (size_t i = 0; i < rlimits->u.array.len; i++)
    {
      const struct sp_json *r = rlimits->u.array.items[i];
      const char *type = str (get (r, "type"));
      const char *name = NULL;

      for (size_t j = 0; type && j < sizeof (names) / sizeof (names[0]); j++)
        if (strcmp (type, names[j][0]) == 0)
          name = names[j][1];
      if (name == NULL || get (r, "hard") == NULL || get (r, "soft") == NULL
          || get (r, "hard")->type != SP_JSON_NUMBER || get (r, "soft")->type != SP_JSON_NUMBER)
        return sp_make_error (err, 0, "bundle: `process.rlimits[%zu]` has no Docker equivalent here", i);
      G (yajl_gen_map_open (g));
      G (gen_str (g, "Name"));
      G (gen_str (g, name));
      G (gen_str (g, "Hard"));
      G (gen_num (g, get (r, "hard")));
      G (gen_str (g, "Soft"));
      G (gen_num (g, get (r, "soft")));
      G (yajl_gen_map_close (g));
    }
  G (yajl_gen_array_close (g));
  return 0;
}

/* linux: the namespaces Docker gives every container, the resources, the
   masked paths, the seccomp profile.  */
static int
gen_linux (yajl_gen g, const struct sp_json *lx, sp_error_t *err)
{
  static const char *const linux_keys[]
      = { "namespaces",    "resources",         "cgroupsPath", "maskedPaths",
          "readonlyPaths", "rootfsPropagation", "seccomp",     NULL };
  static const char *const resource_keys[] = { "devices", "memory", "cpu", "pids", NULL };
  static const char *const wanted_ns[] = { "pid", "network", "ipc", "uts", "mount", "cgroup" };
  const struct sp_json *ns, *res, *memory, *cpu, *pids, *devices;
  cleanup_yajl_gen yajl_gen seccomp_gen = yajl_gen_alloc (NULL);
  const unsigned char *buf;
  size_t len;

  if (only_keys (lx, "linux", linux_keys, err) < 0)
    return -1;
  ns = get (lx, "namespaces");
  if (ns == NULL || ns->type != SP_JSON_ARRAY
      || ns->u.array.len != sizeof (wanted_ns) / sizeof (wanted_ns[0]))
    return sp_make_error (err, 0,
                          "bundle: `linux.namespaces` is not pid, network, ipc, uts, mount and cgroup "
                          "(Docker has no per-container user namespace)");
  for (size_t i = 0; i < ns->u.array.len; i++)
    {
      const char *t = str (get (ns->u.array.items[i], "type"));
      if (t == NULL || strcmp (t, wanted_ns[i]) != 0 || ns->u.array.items[i]->u.object.len != 1)
        return sp_make_error (err, 0, "bundle: `linux.namespaces[%zu]` has no Docker equivalent here", i);
    }
  if (str (get (lx, "rootfsPropagation")) == NULL || strcmp (str (get (lx, "rootfsPropagation")), "private"))
    return sp_make_error (err, 0, "bundle: `linux.rootfsPropagation` is not private");
  res = get (lx, "resources");
  if (only_keys (res, "linux.resources", resource_keys, err) < 0)
    return -1;
  devices = get (res, "devices");
  if (devices == NULL || devices->type != SP_JSON_ARRAY || devices->u.array.len != 1
      || !is_false (get (devices->u.array.items[0], "allow"))
      || str (get (devices->u.array.items[0], "access")) == NULL
      || strcmp (str (get (devices->u.array.items[0], "access")), "rwm") != 0)
    return sp_make_error (err, 0, "bundle: `linux.resources.devices` is not deny-all, Docker's default");
  memory = get (res, "memory");
  cpu = get (res, "cpu");
  pids = get (res, "pids");
  if (get (memory, "limit") == NULL || get (memory, "swap") == NULL || get (cpu, "quota") == NULL
      || get (cpu, "period") == NULL || get (pids, "limit") == NULL || memory->u.object.len != 2
      || cpu->u.object.len != 2 || pids->u.object.len != 1)
    return sp_make_error (err, 0, "bundle: `linux.resources` has a limit with no Docker equivalent here");
  G (gen_str (g, "Memory"));
  G (gen_num (g, get (memory, "limit")));
  G (gen_str (g, "MemorySwap"));
  G (gen_num (g, get (memory, "swap")));
  /* Docker takes the CPU share as NanoCpus (and refuses it beside
     CpuQuota): quota / period CPUs.  */
  {
    int64_t quota = 0, period = 0;
    if (sp_json_integer (get (cpu, "quota"), 1, INT32_MAX, &quota) < 0
        || sp_json_integer (get (cpu, "period"), 1000, 1000000, &period) < 0)
      return sp_make_error (err, 0, "bundle: `linux.resources.cpu` is not a quota and a period");
    G (gen_str (g, "NanoCpus"));
    G (yajl_gen_integer (g, (long long)(quota * 1000000000LL / period)));
  }
  G (gen_str (g, "PidsLimit"));
  G (gen_num (g, get (pids, "limit")));
  /* The bundle's cgroup is the container's parent: Docker puts the
     container's own below it, and the parent outlives the container, so
     its (hierarchical) statistics can be read after the exit.  */
  {
    const char *cg = str (get (lx, "cgroupsPath"));
    size_t n = strlen (DOCKER_CGROUP_PARENT);

    if (cg == NULL || strncmp (cg, DOCKER_CGROUP_PARENT, n) != 0 || cg[n] != '/' || strstr (cg, "..") != NULL)
      return sp_make_error (err, 0, "bundle: `linux.cgroupsPath` is not under %s", DOCKER_CGROUP_PARENT);
    G (gen_str (g, "CgroupParent"));
    G (gen_str (g, cg));
  }
  G (gen_str (g, "MaskedPaths"));
  if (gen_str_array (g, get (lx, "maskedPaths"), "linux.maskedPaths", err) < 0)
    return -1;
  G (gen_str (g, "ReadonlyPaths"));
  if (gen_str_array (g, get (lx, "readonlyPaths"), "linux.readonlyPaths", err) < 0)
    return -1;

  /* The profile, as the bundle holds it, is Docker's own seccomp format.  */
  if (seccomp_gen == NULL)
    return sp_make_error (err, ENOMEM, "allocate");
  if (json_gen (get (lx, "seccomp"), seccomp_gen) < 0
      || yajl_gen_get_buf (seccomp_gen, &buf, &len) != yajl_gen_status_ok)
    return sp_make_error (err, 0, "bundle: `linux.seccomp` cannot be written back");
  {
    cleanup_free char *opt = NULL;
    if (asprintf (&opt, "seccomp=%.*s", (int)len, (const char *)buf) < 0)
      {
        opt = NULL;
        return sp_make_error (err, ENOMEM, "allocate");
      }
    G (gen_str (g, "SecurityOpt"));
    G (yajl_gen_array_open (g));
    G (gen_str (g, "no-new-privileges:true"));
    G (gen_str (g, opt));
    G (yajl_gen_array_close (g));
  }
  return 0;
}

/* Cmd: the wrapper (docker_wrapper_args), the bundle's env, its args.  */
static int
gen_cmd (yajl_gen g, const struct sp_json *process, sp_error_t *err)
{
  const struct sp_json *env = get (process, "env"), *args = get (process, "args");
  char count[24];

  if (env == NULL || env->type != SP_JSON_ARRAY || args == NULL || args->type != SP_JSON_ARRAY
      || args->u.array.len == 0)
    return sp_make_error (err, 0, "bundle: `process.args` or `process.env` is not an array");
  G (yajl_gen_array_open (g));
  for (size_t i = 0; docker_wrapper_args[i] != NULL; i++)
    G (gen_str (g, docker_wrapper_args[i]));
  snprintf (count, sizeof (count), "%zu", env->u.array.len);
  G (gen_str (g, count));
  for (size_t i = 0; i < env->u.array.len; i++)
    {
      const char *s = str (env->u.array.items[i]);
      if (s == NULL || strchr (s, '=') == NULL)
        return sp_make_error (err, 0, "bundle: `process.env[%zu]` is not NAME=VALUE", i);
      G (gen_str (g, s));
    }
  for (size_t i = 0; i < args->u.array.len; i++)
    {
      const char *s = str (args->u.array.items[i]);
      if (s == NULL)
        return sp_make_error (err, 0, "bundle: `process.args[%zu]` is not a string", i);
      G (gen_str (g, s));
    }
  G (yajl_gen_array_close (g));
  return 0;
}

int
docker_create_body (const struct sp_json *config, const char *bundle_dir, const char *image,
                    const char *state_key, const struct docker_paths *paths, char **body, sp_error_t *err)
{
  static const char *const top_keys[]
      = { "ociVersion", "process", "root", "hostname", "domainname", "mounts", "annotations", "linux", NULL };
  static const char *const process_keys[]
      = { "terminal",        "user",        "args", "env", "cwd", "capabilities", "rlimits",
          "noNewPrivileges", "oomScoreAdj", NULL };
  static const char *const cap_sets[]
      = { "bounding", "effective", "inheritable", "permitted", "ambient", NULL };
  cleanup_yajl_gen yajl_gen g = yajl_gen_alloc (NULL);
  const struct sp_json *process, *user, *caps, *root, *annotations;
  const unsigned char *buf;
  size_t len;
  char user_text[32];

  *body = NULL;
  if (g == NULL || bundle_dir == NULL)
    return sp_make_error (err, ENOMEM, "allocate");
  if (only_keys (config, "(bundle)", top_keys, err) < 0)
    return -1;
  process = get (config, "process");
  if (only_keys (process, "process", process_keys, err) < 0)
    return -1;
  if (!is_false (get (process, "terminal")) || !is_true (get (process, "noNewPrivileges")))
    return sp_make_error (err, 0,
                          "bundle: `process.terminal` must be false and `process.noNewPrivileges` true");
  user = get (process, "user");
  if (get (user, "uid") == NULL || get (user, "gid") == NULL || get (user, "uid")->type != SP_JSON_NUMBER
      || get (user, "gid")->type != SP_JSON_NUMBER || !empty_array (get (user, "additionalGids")))
    return sp_make_error (err, 0, "bundle: `process.user` has no Docker equivalent here");
  snprintf (user_text, sizeof (user_text), "%s:%s", get (user, "uid")->u.number, get (user, "gid")->u.number);
  caps = get (process, "capabilities");
  if (only_keys (caps, "process.capabilities", cap_sets, err) < 0)
    return -1;
  for (size_t i = 0; cap_sets[i] != NULL; i++)
    if (!empty_array (get (caps, cap_sets[i])))
      return sp_make_error (err, 0, "bundle: `process.capabilities.%s` is not empty", cap_sets[i]);
  root = get (config, "root");
  if (!is_true (get (root, "readonly")))
    return sp_make_error (err, 0, "bundle: `root.readonly` is not true");
  annotations = get (config, "annotations");
  if (annotations == NULL || annotations->type != SP_JSON_OBJECT)
    return sp_make_error (err, 0, "bundle: `annotations` is not an object");

  G (yajl_gen_map_open (g));
  G (gen_str (g, "Image"));
  G (gen_str (g, image));
  G (gen_str (g, "Cmd"));
  if (gen_cmd (g, process, err) < 0)
    return -1;
  G (gen_str (g, "Entrypoint"));
  G (yajl_gen_array_open (g));
  G (yajl_gen_array_close (g));
  G (gen_str (g, "WorkingDir"));
  if (str (get (process, "cwd")) == NULL)
    return sp_make_error (err, 0, "bundle: `process.cwd` is missing");
  G (gen_str (g, str (get (process, "cwd"))));
  G (gen_str (g, "Env"));
  if (gen_str_array (g, get (process, "env"), "process.env", err) < 0)
    return -1;
  G (gen_str (g, "User"));
  G (gen_str (g, user_text));
  G (gen_str (g, "Hostname"));
  if (str (get (config, "hostname")) == NULL || str (get (config, "domainname")) == NULL)
    return sp_make_error (err, 0, "bundle: `hostname` or `domainname` is missing");
  G (gen_str (g, str (get (config, "hostname"))));
  G (gen_str (g, "Domainname"));
  G (gen_str (g, str (get (config, "domainname"))));
  G (gen_str (g, "NetworkDisabled"));
  G (yajl_gen_bool (g, 1));
  G (gen_str (g, "AttachStdin"));
  G (yajl_gen_bool (g, 0));
  G (gen_str (g, "AttachStdout"));
  G (yajl_gen_bool (g, 0));
  G (gen_str (g, "AttachStderr"));
  G (yajl_gen_bool (g, 0));
  G (gen_str (g, "Tty"));
  G (yajl_gen_bool (g, 0));
  /* A stdin the daemon keeps open until the one attach to it ends
     (docker.c): the signal to an interpreter started ahead.  */
  G (gen_str (g, "OpenStdin"));
  G (yajl_gen_bool (g, 1));
  G (gen_str (g, "StdinOnce"));
  G (yajl_gen_bool (g, 1));
  G (gen_str (g, "Labels"));
  G (yajl_gen_map_open (g));
  for (size_t i = 0; i < annotations->u.object.len; i++)
    {
      const char *v = str (annotations->u.object.members[i].value);
      if (v == NULL)
        return sp_make_error (err, 0, "bundle: an annotation is not a string");
      G (gen_str (g, annotations->u.object.members[i].key));
      G (gen_str (g, v));
    }
  G (gen_str (g, DOCKER_LABEL_STATE));
  G (gen_str (g, state_key));
  G (yajl_gen_map_close (g));

  G (gen_str (g, "HostConfig"));
  G (yajl_gen_map_open (g));
  G (gen_str (g, "NetworkMode"));
  G (gen_str (g, "none"));
  G (gen_str (g, "ReadonlyRootfs"));
  G (yajl_gen_bool (g, 1));
  G (gen_str (g, "CapDrop"));
  G (yajl_gen_array_open (g));
  G (gen_str (g, "ALL"));
  G (yajl_gen_array_close (g));
  G (gen_str (g, "Runtime"));
  G (gen_str (g, "runc"));
  /* A private IPC namespace, as the bundle's, and no /dev/shm in it.  */
  G (gen_str (g, "IpcMode"));
  G (gen_str (g, "none"));
  G (gen_str (g, "CgroupnsMode"));
  G (gen_str (g, "private"));
  /* The probe's stdout and stderr are kept nowhere: no log file on the
     daemon's disk that a probe could fill or that would outlive it.  */
  G (gen_str (g, "LogConfig"));
  G (yajl_gen_map_open (g));
  G (gen_str (g, "Type"));
  G (gen_str (g, "none"));
  G (yajl_gen_map_close (g));
  G (gen_str (g, "Privileged"));
  G (yajl_gen_bool (g, 0));
  G (gen_str (g, "OomScoreAdj"));
  if (get (process, "oomScoreAdj") == NULL || get (process, "oomScoreAdj")->type != SP_JSON_NUMBER)
    return sp_make_error (err, 0, "bundle: `process.oomScoreAdj` is missing");
  G (gen_num (g, get (process, "oomScoreAdj")));
  if (gen_ulimits (g, get (process, "rlimits"), err) < 0 || gen_linux (g, get (config, "linux"), err) < 0
      || gen_mounts (g, get (config, "mounts"), bundle_dir, paths, err) < 0)
    return -1;
  G (yajl_gen_map_close (g));
  G (yajl_gen_map_close (g));
  G (yajl_gen_get_buf (g, &buf, &len));
  *body = strndup ((const char *)buf, len);
  return *body ? 0 : sp_make_error (err, ENOMEM, "allocate");
}
