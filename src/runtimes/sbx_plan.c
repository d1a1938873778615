/* The sbx command lines of one invocation, from the bundle's config.json
   (sbx_plan.h).  The bundle is the one source of truth: every limit sbx can be
   told comes from it, and a bundle the backend cannot express exactly is
   refused.  What a microVM gives by being one (its own kernel, so its own
   namespaces, capabilities, syscall filter and /proc) sbx is not told; the
   backend's requirements (docs/runtimes.md) say why that holds.  */
#define _GNU_SOURCE
#include "runtimes/sbx_cli.h"
#include "runtimes/sbx_plan.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cleanup.h"
#include "os/fileio.h"
#include "text/json.h"

#define CONFIG_MAX_BYTES (1024 * 1024)

/* The three paths the VM shares with the host, in create's order; every
   other mount of the bundle (proc, dev, tmp, ...) is the VM's own.  */
static const char *const shared_targets[] = { "/probe/repo", "/probe/probe.py", "/probe/out", NULL };

void
sbx_argv_release (struct sbx_argv *a)
{
  for (size_t i = 0; i < a->n; i++)
    free (a->words[i]);
  a->n = 0;
  a->words[0] = NULL;
}

void
sbx_plan_release (struct sbx_plan *plan)
{
  sbx_argv_release (&plan->create);
  sbx_argv_release (&plan->exec);
  sbx_argv_release (&plan->stop);
  sbx_argv_release (&plan->rm);
  sbx_argv_release (&plan->ls);
}

static int __attribute__ ((format (printf, 3, 4)))
add (struct sbx_argv *a, sp_error_t *err, const char *fmt, ...)
{
  va_list ap;
  int n;

  if (a->n == SBX_ARGV_MAX)
    return sp_make_error (err, 0, "bundle: an sbx command line would pass %d words", SBX_ARGV_MAX);
  va_start (ap, fmt);
  n = vasprintf (&a->words[a->n], fmt, ap);
  va_end (ap);
  if (n < 0)
    {
      a->words[a->n] = NULL;
      return sp_make_error (err, ENOMEM, "allocate");
    }
  a->words[++a->n] = NULL;
  return 0;
}

static const struct sp_json *
get (const struct sp_json *obj, const char *path)
{
  char key[64];

  while (obj != NULL && *path)
    {
      size_t n = strcspn (path, ".");

      snprintf (key, sizeof (key), "%.*s", (int)n, path);
      obj = sp_json_object_get (obj, key);
      path += n;
      if (*path == '.')
        path++;
    }
  return obj;
}

static const char *
str (const struct sp_json *v)
{
  return v != NULL && v->type == SP_JSON_STRING ? v->u.string.data : NULL;
}

static int
integer (const struct sp_json *root, const char *path, int64_t min, int64_t max, int64_t *out,
         sp_error_t *err)
{
  if (sp_json_integer (get (root, path), min, max, out) < 0)
    return sp_make_error (err, 0, "bundle: `%s` is missing or out of range", path);
  return 0;
}

/* "16m" and the like, as tmpfs's size= writes it: bytes.  */
static int
size_bytes (const char *s, int64_t *out)
{
  char *end = NULL;
  unsigned long long n;

  if (s == NULL || *s < '0' || *s > '9')
    return -1;
  errno = 0;
  n = strtoull (s, &end, 10);
  if (errno != 0 || n > (1ULL << 40))
    return -1;
  switch (*end)
    {
    case '\0':
      break;
    case 'k':
      n <<= 10;
      end++;
      break;
    case 'm':
      n <<= 20;
      end++;
      break;
    case 'g':
      n <<= 30;
      end++;
      break;
    default:
      return -1;
    }
  if (*end != '\0')
    return -1;
  *out = (int64_t)n;
  return 0;
}

static bool
has_string (const struct sp_json *array, const char *s)
{
  if (array == NULL || array->type != SP_JSON_ARRAY)
    return false;
  for (size_t i = 0; i < array->u.array.len; i++)
    if (str (array->u.array.items[i]) && strcmp (str (array->u.array.items[i]), s) == 0)
      return true;
  return false;
}

static bool
has_namespace (const struct sp_json *namespaces, const char *type)
{
  for (size_t i = 0; namespaces != NULL && namespaces->type == SP_JSON_ARRAY && i < namespaces->u.array.len;
       i++)
    {
      const char *t = str (sp_json_object_get (namespaces->u.array.items[i], "type"));
      if (t != NULL && strcmp (t, type) == 0)
        return true;
    }
  return false;
}

static const struct sp_json *
mount_at (const struct sp_json *mounts, const char *destination)
{
  for (size_t i = 0; mounts != NULL && mounts->type == SP_JSON_ARRAY && i < mounts->u.array.len; i++)
    {
      const char *d = str (sp_json_object_get (mounts->u.array.items[i], "destination"));
      if (d != NULL && strcmp (d, destination) == 0)
        return mounts->u.array.items[i];
    }
  return NULL;
}

