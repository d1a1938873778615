/* serve's and check's options: see serve_options.h and docs/operations.md.  */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/bounds.h"
#include "base/release_ladder.h"
#include "runtimes/runtime.h"
#include "text/config.h"

#include "build_config.h"
#include "proxy/options.h"
#include "proxy/serve_options.h"
#include "proxy/verbs.h"

/* A decimal 1..max, with nothing around it.  */
static int
parse_count (const char *text, unsigned max, unsigned *out)
{
  unsigned long n;

  if (sp_options_decimal (text, max, &n) < 0)
    return -1;
  *out = (unsigned)n;
  return 0;
}

int
sp_serve_options_parse (const char *verb, const char *usage, int argc, char **argv, bool with_serving,
                        struct sp_serve_options *opt)
{
  const char *concurrency = NULL, *queue = NULL, *queue_wait = NULL, *snapshot = NULL, *scratch = NULL;
  const char *probe_ids = NULL, *release = NULL, *bit_budget = NULL, *run_bit_budget = NULL, *pool = NULL;
  const struct sp_option common[] = {
    { .name = "--config", .value = &opt->config },
    { .name = "--state", .value = &opt->state },
    { .name = "--rootfs", .value = &opt->rootfs },
    { .name = "--runc", .value = &opt->runc },
    { .name = "--runsc", .value = &opt->runsc },
    { .name = "--gvisor-platform", .value = &opt->gvisor_platform },
    { .name = "--docker-socket", .value = &opt->docker_socket },
    { .name = "--docker-state-dir", .value = &opt->docker_state_dir },
    { .name = "--sbx", .value = &opt->sbx },
    { .name = "--sbx-template", .value = &opt->sbx_template },
    { .name = "--release", .value = &release },
    { .name = "--bit-budget", .value = &bit_budget },
    { .name = "--run-bit-budget", .value = &run_bit_budget },
    { .name = "--snapshot", .value = &snapshot },
    { .name = "--scratch-size", .value = &scratch },
    { .name = "--probe-ids", .value = &probe_ids },
    { .name = "--run-dir", .value = &opt->run_dir },
    /* serve's alone from here on.  */
    { .name = "--socket", .value = &opt->socket },
    { .name = "--socket-group", .value = &opt->socket_group },
    { .name = "--ready-file", .value = &opt->ready_file },
    { .name = "--concurrency", .value = &concurrency },
    { .name = "--queue", .value = &queue },
    { .name = "--queue-wait", .value = &queue_wait },
    { .name = "--pool", .value = &pool },
  };
  /* check's alone: its report is JSON, always, so --json asks for what it
     prints anyway, as `status --json` does (docs/operations.md, "JSON").  */
  int json = 0;
  struct sp_option options[sizeof (common) / sizeof (common[0]) + 1];
  size_t n_options = with_serving ? sizeof (common) / sizeof (common[0]) : 17;
  int ret;

  memcpy (options, common, n_options * sizeof (common[0]));
  if (!with_serving)
    options[n_options++] = (struct sp_option){ .name = "--json", .flag = &json };

