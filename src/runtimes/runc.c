/* The runc backend: the shared OCI command-line driver (oci_cli.c) with
   runc's name, no extra flags, and its version rule (docs/runtimes.md).  */
#define _GNU_SOURCE
#include "runtimes/backends.h"

#include <stdio.h>
#include <string.h>

#include "runtimes/oci_cli.h"

#define RUNC_MIN_MAJOR 1
#define RUNC_MIN_MINOR 1
#define RUNC_MIN_PATCH 0

/* "runc version X.Y.Z" and then anything that is not a digit (a `+ds1`
   suffix, `-rc.1`, the newline), at least RUNC_MIN_*.  */
static int
runc_version_check (const char *out, char *why, size_t why_size)
{
  static const char prefix[] = "runc version ";
  char shown[96];
  unsigned v[3];

  if (strncmp (out, prefix, sizeof (prefix) - 1) != 0
      || oci_cli_parse_triple (out + sizeof (prefix) - 1, v) < 0)
    {
      oci_cli_shown_line (out, shown, sizeof (shown));
      snprintf (why, why_size, "--version printed `%s`, not `runc version X.Y.Z`", shown);
      return -1;
    }
  /* Each part has at most 6 digits (oci_cli_parse_triple).  */
  if ((uint64_t)v[0] * 1000000000000ULL + (uint64_t)v[1] * 1000000ULL + v[2]
      < (uint64_t)RUNC_MIN_MAJOR * 1000000000000ULL + (uint64_t)RUNC_MIN_MINOR * 1000000ULL + RUNC_MIN_PATCH)
    {
      snprintf (why, why_size, "runc %u.%u.%u is older than the %d.%d.%d this needs", v[0], v[1], v[2],
                RUNC_MIN_MAJOR, RUNC_MIN_MINOR, RUNC_MIN_PATCH);
      return -1;
    }
  return 0;
}

void
sp_runc_accepts (char *out, size_t size)
{
  snprintf (out, size, "runc %d.%d.%d or later", RUNC_MIN_MAJOR, RUNC_MIN_MINOR, RUNC_MIN_PATCH);
}

static const struct oci_flavor runc_flavor = {
  .binary_name = "runc",
  .state_name = "runc",
  .version_check = runc_version_check,
  .start_by_exec_fifo = true,
  .remove_reaped_directly = true,
  .adopt_helpers = NULL,
};

static const char *const runc_evidence[] = {
  "/proc/version is the host kernel's, and no gVisor file (/proc/sentry-meminfo) exists",
  NULL,
};

static const struct sp_runtime_ops runc_ops = OCI_CLI_OPS ("runc", SP_SANDBOX_KERNEL_HOST, runc_evidence);

int
sp_runc_open (const struct sp_runtime_settings *settings, struct sp_runtime_backend **out, sp_error_t *err)
{
  return oci_cli_open (&runc_flavor, &runc_ops, settings, NULL, out, err);
}