/* The VM's own disk gets the bound the bundle gives its /tmp.  */
static int
disk_limit (const struct sp_json *mounts, int64_t *bytes, sp_error_t *err)
{
  const struct sp_json *tmp = mount_at (mounts, "/tmp");
  const struct sp_json *options = tmp ? sp_json_object_get (tmp, "options") : NULL;

  for (size_t i = 0; options != NULL && options->type == SP_JSON_ARRAY && i < options->u.array.len; i++)
    {
      const char *o = str (options->u.array.items[i]);
      if (o != NULL && strncmp (o, "size=", 5) == 0 && size_bytes (o + 5, bytes) == 0)
        return 0;
    }
  return sp_make_error (err, 0, "bundle: `mounts` has no /tmp with a size= bound");
}

static int
file_size_limit (const struct sp_json *rlimits, int64_t *bytes, sp_error_t *err)
{
  for (size_t i = 0; rlimits != NULL && rlimits->type == SP_JSON_ARRAY && i < rlimits->u.array.len; i++)
    {
      const struct sp_json *r = rlimits->u.array.items[i];
      const char *type = str (sp_json_object_get (r, "type"));
      int64_t soft, hard;

      if (type == NULL || strcmp (type, "RLIMIT_FSIZE") != 0)
        continue;
      if (sp_json_integer (sp_json_object_get (r, "soft"), 1, INT64_MAX, &soft) < 0
          || sp_json_integer (sp_json_object_get (r, "hard"), 1, INT64_MAX, &hard) < 0 || soft != hard)
        break;
      *bytes = hard;
      return 0;
    }
  return sp_make_error (err, 0, "bundle: `process.rlimits` has no RLIMIT_FSIZE with soft equal to hard");
}

/* CPU quota over period, as `--cpus` reads it: "1", "0.5", "1.25".  */
static int
cpus_text (int64_t quota, int64_t period, char *out, size_t size)
{
  int64_t milli = quota * 1000 / period;

  if (quota <= 0 || period <= 0 || quota * 1000 % period != 0 || milli == 0)
    return -1;
  if (milli % 1000 == 0)
    snprintf (out, size, "%" PRId64, milli / 1000);
  else
    snprintf (out, size, "%" PRId64 ".%03" PRId64, milli / 1000, milli % 1000);
  return 0;
}

static int
plan_create (const struct sp_json *config, const char *binary, const char *template_ref, const char *vm_name,
             struct sbx_argv *a, sp_error_t *err)
{
  const struct sp_json *mounts = sp_json_object_get (config, "mounts");
  int64_t memory = 0, quota = 0, period = 0, pids = 0, disk = 0, fsize = 0;
  const char *sources[3];
  bool ro[3];
  char cpus[32];

  /* The bundle always asks for a network namespace of its own: the VM gets
     no network at all.  A bundle without one is not this proxy's.  */
  if (!has_namespace (get (config, "linux.namespaces"), "network"))
    return sp_make_error (err, 0, "bundle: `linux.namespaces` has no network namespace");
  if (integer (config, "linux.resources.memory.limit", 1, INT64_MAX, &memory, err) < 0
      || integer (config, "linux.resources.cpu.quota", 1, INT64_MAX / 1000, &quota, err) < 0
      || integer (config, "linux.resources.cpu.period", 1, INT64_MAX, &period, err) < 0
      || integer (config, "linux.resources.pids.limit", 1, INT32_MAX, &pids, err) < 0
      || disk_limit (mounts, &disk, err) < 0
      || file_size_limit (get (config, "process.rlimits"), &fsize, err) < 0)
    return -1;
  if (cpus_text (quota, period, cpus, sizeof (cpus)) < 0)
    return sp_make_error (err, 0,
                          "bundle: `linux.resources.cpu` is not a whole number of thousandths of a CPU");
  for (size_t i = 0; shared_targets[i] != NULL; i++)
    {
      const struct sp_json *m = mount_at (mounts, shared_targets[i]);
      const char *type = m ? str (sp_json_object_get (m, "type")) : NULL;

      sources[i] = m ? str (sp_json_object_get (m, "source")) : NULL;
      if (type == NULL || strcmp (type, "bind") != 0 || sources[i] == NULL || sources[i][0] != '/'
          || strchr (sources[i], ':') != NULL)
        return sp_make_error (err, 0, "bundle: %s is not a bind of an absolute path without `:`",
                              shared_targets[i]);
      ro[i] = has_string (sp_json_object_get (m, "options"), "ro");
    }

