/* The sbx backend: one Docker Sandboxes microVM per invocation, driven
   through the sbx CLI by exec (docs/runtimes.md, "sbx").  Every command
   line is fixed (sbx_plan.c: built from the bundle, nothing from a
   request), every call has a timeout and a bound on what it may print, and
   the CLI gets a fixed environment, without DOCKER_SANDBOXES_PROXY or
   XDG_CONFIG_HOME, which would redirect its daemon and its credentials.
   After verify the struct is only read: run and kill may be called from
   any thread.  */
#define _GNU_SOURCE
#include "runtimes/backends.h"

#include <errno.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/bounds.h"
#include "base/cleanup.h"
#include "base/clock.h"
#include "os/spawn.h"
#include "text/yajl_util.h"

#include "runtimes/binary_check.h"
#include "runtimes/sbx_cli.h"
#include "runtimes/sbx_plan.h"

/* version, ls and the help texts.  */
#define QUERY_TIMEOUT_MS (10 * 1000)
/* create boots a VM; stop and rm tear one down.  */
#define LIFECYCLE_TIMEOUT_MS (30 * 1000)
/* A VM's name is its container id, this, and the state directory's key.  */
#define VM_NAME_SEPARATOR '.'

struct sbx
{
  struct sp_runtime_backend base;
  char *binary; /* absolute; after verify, its realpath */
  char *template_ref;
  char *run_id;
  char *state_key; /* the state directory's dev-inode: the suffix of this state's VM names */
  char *home;
  char *env[4];
  char version[64];
};

static void
describe_status (int status, char *buf, size_t size)
{
  if (WIFEXITED (status))
    snprintf (buf, size, "exited with status %d", WEXITSTATUS (status));
  else if (WIFSIGNALED (status))
    snprintf (buf, size, "died of signal %d", WTERMSIG (status));
  else
    snprintf (buf, size, "ended oddly (%d)", status);
}

/* Runs one sbx command to completion within timeout_ms, its output capped
   at SBX_OUTPUT_MAX.  Returns 0 with *status set, -1 when it could not be
   exec'd (*spawned false) or ran too long or printed too much.  out, when
   not NULL, receives the output (allocated).  */
static int
call (const struct sbx *x, char *const argv[], int timeout_ms, char **out, int *status, bool *spawned,
      sp_error_t *err)
{
  cleanup_free char *buf = malloc (SBX_OUTPUT_MAX + 1);
  size_t len = 0;

  if (out != NULL)
    *out = NULL;
  if (spawned != NULL)
    *spawned = true;
  if (buf == NULL)
    return sp_make_error (err, ENOMEM, "allocate");
  if (access (x->binary, X_OK) < 0)
    {
      if (spawned != NULL)
        *spawned = false;
      return sp_make_error (err, errno, "sbx `%s` cannot be executed", x->binary);
    }
  if (sp_spawn_capture (x->binary, argv, x->env, timeout_ms, buf, SBX_OUTPUT_MAX, &len, status, err) < 0)
    return sp_error_wrap (err, "sbx %s", argv[1]);
  if (strlen (buf) != len)
    return sp_make_error (err, 0, "sbx %s: its output holds a NUL byte", argv[1]);
  if (out != NULL)
    *out = get_and_reset (&buf);
  return 0;
}

/* A call that must exit 0.  */
static int
call_ok (const struct sbx *x, char *const argv[], int timeout_ms, char **out, sp_error_t *err)
{
  char desc[64];
  int status = 0;

  if (call (x, argv, timeout_ms, out, &status, NULL, err) < 0)
    return -1;
  if (!WIFEXITED (status) || WEXITSTATUS (status) != 0)
    {
      if (out != NULL)
        {
          free (*out);
          *out = NULL;
        }
      describe_status (status, desc, sizeof (desc));
      return sp_make_error (err, 0, "sbx %s %s", argv[1], desc);
    }
  return 0;
}

static int
list_names (const struct sbx *x, char ***names, sp_error_t *err)
{
  cleanup_free char *out = NULL;
  char *ls[] = SBX_LS_WORDS (x->binary);

  *names = NULL;
  if (call_ok (x, ls, QUERY_TIMEOUT_MS, &out, err) < 0)
    return -1;
  return sbx_list_parse (out, strlen (out), names, err);
}

