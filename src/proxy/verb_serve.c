/* sealed-probe-proxy serve: the proxy daemon (docs/operations.md).  It holds
   no credential (its environment is wiped before anything else), has no
   network (a namespace with only `lo`), passes the whole preflight, then
   answers requests on its socket until SIGTERM, SIGINT, SIGHUP or SIGQUIT
   (signals.c).  */
#define _GNU_SOURCE
#include <errno.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "os/log.h"
#include "base/bounds.h"
#include "base/cleanup.h"
#include "stage/secret_env.h"
#include "text/config.h"

#include "build_config.h"
#include "proxy/options.h"
#include "proxy/serve_options.h"
#include "proxy/verbs.h"
#include "serve/serve.h"

#define USAGE                                                                                                \
  "usage: sealed-probe-proxy serve --config PATH|- [--state DIR] [--rootfs DIR] [--socket PATH]\n"           \
  "                                [--socket-group GROUP] [--ready-file PATH] [--concurrency N]\n"           \
  "                                [--queue N] [--queue-wait SECONDS] [--snapshot overlay|copy]\n"           \
  "                                [--scratch-size SIZE] [--probe-ids BASE]\n"                               \
  "                                [--release bucketed|fixed|immediate] [--bit-budget BITS]\n"               \
  "                                [--run-bit-budget BITS] [--pool N] [--run-dir DIR]\n"                     \
  "                                [--runc PATH | --runsc PATH [--gvisor-platform NAME]\n"                   \
  "                                 | --docker-socket PATH [--docker-state-dir PATH]\n"                      \
  "                                 | [--sbx PATH] --sbx-template NAME@sha256:HEX]"

#define fail(...) (sp_verb_report ("serve", __VA_ARGS__), SP_EXIT_FAIL)

static int
parse_group (const char *name, gid_t *gid, sp_error_t *err)
{
  char buf[4096];
  struct group grp, *found = NULL;
  char *end;
  unsigned long n;

  if (name == NULL)
    {
      *gid = 0;
      return 0;
    }
  errno = 0;
  n = strtoul (name, &end, 10);
  if (*name >= '0' && *name <= '9' && *end == '\0' && errno == 0 && n < (gid_t)-1)
    {
      *gid = (gid_t)n;
      return 0;
    }
  if (getgrnam_r (name, &grp, buf, sizeof (buf), &found) != 0 || found == NULL)
    return sp_make_error (err, 0, "--socket-group: no group `%s`", name);
  *gid = found->gr_gid;
  return 0;
}

int
sp_verb_serve (int argc, char **argv)
{
  cleanup_error sp_error_t err = NULL;
  cleanup_config struct sp_config *config = NULL;
  cleanup_close int signal_fd = -1;
  cleanup_close int listen_fd = -1;
  struct sp_serve_options opt;
  struct sp_serve s = SP_SERVE_INIT;
  struct sp_notify notify = { .fd = -1 };
  struct sp_serve_owned socket_owned = { 0 };
  struct sp_serve_owned ready_owned = { 0 };
  gid_t group = 0;
  int ret;

  /* First of all: NOTIFY_SOCKET is the one variable serve needs, taken
     before the whole environment is wiped.  */
  if (sp_notify_open (&notify, &err) < 0)
    {
      sp_env_scrub_all ();
      return fail ("%s", sp_error_message (err));
    }
  sp_env_scrub_all ();

  ret = sp_serve_options_parse ("serve", USAGE, argc, argv, true, &opt);
  if (ret != 0)
    {
      sp_notify_close (&notify);
      return ret < 0 ? SP_EXIT_OK : ret;
    }
  if (geteuid () != 0)
    ret = fail ("needs root: it mounts workspaces and runs the runtime");
  else if (parse_group (opt.socket_group, &group, &err) < 0)
    ret = fail ("%s", sp_error_message (err));
  else if (sp_verb_load_enabled_config ("serve", opt.config, &config) < 0)
    ret = SP_EXIT_FAIL;
  else if ((signal_fd = sp_serve_signals_open (&err)) < 0)
    ret = fail ("%s", sp_error_message (err));
  /* Before the preflight: another instance's live socket is refused at
     once, and a stale ready file goes, so that nothing says ready until
     this instance is.  */
  else if (sp_serve_socket_available (opt.socket, &err) < 0)
    ret = fail ("%s", sp_error_message (err));
  else if (opt.ready_file && sp_ready_file_claim (opt.ready_file, &err) < 0)
    ret = fail ("%s", sp_error_message (err));
  else if (sp_serve_setup (&s, &opt, config, &err) < 0)
    ret = fail ("%s", sp_error_message (err));
  /* A stop asked for during the preflight: never ready, and everything
     made so far goes, as on any stop.  */
  else if (sp_serve_signals_read (signal_fd, "serve") > 0)
    ret = fail ("stopped before it was ready");
  else if (sp_serve_listen (opt.socket, group, &listen_fd, &socket_owned, &err) < 0)
    ret = fail ("%s", sp_error_message (err));
  /* serve.json and the first STATUS=, before anything says ready.  */
  else if (sp_serve_report_start (&s, &notify, &err) < 0)
    ret = fail ("%s", sp_error_message (err));
  else if (opt.ready_file && sp_ready_file_write (opt.ready_file, &ready_owned, &err) < 0)
    ret = fail ("%s", sp_error_message (err));
  else
    {
      sp_log (SP_LOG_NOTICE,
              "sealed-probe-proxy: serve: ready: run %s, %zu repositories, runtime %s, snapshot %s, release "
              "%s%s, "
              "socket %s",
              s.run_id, config->n_private_repos, sp_runtime_name (config->runtime),
              sp_snapshot_mode_name (opt.snapshot), sp_release_mode_name (opt.release),
              opt.release == SP_RELEASE_IMMEDIATE ? " (answers leak timing)" : "", opt.socket);
      sp_notify_send (&notify, "READY=1");
      sp_serve_report_ready (&s);
      ret = sp_serve_loop (&s, listen_fd, signal_fd, &err) < 0 ? fail ("%s", sp_error_message (err))
                                                               : SP_EXIT_OK;
      /* Every worker and the pool have ended: the last counts are final.  */
      sp_serve_report_stop (&s);
      sp_notify_send (&notify, "STOPPING=1");
    }

  /* Whatever happened, nothing of this run stays: not the socket, not the
     ready file, not a container, mount or directory.  The socket and the
     ready file go only while their paths still name the files this instance
     made: another instance's are never removed.  */
  sp_serve_report_stop (&s);
  sp_serve_unlisten (opt.socket, &socket_owned);
  sp_closep (&listen_fd);
  if (opt.ready_file)
    sp_ready_file_remove (opt.ready_file, &ready_owned);
  sp_error_release (&err);
  if (s.config != NULL && sp_serve_teardown (&s, &err) < 0)
    ret = fail ("cleanup: %s", sp_error_message (err));
  sp_notify_close (&notify);
  if (ret == SP_EXIT_OK)
    sp_log (SP_LOG_NOTICE, "sealed-probe-proxy: serve: stopped");
  return ret;
}
