/* The firewall's `enclaves` document: see src/text/config_enclaves.h.  */
#define _GNU_SOURCE
#include "text/config_enclaves.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/bounds.h"
#include "base/cleanup.h"
#include "text/config_entry.h"

#define KEY SP_CONFIG_ENCLAVES_KEY

/* A path below one entry, "enclaves[0].timeout": room for the index and the
   longest key read here.  */
#define PATH_MAX_LEN 64

#define STR_(x)    #x
#define STR(x)     STR_ (x)
#define NOT_LOWER  ", which it cannot lower: write at least that, or leave the key out"
#define REASON_ALL "must be an array of executor entries, each an object with one \"script\" key"
#define REASON_ONE "must declare exactly one of \"script\" and \"agent\" (the firewall's rule too)"
#define REASON_AGENT                                                                                         \
  "is refused: an agent entry runs a model, and no model runs in this proxy (it runs scripts only); "        \
  "give the agent enclave to the firewall"
#define REASON_SECOND                                                                                        \
  "is a second \"script\" entry: this proxy runs one script enclave (run one proxy per enclave), "           \
  "and the firewall allows one too"
#define REASON_RUNTIME                                                                                       \
  "must be one of \"docker\", \"gvisor\", \"sbx\" (the firewall's names; \"runc\" is this proxy's alone: "   \
  "name it in a sealedProbes block)"
#define REASON_IMAGE                                                                                         \
  "is refused: this proxy runs probes in its own pinned rootfs, never an image named in the config"
#define REASON_SCRIPT_BYTES "must be an integer from 1 to 65536"
_Static_assert(SP_SCRIPT_MAX_BYTES == 65536, "REASON_SCRIPT_BYTES quotes SP_SCRIPT_MAX_BYTES");
#define REASON_INVOKE                                                                                        \
  "must be an integer from 1 to " STR (SP_ENCLAVE_INVOCATIONS_MAX) " (the firewall's bound)"
#define REASON_PIDS "must be an integer from 1 to " STR (SP_ENCLAVE_PIDS_LIMIT_MAX) " (the firewall's bound)"
#define REASON_OUTPUT                                                                                        \
  "must be an integer from 1 to " STR (SP_ENCLAVE_OUTPUT_MAX_BYTES) " (the firewall's bound)"
#define REASON_CPU                                                                                           \
  "must be a Docker --cpus value above 0: one or two digits, then optionally a point and one to three "      \
  "digits"
#define REASON_TMPFS     "must be a Docker size: digits without a leading zero, then \"b\", \"k\", \"m\" or \"g\""
#define REASON_CPU_LOW   "asks less than \"1\", one CPU, this proxy's fixed limit" NOT_LOWER
#define REASON_TMPFS_LOW "asks less than \"" SP_SANDBOX_TMP_SIZE "\", this proxy's fixed /tmp size" NOT_LOWER
#define REASON_REPOS     "must be an array of {\"repo\", \"sensitivity\"} objects, at least one"
#define REASON_MAXREPOS  "must hold at most " STR (SP_CONFIG_MAX_REPOS) " repositories"
#define REASON_SCRIPT    "must be an object (an empty one takes the defaults)"

static const char *const runtime_keys[] = { "docker", "gvisor", "sbx" };
static const enum sp_runtime runtime_values[] = { SP_RUNTIME_DOCKER, SP_RUNTIME_GVISOR, SP_RUNTIME_SBX };

/* A path below path into out.  Only known keys and indexes are joined, so
   nothing is cut; a key too long is cut at PATH_MAX_LEN, and only an
   unknown one can be, which is then named through its parent's path.  */
static void __attribute__ ((format (printf, 2, 3))) sub_path (char out[PATH_MAX_LEN], const char *fmt, ...)
{
  va_list ap;

  va_start (ap, fmt);
  (void)vsnprintf (out, PATH_MAX_LEN, fmt, ap);
  va_end (ap);
}

static int
unknown_key (const char *path, const char *key, sp_error_t *err)
{
  /* A key is echoed, quoted and bounded; never a value.  */
  cleanup_free char *quoted = sp_json_quote (key, strlen (key));

  if (quoted == NULL)
    return sp_make_error (err, ENOMEM, "%s", path);
  return sp_make_error (err, 0, "%s: unknown key %s", path, quoted);
}

/* A Docker size, /^[1-9][0-9]*[bkmgBKMG]$/, in bytes; saturates at
   UINT64_MAX, so no text overflows it.  -1 when malformed.  */
static int
docker_size (const char *s, size_t len, uint64_t *bytes)
{
  static const char units[] = "bkmg";
  const char *unit;
  char u;
  uint64_t n = 0;
  unsigned shift;

  if (len < 2 || s[0] < '1' || s[0] > '9')
    return -1;
  u = s[len - 1];
  unit = memchr (units, u >= 'A' && u <= 'Z' ? u - 'A' + 'a' : u, 4); /* "64M" is "64m", as in Docker */
  if (unit == NULL)
    return -1;
  shift = 10 * (unsigned)(unit - units);
  for (size_t i = 0; i + 1 < len; i++)
    {
      if (s[i] < '0' || s[i] > '9')
        return -1;
      n = n > (UINT64_MAX >> shift) / 10 ? UINT64_MAX >> shift : n * 10 + (uint64_t)(s[i] - '0');
    }
  *bytes = n > (UINT64_MAX >> shift) ? UINT64_MAX : n << shift;
  return 0;
}