/* Whether the CLI reaches its daemon, signed in: `sbx ls` succeeds.  */
static bool
cli_answers (const struct sbx *x)
{
  sp_error_t ignored = NULL;
  char **names = NULL;

  if (list_names (x, &names, &ignored) < 0)
    {
      sp_error_release (&ignored);
      return false;
    }
  sbx_list_free (names);
  return true;
}

static bool
listed (char **names, const char *name)
{
  for (size_t i = 0; names[i] != NULL; i++)
    if (strcmp (names[i], name) == 0)
      return true;
  return false;
}

/* The VM of container sp-<run>-<inv>: "sp-<run>-<inv>.<state key>", so
   that two proxies of two state directories never take each other's VMs
   for orphans.  */
static char *
vm_name (const struct sbx *x, const char *container_id)
{
  char *name = NULL;

  if (container_id == NULL || strncmp (container_id, "sp-", 3) != 0 || !sp_bundle_id_valid (container_id + 3))
    {
      errno = EINVAL;
      return NULL;
    }
  if (asprintf (&name, "%s%c%s", container_id, VM_NAME_SEPARATOR, x->state_key) < 0)
    return NULL;
  return name;
}

static int
sbx_verify (struct sp_runtime_backend *rt, sp_error_t *err)
{
  struct sbx *x = (struct sbx *)rt;
  char *version_argv[] = { NULL, (char *)"version", NULL };
  char *create_help[] = { NULL, (char *)"create", (char *)"--help", NULL };
  char *exec_help[] = { NULL, (char *)"exec", (char *)"--help", NULL };
  cleanup_free char *real = NULL;
  cleanup_free char *out = NULL;
  cleanup_free char *create_text = NULL;
  cleanup_free char *exec_text = NULL;
  char **names = NULL;
  char problems[2048] = "";
  char missing[1024] = "";
  char audited[256];
  unsigned n_missing;

  if (runtime_binary_check (x->binary, &real, err) < 0)
    return -1;
  free (x->binary);
  x->binary = get_and_reset (&real);
  version_argv[0] = create_help[0] = exec_help[0] = x->binary;

  if (call_ok (x, version_argv, QUERY_TIMEOUT_MS, &out, err) < 0
      || sbx_version_parse (out, x->version, sizeof (x->version), err) < 0)
    return sp_error_wrap (err, "sbx `%s`", x->binary);
  if (sbx_audited (x->version) == NULL)
    {
      sbx_audited_list (audited, sizeof (audited));
      snprintf (problems, sizeof (problems),
                "version %s is not one this project has audited (audited: %s; docs/runtimes.md says how to "
                "add one)",
                x->version, audited);
    }
  /* Signed in, and its daemon answers: and its listing is one this backend
     can read, since the orphan sweep acts on it.  */
  if (list_names (x, &names, err) < 0)
    return sp_error_wrap (err,
                          "sbx `%s` %s%s`sbx ls` failed (is it signed in, `sbx login`, and is its daemon "
                          "running?)",
                          x->binary, problems, problems[0] ? "; " : "");
  sbx_list_free (names);
  if (call_ok (x, create_help, QUERY_TIMEOUT_MS, &create_text, err) < 0
      || call_ok (x, exec_help, QUERY_TIMEOUT_MS, &exec_text, err) < 0)
    return sp_error_wrap (err, "sbx `%s` %s", x->binary, problems);
  n_missing = sbx_controls_missing (create_text, exec_text, missing, sizeof (missing));
  if (n_missing > 0)
    snprintf (problems + strlen (problems), sizeof (problems) - strlen (problems),
              "%slacks %u control%s this backend needs: %s", problems[0] ? "; and it " : "", n_missing,
              n_missing == 1 ? "" : "s", missing);
  if (problems[0] != '\0')
    return sp_make_error (err, 0, "sbx `%s` (version %s): %s", x->binary, x->version, problems);
  return 0;
}