  if (add (a, err, "%s", binary) < 0 || add (a, err, "create") < 0 || add (a, err, "shell") < 0
      || add (a, err, "--name") < 0 || add (a, err, "%s", vm_name) < 0 || add (a, err, "--template") < 0
      || add (a, err, "%s", template_ref) < 0 || add (a, err, "--network=none") < 0
      || add (a, err, "--cpus") < 0 || add (a, err, "%s", cpus) < 0 || add (a, err, "--memory") < 0
      || add (a, err, "%" PRId64, memory) < 0 || add (a, err, "--pids-limit") < 0
      || add (a, err, "%" PRId64, pids) < 0 || add (a, err, "--disk-limit") < 0
      || add (a, err, "%" PRId64, disk) < 0 || add (a, err, "--ulimit-fsize") < 0
      || add (a, err, "%" PRId64, fsize) < 0 || add (a, err, "--quiet") < 0)
    return -1;
  for (size_t i = 0; shared_targets[i] != NULL; i++)
    if (add (a, err, "--mount-target") < 0 || add (a, err, "%s", shared_targets[i]) < 0)
      return -1;
  if (add (a, err, "--") < 0)
    return -1;
  for (size_t i = 0; shared_targets[i] != NULL; i++)
    if (add (a, err, "%s%s", sources[i], ro[i] ? ":ro" : "") < 0)
      return -1;
  return 0;
}

static int
plan_exec (const struct sp_json *config, const char *binary, const char *vm_name, struct sbx_argv *a,
           sp_error_t *err)
{
  const struct sp_json *env = get (config, "process.env");
  const struct sp_json *args = get (config, "process.args");
  const char *cwd = str (get (config, "process.cwd"));
  int64_t uid, gid;

  if (integer (config, "process.user.uid", 0, UINT32_MAX - 1, &uid, err) < 0
      || integer (config, "process.user.gid", 0, UINT32_MAX - 1, &gid, err) < 0)
    return -1;
  if (cwd == NULL || cwd[0] != '/')
    return sp_make_error (err, 0, "bundle: `process.cwd` is not an absolute path");
  if (env == NULL || env->type != SP_JSON_ARRAY || args == NULL || args->type != SP_JSON_ARRAY
      || args->u.array.len == 0)
    return sp_make_error (err, 0, "bundle: `process.env` or `process.args` is not a list");
  if (add (a, err, "%s", binary) < 0 || add (a, err, "exec") < 0 || add (a, err, "--user") < 0
      || add (a, err, "%" PRId64 ":%" PRId64, uid, gid) < 0 || add (a, err, "--workdir") < 0
      || add (a, err, "%s", cwd) < 0)
    return -1;
  for (size_t i = 0; i < env->u.array.len; i++)
    {
      const char *e = str (env->u.array.items[i]);
      if (e == NULL || strchr (e, '=') == NULL || e[0] == '=')
        return sp_make_error (err, 0, "bundle: `process.env[%zu]` is not NAME=VALUE", i);
      if (add (a, err, "--env") < 0 || add (a, err, "%s", e) < 0)
        return -1;
    }
  if (add (a, err, "%s", vm_name) < 0 || add (a, err, "--") < 0)
    return -1;
  for (size_t i = 0; i < args->u.array.len; i++)
    {
      const char *w = str (args->u.array.items[i]);
      if (w == NULL || (i == 0 && w[0] != '/'))
        return sp_make_error (err, 0,
                              "bundle: `process.args[%zu]` is not a string (the first: an absolute path)", i);
      if (add (a, err, "%s", w) < 0)
        return -1;
    }
  return 0;
}

int
sbx_plan_build (const char *binary, const char *template_ref, const char *vm_name, const char *bundle_dir,
                struct sbx_plan *plan, sp_error_t *err)
{
  cleanup_free char *path = NULL;
  cleanup_free char *text = NULL;
  cleanup_json struct sp_json *config = NULL;
  size_t len = 0;
  char *ls[] = SBX_LS_WORDS (binary);

  *plan = (struct sbx_plan){ 0 };
  if (!sbx_name_valid (vm_name, strlen (vm_name)) || !sbx_template_pinned (template_ref))
    return sp_make_error (err, 0, "sbx: a bad VM name or an unpinned template");
  if (asprintf (&path, "%s/config.json", bundle_dir) < 0)
    {
      path = NULL;
      return sp_make_error (err, ENOMEM, "allocate");
    }
  if (sp_read_path_capped (path, CONFIG_MAX_BYTES, &text, &len, err) < 0
      || sp_json_parse (text, len, 64, &config, err) < 0)
    return sp_error_wrap (err, "bundle: config.json");
  if (plan_create (config, binary, template_ref, vm_name, &plan->create, err) < 0
      || plan_exec (config, binary, vm_name, &plan->exec, err) < 0 || add (&plan->stop, err, "%s", binary) < 0
      || add (&plan->stop, err, "stop") < 0 || add (&plan->stop, err, "%s", vm_name) < 0
      || add (&plan->rm, err, "%s", binary) < 0 || add (&plan->rm, err, "rm") < 0
      || add (&plan->rm, err, "%s", vm_name) < 0)
    {
      sbx_plan_release (plan);
      return -1;
    }
  for (size_t i = 0; ls[i] != NULL; i++)
    if (add (&plan->ls, err, "%s", ls[i]) < 0)
      {
        sbx_plan_release (plan);
        return -1;
      }
  return 0;
}