/* A Docker --cpus value in thousandths, by the firewall's pattern
   /^[0-9]{1,2}(\.[0-9]{1,3})?$/ and above 0.  -1 otherwise.  */
static int
cpu_milli (const char *s, size_t len, uint64_t *milli)
{
  size_t i = 0, frac = 0;
  uint64_t whole = 0, part = 0;

  while (i < len && i < 3 && s[i] >= '0' && s[i] <= '9')
    whole = whole * 10 + (uint64_t)(s[i++] - '0');
  if (i == 0 || i > 2)
    return -1;
  if (i < len)
    {
      if (s[i++] != '.')
        return -1;
      for (; i < len; i++, frac++)
        {
          if (frac == 3 || s[i] < '0' || s[i] > '9')
            return -1;
          part = part * 10 + (uint64_t)(s[i] - '0');
        }
      if (frac == 0)
        return -1;
    }
  for (; frac < 3; frac++)
    part *= 10;
  *milli = whole * 1000 + part;
  return *milli > 0 ? 0 : -1;
}

static int
read_cpu (const struct sp_json *v, const char *path, sp_error_t *err)
{
  uint64_t milli;

  if (v->type != SP_JSON_STRING || cpu_milli (v->u.string.data, v->u.string.len, &milli) < 0)
    return sp_make_error (err, 0, "%s: " REASON_CPU, path);
  if (milli * SP_SANDBOX_CPU_PERIOD_US < (uint64_t)SP_SANDBOX_CPU_QUOTA_US * 1000)
    return sp_make_error (err, 0, "%s: " REASON_CPU_LOW, path);
  return 0;
}

static int
read_tmpfs (const struct sp_json *v, const char *path, sp_error_t *err)
{
  uint64_t asked, ours;

  if (v->type != SP_JSON_STRING || docker_size (v->u.string.data, v->u.string.len, &asked) < 0)
    return sp_make_error (err, 0, "%s: " REASON_TMPFS, path);
  if (docker_size (SP_SANDBOX_TMP_SIZE, strlen (SP_SANDBOX_TMP_SIZE), &ours) < 0)
    return sp_make_error (err, EINVAL, "%s: this build's /tmp size is not a Docker size", path);
  if (asked < ours)
    return sp_make_error (err, 0, "%s: " REASON_TMPFS_LOW, path);
  return 0;
}

/* An integer from 1 to max, the firewall's bound; below ours (a fixed limit
   this proxy enforces and cannot lower), refused naming both.  A number is
   not a string value, so it is echoed.  */
static int
read_fixed (const struct sp_json *v, const char *path, int64_t max, const char *reason, int64_t ours,
            const char *what, sp_error_t *err)
{
  int64_t n;

  if (sp_json_integer (v, 1, max, &n) < 0)
    return sp_make_error (err, 0, "%s: %s", path, reason);
  if (n < ours)
    return sp_make_error (err, 0, "%s: %lld is stricter than %lld %s, this proxy's fixed limit" NOT_LOWER,
                          path, (long long)n, (long long)ours, what);
  return 0;
}

static int
read_script (const struct sp_json *v, const char *path, struct sp_config *c, sp_error_t *err)
{
  char sub[PATH_MAX_LEN];
  int64_t n;

  if (v->type != SP_JSON_OBJECT)
    return sp_make_error (err, 0, "%s: " REASON_SCRIPT, path);
  for (size_t i = 0; i < v->u.object.len; i++)
    {
      const char *key = v->u.object.members[i].key;

      if (strcmp (key, "maxScriptBytes") != 0)
        return unknown_key (path, key, err);
      sub_path (sub, "%s.%s", path, key);
      if (sp_json_integer (v->u.object.members[i].value, 1, SP_SCRIPT_MAX_BYTES, &n) < 0)
        return sp_make_error (err, 0, "%s: " REASON_SCRIPT_BYTES, sub);
      c->max_script_bytes = (size_t)n;
    }
  return 0;
}

static int
read_repos (const struct sp_json *v, const char *path, struct sp_config *c, sp_error_t *err)
{
  char item[PATH_MAX_LEN];
  size_t n;

  if (v->type != SP_JSON_ARRAY || v->u.array.len == 0)
    return sp_make_error (err, 0, "%s: " REASON_REPOS, path);
  n = v->u.array.len;
  if (n > SP_CONFIG_MAX_REPOS)
    return sp_make_error (err, 0, "%s: " REASON_MAXREPOS, path);
  if (sp_config_alloc_repos (c, n) < 0)
    return sp_make_error (err, ENOMEM, "%s", path);
  for (size_t i = 0; i < n; i++)
    {
      sub_path (item, "%s[%zu]", path, i);
      if (sp_config_repo_entry (v->u.array.items[i], item, false, &c->private_repos[i], &c->sensitivity[i],
                                err)
          < 0)
        return -1;
      c->n_private_repos = i + 1;
    }
  return sp_config_repo_duplicates (c->private_repos, n, path, err);
}