static int
sbx_prepare (struct sp_runtime_backend *rt, sp_error_t *err)
{
  (void)rt;
  (void)err;
  return 0;
}

/* Stops and removes the VM, then confirms by listing that it is gone.
   Each step runs whatever the one before did: a VM that did not stop may
   still be removable.  */
static int
remove_vm (const struct sbx *x, const struct sbx_plan *plan, const char *name, sp_error_t *err)
{
  sp_error_t step = NULL;
  char **names = NULL;
  int ret = 0;

  if (call_ok (x, plan->stop.words, LIFECYCLE_TIMEOUT_MS, NULL, &step) < 0)
    {
      *err = step;
      step = NULL;
      ret = -1;
    }
  if (call_ok (x, plan->rm.words, LIFECYCLE_TIMEOUT_MS, NULL, &step) < 0)
    {
      if (ret == 0)
        *err = step;
      else
        sp_error_release (&step);
      step = NULL;
      ret = -1;
    }
  if (list_names (x, &names, &step) < 0)
    {
      if (ret == 0)
        *err = step;
      else
        sp_error_release (&step);
      return -1;
    }
  if (listed (names, name))
    {
      sbx_list_free (names);
      if (ret == 0)
        sp_make_error (err, 0, "sbx: the VM is still listed after `rm`");
      return -1;
    }
  sbx_list_free (names);
  return ret;
}

static int
sbx_run (struct sp_runtime_backend *rt, const struct sp_runtime_job *job, struct sp_run_facts *facts,
         sp_error_t *err)
{
  struct sbx *x = (struct sbx *)rt;
  cleanup_free char *name = vm_name (x, job->container_id);
  struct sbx_plan plan;
  struct sp_child probe = { .pid = -1, .pidfd = -1 };
  sp_error_t removal = NULL;
  bool spawned = false;
  uint64_t start;
  char desc[64];
  int status = 0, ret = -1, waited;

  *facts = (struct sp_run_facts){ .exit_code = -1 };
  if (name == NULL)
    return sp_make_error (err, errno, "sbx: bad container id");
  if (sbx_plan_build (x->binary, x->template_ref, name, job->bundle_dir, &plan, err) < 0)
    return -1;

  if (call (x, plan.create.words, LIFECYCLE_TIMEOUT_MS, NULL, &status, &spawned, err) < 0)
    {
      facts->launched = spawned;
      facts->stage = spawned ? SP_RUN_STAGE_CREATE : SP_RUN_STAGE_NONE;
      if (spawned && remove_vm (x, &plan, name, &removal) < 0)
        sp_error_release (&removal);
      sbx_plan_release (&plan);
      return sp_error_wrap (err, "create");
    }
  facts->launched = true;
  facts->stage = SP_RUN_STAGE_CREATE;
  if (!WIFEXITED (status) || WEXITSTATUS (status) != 0)
    {
      describe_status (status, desc, sizeof (desc));
      if (!cli_answers (x))
        {
          /* As a Docker daemon that does not answer: the host's to fix, and
             nothing was launched (docs/audit.md, "environment").  */
          facts->launched = false;
          facts->stage = SP_RUN_STAGE_NONE;
          sp_make_error (err, 0,
                         "sbx create %s, and `sbx ls` fails too: its daemon or its sign-in cannot be "
                         "reached",
                         desc);
        }
      else
        sp_make_error (err, 0, "sbx create %s", desc);
      goto remove;
    }

  start = sp_monotonic_ns ();
  if (sp_spawn (x->binary, plan.exec.words, x->env, &probe, err) < 0)
    {
      sp_error_wrap (err, "sbx exec");
      goto remove;
    }
  facts->stage = SP_RUN_STAGE_PROBE;
  waited = sp_child_wait (&probe, (int)job->timeout_seconds * 1000, &status, err);
  if (waited == 0)
    {
      /* Killing the CLI does not stop what it started in the VM: stopping
         the VM below does.  */
      facts->timed_out = true;
      sp_child_kill_and_reap (&probe);
    }
  facts->wall_ns = sp_monotonic_ns () - start;
  if (waited < 0)
    {
      sp_child_kill_and_reap (&probe);
      goto remove;
    }
  if (waited == 1)
    {
      if (!WIFEXITED (status))
        {
          describe_status (status, desc, sizeof (desc));
          sp_make_error (err, 0, "sbx exec %s", desc);
          goto remove;
        }
      /* sbx exec exits with the probe's status (128 + N for a signal N).  */
      facts->exit_code = WEXITSTATUS (status);
    }
  ret = 0;

remove:
  if (remove_vm (x, &plan, name, ret == 0 ? err : &removal) < 0)
    ret = -1;
  sp_error_release (&removal);
  sbx_plan_release (&plan);
  return ret;
}

