/* The gVisor backend: the shared OCI command-line driver (oci_cli.c) with
   runsc's fixed flags, its version rule, and its gofer (docs/runtimes.md).
   Every flag is fixed here or by the operator (the platform); none comes
   from a request, and never --allow-flag-override or a debug, strace or
   profile flag.  */
#define _GNU_SOURCE
#include "runtimes/backends.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cleanup.h"
#include "os/fileio.h"
#include "text/json.h"

#include "runtimes/oci_cli.h"

/* The oldest runsc this backend has been checked against: Debian 12's
   0.0~20221219.0.  Its flags, its state file and its canary evidence are
   what this file relies on.  */
#define RUNSC_MIN_DATE 20221219u
/* runsc's state file holds the whole spec: generous, but bounded.  */
#define RUNSC_STATE_MAX_BYTES (4u * 1024 * 1024)
#define RUNSC_STATE_MAX_DEPTH 64

static const char *const platforms[] = { "ptrace", "systrap", "kvm", NULL };

void
sp_runsc_accepts (char *out, size_t size)
{
  snprintf (out, size, "runsc released on %u-%02u-%02u or later", RUNSC_MIN_DATE / 10000,
            RUNSC_MIN_DATE / 100 % 100, RUNSC_MIN_DATE % 100);
}

bool
sp_gvisor_platform_valid (const char *name)
{
  for (size_t i = 0; platforms[i] != NULL; i++)
    if (strcmp (name, platforms[i]) == 0)
      return true;
  return false;
}

/* The release date in "runsc version 0.0~YYYYMMDD.N" (Debian) or "runsc
   version release-YYYYMMDD.N" (upstream), at least RUNSC_MIN_DATE.  */
static int
runsc_version_check (const char *out, char *why, size_t why_size)
{
  static const char prefix[] = "runsc version ";
  const char *p = out + sizeof (prefix) - 1;
  char shown[96];
  unsigned date = 0;
  int digits = 0;

  if (strncmp (out, prefix, sizeof (prefix) - 1) != 0)
    goto unparsable;
  if (strncmp (p, "0.0~", 4) == 0)
    p += 4;
  else if (strncmp (p, "release-", 8) == 0)
    p += 8;
  else
    goto unparsable;
  while (p[digits] >= '0' && p[digits] <= '9' && digits < 9)
    {
      date = date * 10 + (unsigned)(p[digits] - '0');
      digits++;
    }
  if (digits != 8 || p[8] != '.' || p[9] < '0' || p[9] > '9')
    goto unparsable;
  if (date < RUNSC_MIN_DATE)
    {
      snprintf (why, why_size, "runsc %u is older than the %u this needs", date, RUNSC_MIN_DATE);
      return -1;
    }
  return 0;

unparsable:
  oci_cli_shown_line (out, shown, sizeof (shown));
  snprintf (why, why_size,
            "--version printed `%s`, not `runsc version 0.0~YYYYMMDD.N` or `release-YYYYMMDD.N`", shown);
  return -1;
}

/* `runsc create` leaves two processes to this subreaper: the sandbox (the
   pid file's) and its gofer, which serves the sandbox's files.  The gofer's
   pid is only in runsc's state file for the container: take hold of it, so
   that it is reaped once the sandbox is gone (`runsc delete` waits for it
   to go).  */
static int
runsc_adopt_gofer (const struct oci_cli *c, const char *container_id, struct sp_child *gofer, sp_error_t *err)
{
  cleanup_free char *path = NULL;
  cleanup_free char *text = NULL;
  cleanup_json struct sp_json *state = NULL;
  size_t len = 0;
  int64_t pid;

  if (asprintf (&path, "%s/%s_sandbox:%s.state", c->root, container_id, container_id) < 0)
    {
      path = NULL;
      return sp_make_error (err, ENOMEM, "allocate");
    }
  /* A binary that passed as runsc but is not (a runc renamed) made no such
     file: refused here, before the canary runs anything.  */
  if (sp_read_path_capped (path, RUNSC_STATE_MAX_BYTES, &text, &len, err) < 0)
    return sp_error_wrap (err, "runsc's state for `%s` (is `%s` really runsc?)", container_id, c->binary);
  if (sp_json_parse (text, len, RUNSC_STATE_MAX_DEPTH, &state, err) < 0)
    return sp_error_wrap (err, "runsc's state `%s`", path);
  if (sp_json_integer (sp_json_object_get (state, "goferPid"), 2, INT32_MAX, &pid) < 0)
    return sp_make_error (err, 0, "runsc's state `%s` names no gofer pid", path);
  if (sp_child_adopt ((pid_t)pid, gofer, err) < 0)
    return sp_error_wrap (err, "the gofer of `%s`", container_id);
  return 0;
}

static const struct oci_flavor runsc_flavor = {
  .binary_name = "runsc",
  .state_name = "runsc",
  .version_check = runsc_version_check,
  .adopt_helpers = runsc_adopt_gofer,
};

/* What the canary finds only under gVisor's sentry (src/serve/invocation.c).
   /sys is no evidence: the bundle covers it on every backend.  */
static const char *const runsc_evidence[] = {
  "/proc/version is gVisor's fixed `Linux version 4.4.0 #1 SMP Sun Jan 10 15:06:54 PST 2016`",
  "/proc/sentry-meminfo, a file only gVisor's sentry has, exists",
  "the root filesystem is 9p, served by the gofer",
  NULL,
};

static const struct sp_runtime_ops runsc_ops
    = OCI_CLI_OPS ("gvisor", SP_SANDBOX_KERNEL_GVISOR, runsc_evidence);

int
sp_runsc_open (const struct sp_runtime_settings *settings, struct sp_runtime_backend **out, sp_error_t *err)
{
  const char *platform
      = settings && settings->gvisor_platform ? settings->gvisor_platform : SP_GVISOR_PLATFORM_DEFAULT;
  cleanup_free char *platform_flag = NULL;

  if (!sp_gvisor_platform_valid (platform))
    return sp_make_error (err, 0, "gvisor: platform `%s` is not one of ptrace, systrap, kvm", platform);
  if (asprintf (&platform_flag, "--platform=%s", platform) < 0)
    {
      platform_flag = NULL;
      return sp_make_error (err, ENOMEM, "allocate");
    }
  /* --network=none: no network stack but loopback.  --oci-seccomp: the
     bundle's linux.seccomp is enforced by the sentry too (runsc ignores it
     otherwise).  Each goes on every command, so that start, kill and delete
     see the sandbox as create made it.  */
  const char *flags[] = { "--network=none", "--oci-seccomp", platform_flag, NULL };
  return oci_cli_open (&runsc_flavor, &runsc_ops, settings, flags, out, err);
}