static int
read_runtime (const struct sp_json *v, const char *path, struct sp_config *c, sp_error_t *err)
{
  for (size_t i = 0; i < sizeof (runtime_keys) / sizeof (runtime_keys[0]); i++)
    if (v->type == SP_JSON_STRING && strcmp (v->u.string.data, runtime_keys[i]) == 0)
      {
        c->runtime = runtime_values[i];
        return 0;
      }
  return sp_make_error (err, 0, "%s: " REASON_RUNTIME, path);
}

/* One member of the script entry, by its key.  */
static int
read_member (const char *key, const struct sp_json *v, const char *path, struct sp_config *c, sp_error_t *err)
{
  int64_t n;

  if (strcmp (key, "script") == 0)
    return read_script (v, path, c, err);
  if (strcmp (key, "repos") == 0)
    return read_repos (v, path, c, err);
  if (strcmp (key, "timeout") == 0) /* seconds, as the firewall's */
    return sp_config_timeout (v, path, &c->timeout_seconds, err);
  if (strcmp (key, "runtime") == 0)
    return read_runtime (v, path, c, err);
  if (strcmp (key, "image") == 0)
    return sp_make_error (err, 0, "%s: " REASON_IMAGE, path);
  if (strcmp (key, "memoryLimit") == 0)
    return sp_config_memory (v, path, &c->memory_limit_bytes, &c->memory_limit, err);
  if (strcmp (key, "cpuLimit") == 0)
    return read_cpu (v, path, err);
  if (strcmp (key, "tmpfsLimit") == 0)
    return read_tmpfs (v, path, err);
  if (strcmp (key, "pidsLimit") == 0)
    return read_fixed (v, path, SP_ENCLAVE_PIDS_LIMIT_MAX, REASON_PIDS, SP_SANDBOX_PIDS_MAX, "processes",
                       err);
  if (strcmp (key, "maxOutputBytes") == 0)
    return read_fixed (v, path, SP_ENCLAVE_OUTPUT_MAX_BYTES, REASON_OUTPUT, SP_ANSWER_OUTPUT_MAX_BYTES,
                       "bytes (the largest output a probe may write)", err);
  if (strcmp (key, "maxInvocations") == 0)
    {
      if (sp_json_integer (v, 1, SP_ENCLAVE_INVOCATIONS_MAX, &n) < 0)
        return sp_make_error (err, 0, "%s: " REASON_INVOKE, path);
      c->max_invocations = (uint32_t)n;
      return 0;
    }
  return -2; /* not a key of an entry */
}

/* Entry i: its kind first, so that an agent entry is refused as such
   whatever else it holds, then every member in document order.  */
static int
read_entry (const struct sp_json *e, size_t i, bool *have_script, struct sp_config *c, sp_error_t *err)
{
  char path[PATH_MAX_LEN], sub[PATH_MAX_LEN];
  const struct sp_json *script, *agent;

  sub_path (path, KEY "[%zu]", i);
  if (e->type != SP_JSON_OBJECT)
    return sp_make_error (err, 0, "%s: " REASON_ONE, path);
  script = sp_json_object_get (e, "script");
  agent = sp_json_object_get (e, "agent");
  if ((script == NULL) == (agent == NULL))
    return sp_make_error (err, 0, "%s: " REASON_ONE, path);
  if (agent != NULL)
    return sp_make_error (err, 0, "%s.agent: " REASON_AGENT, path);
  if (*have_script)
    return sp_make_error (err, 0, "%s: " REASON_SECOND, path);
  *have_script = true;
  if (sp_json_object_get (e, "repos") == NULL)
    return sp_make_error (err, 0, "%s.repos: required (" REASON_REPOS ")", path);
  for (size_t m = 0; m < e->u.object.len; m++)
    {
      const char *key = e->u.object.members[m].key;
      int r;

      sub_path (sub, "%s.%s", path, key);
      r = read_member (key, e->u.object.members[m].value, sub, c, err);
      if (r == -2)
        return unknown_key (path, key, err);
      if (r < 0)
        return -1;
    }
  return 0;
}

int
sp_config_read_enclaves (const struct sp_json *list, struct sp_config *c, sp_error_t *err)
{
  bool have_script = false;

  if (list->type != SP_JSON_ARRAY || list->u.array.len == 0)
    return sp_make_error (err, 0, KEY ": " REASON_ALL);
  for (size_t i = 0; i < list->u.array.len; i++)
    if (read_entry (list->u.array.items[i], i, &have_script, c, err) < 0)
      return -1;
  c->form = SP_CONFIG_FORM_ENCLAVES;
  c->has_block = true;
  c->enabled = true;
  return 0;
}