static int
sbx_kill (struct sp_runtime_backend *rt, const char *container_id, sp_error_t *err)
{
  struct sbx *x = (struct sbx *)rt;
  cleanup_free char *name = vm_name (x, container_id);
  char *stop[] = { x->binary, (char *)"stop", name, NULL };

  if (name == NULL)
    return sp_make_error (err, errno, "sbx kill: bad container id");
  return call_ok (x, stop, LIFECYCLE_TIMEOUT_MS, NULL, err);
}

/* name is one of this state directory's VMs, "sp-<run>-<inv>.<key>", and
   of an earlier run unless include_current.  */
static bool
orphan_of_state (const struct sbx *x, const char *name, bool include_current)
{
  const char *sep = strrchr (name, VM_NAME_SEPARATOR);
  size_t run_len = strlen (x->run_id);

  if (sep == NULL || strcmp (sep + 1, x->state_key) != 0 || strncmp (name, "sp-", 3) != 0)
    return false;
  if (include_current)
    return true;
  return !((size_t)(sep - name) > 3 + run_len + 1 && strncmp (name + 3, x->run_id, run_len) == 0
           && name[3 + run_len] == '-');
}

/* The run a VM "sp-<run>-<inv>.<key>" of this state directory belongs to,
   as serve names them (a run id is hex, without `-`), into run.  */
static void
vm_run (const char *name, char run[SP_ID_MAX_CHARS + 1])
{
  size_t len = strcspn (name + 3, "-.");

  snprintf (run, SP_ID_MAX_CHARS + 1, "%.*s", (int)(len < SP_ID_MAX_CHARS ? len : SP_ID_MAX_CHARS), name + 3);
}

/* Whether name is still listed in left.  */
static bool
vm_listed (char **left, const char *name)
{
  for (size_t i = 0; left != NULL && left[i] != NULL; i++)
    if (strcmp (left[i], name) == 0)
      return true;
  return false;
}

static int
sbx_cleanup_orphans (struct sp_runtime_backend *rt, bool include_current, struct sp_orphans_removed *removed,
                     sp_error_t *err)
{
  struct sbx *x = (struct sbx *)rt;
  char **names = NULL;
  char **left = NULL;
  unsigned tried = 0, remaining = 0;

  if (list_names (x, &names, err) < 0)
    return sp_error_wrap (err, "sbx: list the VMs of earlier runs");
  for (size_t i = 0; names[i] != NULL; i++)
    {
      char *stop[] = { x->binary, (char *)"stop", names[i], NULL };
      char *rm[] = { x->binary, (char *)"rm", names[i], NULL };
      sp_error_t ignored = NULL;

      if (!orphan_of_state (x, names[i], include_current))
        continue;
      /* A VM already stopped may refuse a second stop: rm and the listing
         below are what decide.  */
      if (call_ok (x, stop, LIFECYCLE_TIMEOUT_MS, NULL, &ignored) < 0)
        sp_error_release (&ignored);
      if (call_ok (x, rm, LIFECYCLE_TIMEOUT_MS, NULL, &ignored) < 0)
        sp_error_release (&ignored);
      tried++;
    }
  if (tried > 0 && list_names (x, &left, err) < 0)
    {
      sbx_list_free (names);
      return sp_error_wrap (err, "sbx: list the VMs after removing those of earlier runs");
    }
  for (size_t i = 0; left != NULL && left[i] != NULL; i++)
    if (orphan_of_state (x, left[i], include_current))
      remaining++;
  /* What went: each VM tried that the second listing no longer shows.  */
  for (size_t i = 0; tried > 0 && names[i] != NULL; i++)
    {
      char run[SP_ID_MAX_CHARS + 1];

      if (!orphan_of_state (x, names[i], include_current) || vm_listed (left, names[i]))
        continue;
      vm_run (names[i], run);
      if (sp_orphans_note (removed, run, 1, 0, false) < 0)
        {
          sbx_list_free (names);
          sbx_list_free (left);
          return sp_make_error (err, ENOMEM, "allocate");
        }
    }
  sbx_list_free (names);
  sbx_list_free (left);
  if (remaining > 0)
    return sp_make_error (err, 0, "sbx: %u VM%s of this state directory would not go away", remaining,
                          remaining == 1 ? "" : "s");
  return 0;
}

