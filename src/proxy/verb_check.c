/* sealed-probe-proxy check: serve's whole preflight, canary included, then
   a report of what it verified, and exit.  The operator's "would serve
   start?" with nothing listening (docs/operations.md).  */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdio.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/release_ladder.h"
#include "runtimes/runtime.h"
#include "stage/secret_env.h"
#include "text/config.h"

#include "proxy/options.h"
#include "proxy/serve_options.h"
#include "proxy/verbs.h"
#include "serve/serve.h"

#define USAGE                                                                                                \
  "usage: sealed-probe-proxy check --config PATH|- [--state DIR] [--rootfs DIR] [--run-dir DIR]\n"           \
  "                                [--runc PATH | --runsc PATH [--gvisor-platform NAME]\n"                   \
  "                                 | --docker-socket PATH [--docker-state-dir PATH]\n"                      \
  "                                 | [--sbx PATH] --sbx-template NAME@sha256:HEX]\n"                        \
  "                                [--snapshot overlay|copy] [--scratch-size SIZE] [--probe-ids BASE]\n"     \
  "                                [--release bucketed|fixed|immediate] [--bit-budget BITS]\n"               \
  "                                [--run-bit-budget BITS] [--json]"

#define fail(...) (sp_verb_report ("check", __VA_ARGS__), SP_EXIT_FAIL)

/* One JSON line.  Repository names, digests and commits passed strict
   character checks when they were loaded, so they need no escaping.  */
static void
report (const struct sp_serve *s)
{
  uint64_t run_budget, run_carried, run_unbounded;
  bool unbounded;
  uint64_t timing = sp_release_timing_millibits (s->opt->release, s->config->timeout_seconds, &unbounded);

  printf ("{\"runtime\":\"%s\",\"rootfs\":\"%s\",\"snapshot\":\"%s\",\"budget_remaining\":%u,",
          sp_runtime_name (s->config->runtime), s->rootfs.digest, sp_snapshot_mode_name (s->opt->snapshot),
          (unsigned)sp_ledger_remaining (s->ledger));
  /* What one call may carry, and what each repository's calls and the
     run's have carried.  */
  printf ("\"release\":\"%s\",\"call_bits\":{\"content\":%u.%03u,\"timing\":",
          sp_release_mode_name (s->opt->release), SP_RELEASE_CONTENT_MILLIBITS / 1000,
          SP_RELEASE_CONTENT_MILLIBITS % 1000);
  if (unbounded)
    printf ("\"unbounded\"},");
  else
    printf ("%" PRIu64 ".%03" PRIu64 "},", timing / 1000, timing % 1000);
  if (s->opt->bit_budget_millibits > 0)
    printf ("\"bit_budget\":%" PRIu64 ",", s->opt->bit_budget_millibits / 1000);
  else
    printf ("\"bit_budget\":null,");
  /* The run's, as the ledger holds it: every repository's calls together.  */
  sp_ledger_run_totals (s->ledger, &run_budget, &run_carried, &run_unbounded);
  if (run_budget > 0)
    printf ("\"run_bit_budget\":%" PRIu64 ",", run_budget / 1000);
  else
    printf ("\"run_bit_budget\":null,");
  printf ("\"run_bits_carried\":%" PRIu64 ".%03" PRIu64 ",\"run_unbounded_calls\":%" PRIu64 ",",
          run_carried / 1000, run_carried % 1000, run_unbounded);
  printf ("\"seeds\":[");
  for (size_t i = 0; i < s->config->n_private_repos; i++)
    {
      uint64_t used, unbounded_calls;

      sp_ledger_repo_totals (s->ledger, s->seeds[i].seed->repo, &used, &unbounded_calls);
      printf ("%s{\"repo\":\"%s\",\"commit\":\"%s\",\"digest\":\"%s\",\"bits_carried\":%" PRIu64 ".%03" PRIu64
              ",\"unbounded_calls\":%" PRIu64 "}",
              i ? "," : "", s->seeds[i].seed->repo, s->seeds[i].seed->commit, s->seeds[i].seed->digest,
              used / 1000, used % 1000, unbounded_calls);
    }
  /* The evidence strings are the backend's own constants, plain ASCII
     without quotes or backslashes: what the canary checked, and found.  */
  printf ("],\"canary\":\"confined\",\"kernel\":\"%s\",\"kernel_evidence\":[",
          s->runtime->ops->kernel == SP_SANDBOX_KERNEL_GVISOR    ? "gvisor"
          : s->runtime->ops->kernel == SP_SANDBOX_KERNEL_MICROVM ? "microvm"
                                                                 : "host");
  for (size_t i = 0; s->runtime->ops->canary_evidence[i] != NULL; i++)
    printf ("%s\"%s\"", i ? "," : "", s->runtime->ops->canary_evidence[i]);
  printf ("]}\n");
}

int
sp_verb_check (int argc, char **argv)
{
  cleanup_error sp_error_t err = NULL;
  cleanup_config struct sp_config *config = NULL;
  cleanup_close int signal_fd = -1;
  struct sp_serve_options opt;
  struct sp_serve s = SP_SERVE_INIT;
  int ret;

  /* check runs what serve runs, so it holds what serve holds: nothing.  */
  sp_env_scrub_all ();
  ret = sp_serve_options_parse ("check", USAGE, argc, argv, false, &opt);
  if (ret != 0)
    return ret < 0 ? SP_EXIT_OK : ret;
  if (geteuid () != 0)
    return fail ("needs root: it mounts a workspace and runs the runtime's canary");
  if (sp_verb_load_enabled_config ("check", opt.config, &config) < 0)
    return SP_EXIT_FAIL;
  /* Its canary makes a sandbox: a stop signal waits for the preflight's
     end, then everything made goes, as in serve.  */
  if ((signal_fd = sp_serve_signals_open (&err)) < 0)
    ret = fail ("%s", sp_error_message (err));
  else if (sp_serve_setup (&s, &opt, config, &err) < 0)
    ret = fail ("%s", sp_error_message (err));
  else if (sp_serve_signals_read (signal_fd, "check") > 0)
    ret = fail ("stopped before it finished: nothing was verified");
  else
    {
      report (&s);
      ret = fflush (stdout) == 0 ? SP_EXIT_OK : fail ("standard output");
    }
  sp_error_release (&err);
  if (sp_serve_teardown (&s, &err) < 0)
    ret = fail ("cleanup: %s", sp_error_message (err));
  return ret;
}