  *opt = (struct sp_serve_options){
    .verb = verb,
    .concurrency = SP_SERVE_CONCURRENCY_DEFAULT,
    .queue = SP_SERVE_QUEUE_DEFAULT,
    .queue_wait_seconds = SP_SERVE_QUEUE_WAIT_DEFAULT,
    .snapshot = SP_SNAPSHOT_OVERLAY,
    .scratch_bytes = SP_SERVE_SCRATCH_DEFAULT_BYTES,
    /* check's canary always starts cold: only serve has a pool.  */
    .pool = with_serving ? SP_SERVE_POOL_DEFAULT : 0,
  };
  ret = sp_options_parse (verb, usage, argc, argv, options, n_options);
  if (ret != 0)
    return ret;
  if (opt->config == NULL)
    return sp_options_usage_error (verb, usage, "--config is required");
  /* Defaults go in after parsing: the parser refuses an option set twice.  */
  if (opt->state == NULL)
    opt->state = SP_DEFAULT_STATE;
  if (opt->rootfs == NULL)
    opt->rootfs = SP_DEFAULT_ROOTFS;
  if (opt->socket == NULL)
    opt->socket = SP_DEFAULT_SOCKET;
  if (opt->run_dir == NULL)
    opt->run_dir = SP_DEFAULT_RUN_DIR;
  else if (opt->run_dir[0] != '/')
    return sp_options_usage_error (verb, usage, "--run-dir must be an absolute path");
  if (opt->gvisor_platform != NULL && !sp_gvisor_platform_valid (opt->gvisor_platform))
    return sp_options_usage_error (verb, usage, "--gvisor-platform: must be `ptrace`, `systrap` or `kvm`");
  if ((opt->docker_socket != NULL && opt->docker_socket[0] != '/')
      || (opt->docker_state_dir != NULL && opt->docker_state_dir[0] != '/'))
    return sp_options_usage_error (verb, usage,
                                   "--docker-socket and --docker-state-dir must be absolute paths");
  if (sp_options_binary_path (verb, usage, "--runc", opt->runc) != 0
      || sp_options_binary_path (verb, usage, "--runsc", opt->runsc) != 0
      || sp_options_binary_path (verb, usage, "--sbx", opt->sbx) != 0)
    return SP_EXIT_USAGE;
  if (opt->sbx_template != NULL && !sp_sbx_template_pinned (opt->sbx_template))
    return sp_options_usage_error (
        verb, usage,
        "--sbx-template: must be NAME@sha256:<64 lowercase hex>, pinned by digest; "
        "a tag alone can change under you");
  if (release != NULL && sp_release_mode_parse (release, &opt->release) < 0)
    return sp_options_usage_error (verb, usage, "--release: must be `bucketed`, `fixed` or `immediate`");
  if (bit_budget != NULL)
    {
      unsigned long bits;

      if (sp_options_decimal (bit_budget, SP_BIT_BUDGET_MAX, &bits) < 0)
        return sp_options_usage_error (verb, usage, "--bit-budget: must be an integer from 1 to %d bits",
                                       SP_BIT_BUDGET_MAX);
      opt->bit_budget_millibits = (uint64_t)bits * 1000;
      if (opt->release == SP_RELEASE_IMMEDIATE)
        return sp_options_usage_error (verb, usage,
                                       "--bit-budget: --release immediate leaks timing without bound, so no "
                                       "call fits a bit budget; use bucketed or fixed");
    }
  if (run_bit_budget != NULL)
    {
      unsigned long bits;

      if (sp_options_decimal (run_bit_budget, SP_RUN_BIT_BUDGET_MAX, &bits) < 0)
        return sp_options_usage_error (verb, usage,
                                       "--run-bit-budget: must be an integer from 1 to %d bits, for every "
                                       "repository's calls together",
                                       SP_RUN_BIT_BUDGET_MAX);
      opt->run_bit_budget_millibits = (uint64_t)bits * 1000;
      if (opt->release == SP_RELEASE_IMMEDIATE)
        return sp_options_usage_error (verb, usage,
                                       "--run-bit-budget: --release immediate leaks timing without bound, so "
                                       "no call fits a bit budget; use bucketed or fixed");
    }
  if (snapshot != NULL && sp_snapshot_mode_parse (snapshot, &opt->snapshot) < 0)
    return sp_options_usage_error (verb, usage, "--snapshot: must be `overlay` or `copy`");
  if (scratch != NULL
      && sp_size_text_parse (scratch, strlen (scratch), SP_SERVE_SCRATCH_MIN_BYTES,
                             SP_SERVE_SCRATCH_MAX_BYTES, &opt->scratch_bytes)
             < 0)
    return sp_options_usage_error (verb, usage,
                                   "--scratch-size: must be a size like 256m or 2g, from 1m to 16g");
  if (sp_options_probe_ids (verb, usage, probe_ids, &opt->probe_id_base) != 0)
    return SP_EXIT_USAGE;
  if (concurrency != NULL && parse_count (concurrency, SP_SERVE_CONCURRENCY_MAX, &opt->concurrency) < 0)
    return sp_options_usage_error (verb, usage, "--concurrency: must be an integer from 1 to %d",
                                   SP_SERVE_CONCURRENCY_MAX);
  if (queue != NULL && parse_count (queue, SP_SERVE_QUEUE_MAX, &opt->queue) < 0)
    return sp_options_usage_error (verb, usage, "--queue: must be an integer from 1 to %d",
                                   SP_SERVE_QUEUE_MAX);
  if (queue_wait != NULL && parse_count (queue_wait, SP_SERVE_QUEUE_WAIT_MAX, &opt->queue_wait_seconds) < 0)
    return sp_options_usage_error (verb, usage, "--queue-wait: must be an integer from 1 to %d seconds",
                                   SP_SERVE_QUEUE_WAIT_MAX);
  if (pool != NULL && strcmp (pool, "0") == 0)
    opt->pool = 0;
  else if (pool != NULL && parse_count (pool, SP_SERVE_POOL_MAX, &opt->pool) < 0)
    return sp_options_usage_error (
        verb, usage, "--pool: must be an integer from 0 (none) to %d sandboxes ahead per repository",
        SP_SERVE_POOL_MAX);
  return 0;
}