static int
sbx_describe (struct sp_runtime_backend *rt, const struct sp_runtime_job *job, char **json, size_t *len,
              sp_error_t *err)
{
  struct sbx *x = (struct sbx *)rt;
  cleanup_free char *name = job ? vm_name (x, job->container_id) : NULL;
  cleanup_yajl_gen yajl_gen g = yajl_gen_alloc (NULL);
  struct sbx_plan plan;
  const unsigned char *buf;
  size_t buf_len;
  int bad = 0;

  *json = NULL;
  if (job == NULL || name == NULL || g == NULL)
    return sp_make_error (err, 0, "sbx describe: no job, a bad container id, or out of memory");
  if (sbx_plan_build (x->binary, x->template_ref, name, job->bundle_dir, &plan, err) < 0)
    return -1;
  yajl_gen_config (g, yajl_gen_beautify, 1);
  bad |= yajl_gen_map_open (g) != yajl_gen_status_ok;
  bad |= yajl_gen_string (g, (const unsigned char *)"runtime", 7) != yajl_gen_status_ok;
  bad |= yajl_gen_string (g, (const unsigned char *)"sbx", 3) != yajl_gen_status_ok;
  bad |= yajl_gen_string (g, (const unsigned char *)"environment", 11) != yajl_gen_status_ok;
  bad |= yajl_gen_array_open (g) != yajl_gen_status_ok;
  for (size_t i = 0; x->env[i] != NULL; i++)
    bad |= yajl_gen_string (g, (const unsigned char *)x->env[i], strlen (x->env[i])) != yajl_gen_status_ok;
  bad |= yajl_gen_array_close (g) != yajl_gen_status_ok;
  bad |= yajl_gen_string (g, (const unsigned char *)"commands", 8) != yajl_gen_status_ok;
  bad |= yajl_gen_array_open (g) != yajl_gen_status_ok;
  bad |= sp_yajl_gen_command (g, "create", plan.create.words) < 0;
  bad |= sp_yajl_gen_command (g, "exec", plan.exec.words) < 0;
  bad |= sp_yajl_gen_command (g, "stop", plan.stop.words) < 0;
  bad |= sp_yajl_gen_command (g, "rm", plan.rm.words) < 0;
  bad |= sp_yajl_gen_command (g, "ls (confirms the VM is gone)", plan.ls.words) < 0;
  bad |= yajl_gen_array_close (g) != yajl_gen_status_ok;
  bad |= yajl_gen_map_close (g) != yajl_gen_status_ok;
  sbx_plan_release (&plan);
  if (bad || yajl_gen_get_buf (g, &buf, &buf_len) != yajl_gen_status_ok)
    return sp_make_error (err, 0, "describe the sbx command lines: yajl failed");
  *json = strndup ((const char *)buf, buf_len);
  if (*json == NULL)
    return sp_make_error (err, ENOMEM, "allocate");
  *len = buf_len;
  return 0;
}

static void
sbx_close (struct sp_runtime_backend *rt)
{
  struct sbx *x = (struct sbx *)rt;

  if (x == NULL)
    return;
  free (x->binary);
  free (x->template_ref);
  free (x->run_id);
  free (x->state_key);
  free (x->home);
  for (size_t i = 0; x->env[i] != NULL; i++)
    free (x->env[i]);
  free (x);
}

/* What the canary checks on a microVM: a Linux kernel, not gVisor's; that
   it is the VM's own and not the host's is what the audited release
   promises, and the canary cannot see (docs/runtimes.md).  */
static const char *const sbx_evidence[] = {
  "/proc/version is not gVisor's",
  "no /proc/sentry-meminfo",
  NULL,
};

static const struct sp_runtime_ops sbx_ops = {
  .name = "sbx",
  .kernel = SP_SANDBOX_KERNEL_MICROVM,
  .canary_evidence = sbx_evidence,
  .verify = sbx_verify,
  .prepare = sbx_prepare,
  .run = sbx_run,
  .describe = sbx_describe,
  .kill = sbx_kill,
  .cleanup_orphans = sbx_cleanup_orphans,
  .close = sbx_close,
};

void
sp_sbx_accepts (char *out, size_t size)
{
  char audited[256];

  sbx_audited_list (audited, sizeof (audited));
  snprintf (out, size, "an audited sbx release whose help shows every control (audited: %s)", audited);
}

int
sp_sbx_open (const struct sp_runtime_settings *settings, struct sp_runtime_backend **out, sp_error_t *err)
{
  struct sbx *x = NULL;
  struct passwd *pw;
  struct stat st;

  *out = NULL;
  if (settings == NULL || settings->state_dir == NULL || settings->state_dir[0] != '/')
    return sp_make_error (err, 0, "sbx: the state directory must be an absolute path");
  if (settings->run_id == NULL || !sp_bundle_id_valid (settings->run_id))
    return sp_make_error (err, 0, "sbx: run id must be 1 to %d characters of a-z, 0-9 and -",
                          SP_ID_MAX_CHARS);
  if (settings->binary && settings->binary[0] != '/')
    return sp_make_error (err, 0, "sbx: the binary `%s` must be an absolute path", settings->binary);
  if (settings->sbx_template == NULL)
    return sp_make_error (err, 0,
                          "--sbx-template: runtime sbx needs the operator's template, pinned by digest "
                          "(NAME@sha256:<64 hex>)");
  if (!sbx_template_pinned (settings->sbx_template))
    return sp_make_error (err, 0,
                          "--sbx-template: must be NAME@sha256:<64 lowercase hex>, pinned by digest; a "
                          "tag alone can change under you");
  if (stat (settings->state_dir, &st) < 0)
    return sp_make_error (err, errno, "sbx: stat the state directory");
  /* sbx finds its sign-in under HOME: the proxy's own account's, fixed
     here, never the caller's environment.  */
  pw = getpwuid (geteuid ());
  if (pw == NULL || pw->pw_dir == NULL || pw->pw_dir[0] != '/')
    return sp_make_error (err, 0, "sbx: the proxy's account has no home directory");

  x = calloc (1, sizeof (*x));
  if (x == NULL)
    return sp_make_error (err, errno, "allocate");
  x->base.ops = &sbx_ops;
  x->binary = settings->binary ? strdup (settings->binary) : runtime_binary_find ("sbx");
  if (x->binary == NULL)
    {
      int e = errno;
      sbx_close (&x->base);
      return sp_make_error (err, e, "sbx: no `sbx` in %s", SP_RUNTIME_SEARCH_PATH);
    }
  x->template_ref = strdup (settings->sbx_template);
  x->run_id = strdup (settings->run_id);
  if (asprintf (&x->state_key, "%jx-%jx", (uintmax_t)st.st_dev, (uintmax_t)st.st_ino) < 0)
    x->state_key = NULL;
  if (asprintf (&x->env[0], "PATH=%s", SP_RUNTIME_SEARCH_PATH) < 0)
    x->env[0] = NULL;
  else if (asprintf (&x->env[1], "HOME=%s", pw->pw_dir) < 0)
    x->env[1] = NULL;
  else
    x->env[2] = strdup ("LC_ALL=C");
  if (x->template_ref == NULL || x->run_id == NULL || x->state_key == NULL || x->env[2] == NULL)
    {
      sbx_close (&x->base);
      return sp_make_error (err, ENOMEM, "allocate");
    }
  *out = &x->base;
  return 0;
}
